"""`posenc bench http --in-process` drives the real service app (and the bare one) through every bench
case: each request answered 200 with the bytes posenc answers it with, timed per (case, server).
(No speed is asserted: only that the measurement measures the requests it names.)"""

from posenc.bench import http_cases as wire
from posenc.bench import http_inprocess


def test_every_case_is_answered_by_both_apps_and_timed():
    cases = list(wire.CASES)
    best, taskless = http_inprocess.measure(cases, rounds=1, requests=2)
    (bare_http, _), (posenc_http, _) = http_inprocess.PROTOCOLS["bare ASGI"], http_inprocess.PROTOCOLS["posenc"]
    servers = ("bare ASGI", "posenc", bare_http, posenc_http)
    assert {(name, server) for name in cases for server in servers} == set(best)
    # every bench case is one posenc's protocol answers itself, no ASGI task; uvicorn's runs one for each
    assert taskless == {(name, posenc_http) for name in cases}
    assert all(seconds > 0 for seconds in best.values())
    # the bare app answers each case with posenc's own body: the batch is 1024 float32 rows of 128
    assert len(wire.PAYLOADS[b"batch"][0]) == wire.BATCH * 128 * 4
    assert wire.PAYLOADS[b"spec1-json"][0].startswith(b'{"dtype":"float32","shape":[1,128],"data":[[')


def test_the_report_names_every_case_with_its_ratio():
    report = http_inprocess.run(["row-binary", "spec1-binary"], rounds=1, requests=2)
    assert wire.CASES["row-binary"].label in report and wire.CASES["spec1-binary"].label in report
    assert "vs bare, with protocols" in report and "In-process" in report
