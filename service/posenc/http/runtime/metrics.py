"""Prometheus metrics that stay correct with several worker processes and cost well under a microsecond.

Each worker counts into its own small file of int64 slots (mmap, `metrics-<pid>.bin` in the
service's metrics directory); GET /metrics, answered by any worker, sums every file. Files of
workers that exited stay, so counters never go backwards; the in-flight gauge counts only
live workers. (prometheus_client's multiprocess mode does the same with ~3-4 us per update,
a third of the hot route's whole budget, hence this.)
"""

from __future__ import annotations

import hashlib
import mmap
import os
from bisect import bisect_left
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from starlette.routing import compile_path

#: Histogram bucket upper bounds in seconds: 10 us doubling up to ~10.5 s.
BUCKETS = tuple(1e-5 * 2**k for k in range(21))
#: Status codes with their own counter; anything else counts as "other".
STATUSES = (200, 201, 204, 400, 401, 403, 404, 405, 406, 408, 409, 413, 415, 422, 429, 431, 500, 503)
TABLE_RESULTS = ("hit", "miss")
REJECTIONS = ("head_timeout", "head_too_large", "bad_request", "write_stall")
UNMATCHED = "unmatched"
_MAGIC = 0x31534D52434E4550  # "PENCRMS1" little-endian
_HEADER_SLOTS = 3  # magic, layout id, pid


class Layout:
    """Where each counter lives in a worker's slot array; identical in every worker of one service.

    `routes` are (method, path template) pairs; requests matching none count as "unmatched"."""

    def __init__(self, routes: Sequence[tuple[str, str]]):
        self.routes = tuple(routes) + (("", UNMATCHED),)
        self.index = {route: i for i, route in enumerate(self.routes)}
        self._static = {route: i for i, route in enumerate(self.routes) if "{" not in route[1]}
        self._templates = [(method, compile_path(path)[0], i) for i, (method, path) in enumerate(self.routes)
                           if "{" in path]
        n_routes, n_status, n_buckets = len(self.routes), len(STATUSES) + 1, len(BUCKETS) + 1
        self.status_index = {status: i for i, status in enumerate(STATUSES)}
        self.requests = _HEADER_SLOTS
        self.buckets = self.requests + n_routes * n_status
        self.duration_ns = self.buckets + n_routes * n_buckets
        self.response_bytes = self.duration_ns + n_routes
        self.tables = self.response_bytes + n_routes
        self.rejections = self.tables + len(TABLE_RESULTS)
        self.in_flight = self.rejections + len(REJECTIONS)
        self.size = self.in_flight + 1
        self.n_status, self.n_buckets = n_status, n_buckets
        #: per route: (its first request-count slot, first bucket slot, duration slot, bytes slot),
        #: so that counting a request (`observe`, on every request) does no offset arithmetic
        self.route_slots = tuple((self.requests + r * n_status, self.buckets + r * n_buckets,
                                  self.duration_ns + r, self.response_bytes + r) for r in range(n_routes))
        self.other_status = n_status - 1
        ident = repr((self.routes, STATUSES, BUCKETS, TABLE_RESULTS, REJECTIONS)).encode()
        self.ident = int.from_bytes(hashlib.sha256(ident).digest()[:7], "little")


class Metrics:
    """This process's counters. Updated only from the event-loop thread (no locks needed)."""

    def __init__(self, directory: str | os.PathLike, routes: Sequence[tuple[str, str]]):
        self.directory = Path(directory)
        self.layout = Layout(routes)
        nbytes = self.layout.size * 8
        path = self.directory / f"metrics-{os.getpid()}.bin"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fresh = os.fstat(fd).st_size != nbytes
            if fresh:
                os.ftruncate(fd, 0)
                os.ftruncate(fd, nbytes)
            self._map = mmap.mmap(fd, nbytes)
        finally:
            os.close(fd)
        self.slots = memoryview(self._map).cast("q")
        if fresh or self.slots[0] != _MAGIC or self.slots[1] != self.layout.ident:
            self.slots[3:] = memoryview(bytes(nbytes - 24)).cast("q")  # a stale file from another layout
        self.slots[0], self.slots[1], self.slots[2] = _MAGIC, self.layout.ident, os.getpid()
        self.slots[self.layout.in_flight] = 0

    def route(self, method: str, path: str) -> int:
        """The route index of a request path (FastAPI does not expose the route it matched)."""
        lay = self.layout
        index = lay._static.get((method, path))
        if index is not None:
            return index
        for template_method, regex, index in lay._templates:
            if template_method == method and regex.match(path):
                return index
        return len(lay.routes) - 1

    def observe(self, route: int, status: int, seconds: float, nbytes: int) -> None:
        lay, slots = self.layout, self.slots
        requests, buckets, duration, sent = lay.route_slots[route]
        slots[requests + lay.status_index.get(status, lay.other_status)] += 1
        slots[buckets + bisect_left(BUCKETS, seconds)] += 1
        slots[duration] += int(seconds * 1e9)
        slots[sent] += nbytes

    def table(self, hit: bool) -> None:
        self.slots[self.layout.tables + (0 if hit else 1)] += 1

    def rejection(self, reason: str) -> None:
        self.slots[self.layout.rejections + REJECTIONS.index(reason)] += 1

    def enter(self) -> None:
        self.slots[self.layout.in_flight] += 1

    def leave(self) -> None:
        self.slots[self.layout.in_flight] -= 1

    def close(self) -> None:
        self.slots[self.layout.in_flight] = 0
        self.slots.release()
        self._map.close()

    def render(self) -> str:
        """The Prometheus text exposition of every worker's counters (the files in our directory)."""
        return render(self.directory, self.layout)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _totals(directory: Path, layout: Layout) -> tuple[np.ndarray, int, int]:
    """Sum of every compatible worker file, the in-flight total of the live ones, how many are live."""
    total = np.zeros(layout.size, dtype=np.int64)
    in_flight = live = 0
    for path in sorted(directory.glob("metrics-*.bin")):
        try:
            slots = np.fromfile(path, dtype="<i8")
        except OSError:
            continue
        if slots.shape[0] != layout.size or slots[0] != _MAGIC or slots[1] != layout.ident:
            continue
        total += slots
        if _alive(int(slots[2])):
            in_flight += int(slots[layout.in_flight])
            live += 1
    return total, in_flight, live


def _labels(**labels) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


class _Exposition:
    """Prometheus text format, one family at a time."""

    def __init__(self):
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        self.lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]

    def sample(self, name: str, value, **labels) -> None:
        self.lines.append(f"{name}{_labels(**labels) if labels else ''} {value}")


def render(directory: Path, layout: Layout) -> str:
    total, in_flight, live = _totals(directory, layout)
    out = _Exposition()
    statuses = [str(s) for s in STATUSES] + ["other"]
    out.family("posenc_http_requests_total", "counter", "HTTP requests answered, by route and status.")
    errors: dict[str, int] = {}
    for r, (method, route) in enumerate(layout.routes):
        for s, status in enumerate(statuses):
            count = int(total[layout.requests + r * layout.n_status + s])
            if count:
                out.sample("posenc_http_requests_total", count, method=method, route=route, status=status)
                if status == "other" or int(status) >= 400:
                    errors[status] = errors.get(status, 0) + count
    out.family("posenc_http_errors_total", "counter", "HTTP error responses (status >= 400), by status.")
    for status, count in sorted(errors.items()):
        out.sample("posenc_http_errors_total", count, status=status)
    name = "posenc_http_request_duration_seconds"
    out.family(name, "histogram", "Time from request head to the last response byte handed to the server.")
    for r, (method, route) in enumerate(layout.routes):
        counts = total[layout.buckets + r * layout.n_buckets: layout.buckets + (r + 1) * layout.n_buckets]
        n = int(counts.sum())
        if not n:
            continue
        for bound, cumulative in zip(BUCKETS, np.cumsum(counts)):
            out.sample(f"{name}_bucket", int(cumulative), method=method, route=route, le=f"{bound:.6g}")
        out.sample(f"{name}_bucket", n, method=method, route=route, le="+Inf")
        out.sample(f"{name}_sum", f"{int(total[layout.duration_ns + r]) / 1e9:.9f}", method=method, route=route)
        out.sample(f"{name}_count", n, method=method, route=route)
    out.family("posenc_http_response_bytes_total", "counter", "Response body bytes sent, by route.")
    for r, (method, route) in enumerate(layout.routes):
        if total[layout.response_bytes + r]:
            out.sample("posenc_http_response_bytes_total", int(total[layout.response_bytes + r]), method=method,
                       route=route)
    out.family("posenc_table_requests_total", "counter", "Requests for encodings answered from a shared-memory "
               "table (hit) or computed because no table covered them (miss).")
    for i, result in enumerate(TABLE_RESULTS):
        out.sample("posenc_table_requests_total", int(total[layout.tables + i]), result=result)
    out.family("posenc_http_rejected_connections_total", "counter",
               "Connections closed before a request reached the app.")
    for i, reason in enumerate(REJECTIONS):
        out.sample("posenc_http_rejected_connections_total", int(total[layout.rejections + i]), reason=reason)
    out.family("posenc_http_in_flight", "gauge", "Requests being handled now (all live workers).")
    out.sample("posenc_http_in_flight", in_flight)
    out.family("posenc_http_workers", "gauge", "Worker processes counting into these metrics now.")
    out.sample("posenc_http_workers", live)
    return "\n".join(out.lines) + "\n"


#: The metrics of this process once its service has started (the protocol layer counts rejections here).
_active: Metrics | None = None


def activate(metrics: Metrics | None) -> None:
    global _active
    _active = metrics


def count_rejection(reason: str) -> None:
    if _active is not None:
        _active.rejection(reason)


def render_binary(stats: dict | None) -> str:
    """The native binary server's STATS as Prometheus families (posenc_binary_up 0 when unreachable)."""
    out = _Exposition()
    out.family("posenc_binary_up", "gauge", "1 when the binary-protocol server answered STATS.")
    out.sample("posenc_binary_up", 0 if stats is None else 1)
    if stats is not None:
        out.family("posenc_binary_requests_total", "counter", "Binary-protocol requests, by operation.")
        for op, count in stats["requests"].items():
            out.sample("posenc_binary_requests_total", count, op=op)
        out.family("posenc_binary_errors_total", "counter", "Binary-protocol error frames, by code.")
        for code, count in stats["errors"].items():
            out.sample("posenc_binary_errors_total", count, code=code)
        out.family("posenc_binary_connections_open", "gauge", "Open binary-protocol connections.")
        out.sample("posenc_binary_connections_open", stats["connections"]["open"])
        for key in ("accepted", "rejected", "idle_closed"):
            name = f"posenc_binary_connections_{key}_total"
            out.family(name, "counter", f"Binary-protocol connections {key.replace('_', ' ')}.")
            out.sample(name, stats["connections"][key])
        for key in ("positions", "bytes_in", "bytes_out"):
            out.family(f"posenc_binary_{key}_total", "counter", f"Binary-protocol {key.replace('_', ' ')} served.")
            out.sample(f"posenc_binary_{key}_total", stats[key])
    return "\n".join(out.lines) + "\n"
