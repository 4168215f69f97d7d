"""`posenc bench http --in-process` drives the real service app (and the bare one) through every bench
case: each request answered 200 with the bytes posenc answers it with, timed per (case, server).
(No speed is asserted: only that the measurement measures the requests it names.)"""

from posenc.bench import http as wire
from posenc.bench import http_inprocess


def test_every_case_is_answered_by_both_apps_and_timed():
    cases = list(wire.CASES)
    best = http_inprocess.measure(cases, rounds=1, requests=2)
    assert {(name, server) for name in cases for server in ("bare ASGI", "posenc")} <= set(best)
    answered_in_the_protocol = {name for name, server in best if server == http_inprocess.PROTOCOL}
    assert answered_in_the_protocol == set(cases)  # every bench case is one the protocol answers itself
    assert all(seconds > 0 for seconds in best.values())
    # the bare app answers each case with posenc's own body: the batch is 1024 float32 rows of 128
    assert len(wire.PAYLOADS[b"batch"][0]) == wire.BATCH * 128 * 4
    assert wire.PAYLOADS[b"spec1-json"][0].startswith(b'{"dtype":"float32","shape":[1,128],"data":[[')


def test_the_report_names_every_case_with_its_ratio():
    report = http_inprocess.run(["row-binary", "spec1-binary"], rounds=1, requests=2)
    assert wire.CASES["row-binary"].label in report and wire.CASES["spec1-binary"].label in report
    assert "vs bare ASGI" in report and "In-process" in report
