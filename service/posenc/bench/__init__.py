"""Benchmarks behind `posenc bench NAME`: each compares against baselines in the same run
and prints a markdown table. Modules listed in SUITES provide `add_arguments(parser)` and
`run(args) -> str` (the markdown)."""

SUITES = {
    "tables": "table generation vs textbook numpy and memory write bandwidth",
    "shm": "shared-memory table lookups (numba, Table.lookup, C reader) vs memcpy of the same bytes",
    "http": "HTTP requests/s and P50/P99 (wrk) vs a bare ASGI app returning the same bytes",
    "native": "native SIMD core per ISA path vs numba, textbook numpy and memset (pre-faulted and fresh pages)",
    "qps": "binary-protocol server requests/s and open-loop P99 vs redis (pinned cores)",
    "payments": "the payments user's calls (a connection pool, timestamp positions): ENCODE_SPEC vs a "
                "computed table vs stored rows and redis, saturation then open-loop P99",
    "clients": "the payments scenario through the language clients (clients/<lang>/run-payments) beside "
               "posenc-load: closed-loop req/s, then P50/P99 at the same offered rates",
    "scale": "binary-protocol server requests/s and efficiency per server thread count (load on the other cores)",
    "json": "float32 arrays printed as JSON: libposenc's printer (each writer) vs orjson, the same bytes",
    "startup": "posenc serve from exec to a 200 from /readyz, by phase (median of several starts)",
    "torch": "posenc.torch cos/sin cache vs transformers' rotary module; logit errors of patched tiny models",
}
