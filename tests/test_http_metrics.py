"""Metrics: per-process counter files summed by whoever is scraped; exposition parses as Prometheus text."""

import os
import shutil

import pytest
from posenc.http.runtime.metrics import BUCKETS, Metrics
from prometheus_client.parser import text_string_to_metric_families

ROUTES = [("GET", "/v1/tables/{name}/rows/{position}"), ("POST", "/v1/sinusoidal")]


def _samples(text: str) -> dict:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


@pytest.fixture
def metrics(tmp_path):
    m = Metrics(tmp_path, ROUTES)
    yield m
    m.close()


def test_counts_route_status_latency_bytes_tables(metrics):
    row = metrics.route("GET", "/v1/tables/sin128/rows/5")
    assert row == metrics.layout.index[ROUTES[0]]
    assert metrics.route("POST", "/v1/sinusoidal") == 1
    unmatched = metrics.route("DELETE", "/v1/sinusoidal")
    metrics.observe(row, 200, 15e-6, 512)
    metrics.observe(row, 200, 3e-3, 512)
    metrics.observe(unmatched, 405, 1e-4, 60)
    metrics.observe(1, 799, 1e-4, 0)  # an odd status counts as "other"
    metrics.table(hit=True)
    metrics.table(hit=False)
    metrics.rejection("head_timeout")
    s = _samples(metrics.render())
    labels = (("method", "GET"), ("route", ROUTES[0][1]))
    assert s[("posenc_http_requests_total", labels + (("status", "200"),))] == 2
    assert s[("posenc_http_requests_total", (("method", ""), ("route", "unmatched"), ("status", "405")))] == 1
    assert s[("posenc_http_errors_total", (("status", "405"),))] == 1
    assert s[("posenc_http_errors_total", (("status", "other"),))] == 1
    assert s[("posenc_http_request_duration_seconds_count", labels)] == 2
    assert s[("posenc_http_request_duration_seconds_sum", labels)] == pytest.approx(3.015e-3)
    buckets = {dict(k[1])["le"]: v for k, v in s.items()
               if k[0] == "posenc_http_request_duration_seconds_bucket" and dict(k[1])["route"] == ROUTES[0][1]}
    assert float(min(buckets, key=float)) == BUCKETS[0] == 1e-5
    assert buckets["2e-05"] == 1 and buckets["0.00512"] == 2 and buckets["+Inf"] == 2
    assert s[("posenc_http_response_bytes_total", labels)] == 1024
    assert s[("posenc_table_requests_total", (("result", "hit"),))] == 1
    assert s[("posenc_table_requests_total", (("result", "miss"),))] == 1
    assert s[("posenc_http_rejected_connections_total", (("reason", "head_timeout"),))] == 1


def test_workers_are_summed_and_dead_workers_keep_counts_not_gauges(metrics, tmp_path):
    row = metrics.layout.index[ROUTES[0]]
    metrics.observe(row, 200, 1e-4, 10)
    metrics.enter()
    # another worker's file: the same layout under a pid that no longer runs
    dead = tmp_path / "metrics-999999999.bin"
    shutil.copy(tmp_path / f"metrics-{os.getpid()}.bin", dead)
    words = bytearray(dead.read_bytes())
    words[16:24] = (999999999).to_bytes(8, "little")
    dead.write_bytes(bytes(words))
    (tmp_path / "metrics-7.bin").write_bytes(b"not a metrics file")
    s = _samples(metrics.render())
    labels = (("method", "GET"), ("route", ROUTES[0][1]), ("status", "200"))
    assert s[("posenc_http_requests_total", labels)] == 2
    assert s[("posenc_http_in_flight", ())] == 1  # only the live worker's
    assert s[("posenc_http_workers", ())] == 1
    metrics.leave()


def test_reopening_keeps_counts_and_a_new_layout_starts_clean(tmp_path):
    first = Metrics(tmp_path, ROUTES)
    first.observe(0, 200, 1e-4, 1)
    first.close()
    again = Metrics(tmp_path, ROUTES)
    assert _samples(again.render())[("posenc_http_request_duration_seconds_count",
                                     (("method", "GET"), ("route", ROUTES[0][1])))] == 1
    again.close()
    other = Metrics(tmp_path, ROUTES[:1])
    assert "posenc_http_request_duration_seconds_count" not in other.render()
    other.close()


def test_binary_server_counters_are_exported():
    """The native server's STATS become posenc_binary_* families; unreachable means up 0."""
    from posenc.client import ServerProcess, fetch_stats, server_argv
    from posenc.http.runtime.metrics import render_binary

    assert _samples(render_binary(None)) == {("posenc_binary_up", ()): 0}
    server = ServerProcess(server_argv(port=0))
    try:
        s = _samples(render_binary(fetch_stats(server.tcp_address)))
    finally:
        server.stop()
    assert s[("posenc_binary_up", ())] == 1
    assert s[("posenc_binary_requests_total", (("op", "stats"),))] == 1
    assert s[("posenc_binary_connections_open", ())] == 1
    assert s[("posenc_binary_errors_total", (("code", "bad_frame"),))] == 0
