"""The one case list every language client of the binary protocol is tested with (tests/test_clients.py,
contract in tests/clients/README.md): each case is a request, and what the library says the answer is.

    PYTHONPATH=service python tests/clients/cases.py --out cases.json

Expected rows come from the library's public functions (`posenc.sinusoidal`, `posenc.rope_cos_sin`) and
the table rules of docs/protocol.md (a float64 table gives every dtype rounded once, a float32 table
float32 and its float64 widening, a computed table every dtype rounded once); inline specs are the
blocks `posenc.client` sends, so their frequencies are the library's and a client needs no `pow`.
Error cases name the status, field and words of the server's reply; `refused_locally` cases are bad
input a client must refuse before anything is sent. The server they run against is started with
SERVER_FLAGS and serves TABLES and CORRUPT_TABLES (`publish`), in one private shm directory.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from pathlib import Path

import numpy as np
import posenc
from posenc.client.inline import spec_aux
from posenc.client.protocol import SPEC_PREFIX, SPEC_PREFIX_SIZE, Status
from posenc.dtypes import OUTPUT_DTYPES
from posenc.shm.paths import segment_file
from posenc.tables import TableSpec

HERE = Path(__file__).resolve().parent
LIMIT = posenc.LIMITS.max_abs_position  # 2^53 unless POSENC_MAX_ABS_POSITION says less
LLAMA31 = posenc.RopeSpec.from_hf_config(json.loads((HERE.parent / "fixtures" / "hf_configs" /
                                                     "llama-3.1-8b.json").read_text()))

#: The tables every client reads: stored float32 and float64, a negative start with an odd t2t width,
#: and two named computed encodings (float32 sinusoidal, float64 RoPE) over every position the limit admits.
TABLES = {
    "sin128": TableSpec(posenc.SinusoidalSpec(128), 0, 4096),
    "llama3.1": TableSpec(LLAMA31, 0, 2048, dtype="float64"),
    "t2t-33": TableSpec(posenc.SinusoidalSpec(33, layout="t2t"), -100, 100),
    "sin128-any": TableSpec(posenc.SinusoidalSpec(128), -LIMIT, LIMIT + 1, computed=True),
    "llama3.1-any": TableSpec(LLAMA31, -LIMIT, LIMIT + 1, dtype="float64", computed=True),
}
#: Published, then one data byte flipped (`publish`): the server answers TABLE_UNAVAILABLE for them.
CORRUPT_TABLES = {"sin8-corrupt": TableSpec(posenc.SinusoidalSpec(8), 0, 16)}
#: posenc-server flags the case server runs with: small enough to reach TOO_MANY_POSITIONS,
#: OUTPUT_TOO_LARGE and the row-width limit with small requests.
SERVER_FLAGS = {"max_positions": 1000, "max_response_bytes": 65536, "max_dim": 1024}

DTYPES = ("float32", "float16", "bfloat16", "float64")
#: Positions each table is read at, by position kind (float64 ones are integers for a stored table).
POSITIONS = {
    "sin128": ([0, 1, 17, 4095], [0.0, -0.0, 17.0, 4095.0]),
    "llama3.1": ([0, 1, 1000, 2047], [-0.0, 5.0, 2047.0]),
    "t2t-33": ([-100, -1, 0, 99], [-100.0, -0.0, 99.0]),
    "sin128-any": ([0, 1, -12345, 1_700_000_000_123, LIMIT, -LIMIT], [0.5, -3.75, 1e9 + 0.25, -0.0, float(LIMIT)]),
    "llama3.1-any": ([0, 7, 131071, 1_700_000_000_123, -LIMIT], [0.25, -2.5, 1.7e12 + 0.5, float(-LIMIT)]),
}
#: Inline specs of each shape the block has: Vaswani interleaved, halves, t2t with its zero column,
#: per-column scales (float32's second rounding), RoPE with an attention factor (YaRN) and Llama-3.
SPECS = {
    "vaswani-128": posenc.SinusoidalSpec(128),
    "halves-7": posenc.SinusoidalSpec(7, layout="halves"),
    "t2t-33": posenc.SinusoidalSpec(33, layout="t2t"),
    "scaled-4": posenc.SinusoidalSpec(4, scale=[0.5, -3.0, 1.25, 7.0]),
    "yarn-64": posenc.RopeSpec(64, max_position_embeddings=32768, scaling={
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}),
    "llama3.1": LLAMA31,
}
SPEC_POSITIONS = ([0, 1, 4095, 1_700_000_000_123, -LIMIT], [0.5, -0.0, 1e6 + 0.25, -3.75])


def publish(store) -> None:
    """Publish TABLES and CORRUPT_TABLES in a TableStore, then corrupt the latter (the last data byte)."""
    for name, table in {**TABLES, **CORRUPT_TABLES}.items():
        info = store.publish(name, table)
        if name in CORRUPT_TABLES:
            path = Path(store.root) / segment_file(name, info.generation)
            fd = os.open(path, os.O_WRONLY)
            try:
                os.pwrite(fd, b"\x5a", path.stat().st_size - 1)
            finally:
                os.close(fd)


# --- the library's rows -----------------------------------------------------------------------------

def library_rows(encoding, positions, dtype: str) -> np.ndarray:
    """Rows of a sinusoidal or RoPE encoding from the library's public functions ([cos | sin] for RoPE)."""
    if isinstance(encoding, posenc.SinusoidalSpec):
        return posenc.sinusoidal(positions, encoding.dim, base=encoding.base, layout=encoding.layout,
                                 scale=encoding.scale, dtype=dtype)
    cos, sin = posenc.rope_cos_sin(positions, encoding, dtype=dtype)
    return np.concatenate([cos, sin], axis=1)


def table_rows(table: TableSpec, positions, dtype: str) -> np.ndarray | None:
    """What ENCODE_TABLE answers (docs/protocol.md, Tables): None where a stored float32 table refuses
    16-bit rows (they would be rounded twice)."""
    if table.computed or table.dtype == "float64":
        return library_rows(table.encoding, positions, dtype)
    if dtype in ("float16", "bfloat16"):
        return None
    return library_rows(table.encoding, positions, "float32").astype(dtype)


def rows_expectation(rows: np.ndarray, dtype: str) -> dict:
    """The reply rows (`data_hex`: little-endian bytes of `dtype`) and the values a client decodes them
    to (`values_hex`: float32 for the 32- and 16-bit dtypes, widened exactly, float64 for float64)."""
    values = rows.astype(np.float64 if dtype == "float64" else np.float32)
    return {"rows": rows.shape[0], "width": rows.shape[1], "dtype": dtype,
            "data_hex": rows.astype(OUTPUT_DTYPES[dtype].newbyteorder("<")).tobytes().hex(),
            "values_hex": values.astype(values.dtype.newbyteorder("<")).tobytes().hex()}


# --- how a case spells its parts ---------------------------------------------------------------------

def bits(value: float) -> str:
    """A float64 as 16 hex digits of its bit pattern (NaN, inf and -0.0 travel exactly)."""
    return struct.pack(">d", value).hex()


def positions_fields(positions, kind: str) -> dict:
    if kind == "int64":
        return {"position_kind": "int64", "positions": [int(p) for p in positions]}
    return {"position_kind": "float64", "positions_bits": [bits(float(p)) for p in positions]}


def inline_spec(aux: bytes) -> dict:
    """An ENCODE_SPEC aux block as the case's `spec` object."""
    n_freq, row_width, sin_base, cos_base, n_cos, flags, amplitude = SPEC_PREFIX.unpack_from(aux)
    values = np.frombuffer(aux, "<f8", offset=SPEC_PREFIX_SIZE)
    spec = {"n_freq": n_freq, "row_width": row_width, "sin_base": sin_base, "cos_base": cos_base, "n_cos": n_cos,
            "flags": flags, "amplitude_bits": bits(amplitude), "freqs_bits": [bits(w) for w in values[:n_freq]]}
    if flags & 4:
        spec["scale_bits"] = [bits(s) for s in values[n_freq:]]
    return spec


def raw_spec(n_freq, row_width, sin_base, cos_base, n_cos, flags, amplitude=1.0, freqs=None, scale=None) -> dict:
    """A hand-made spec object (for the refusals): freqs default to n_freq halvings."""
    freqs = [0.5 ** i for i in range(n_freq)] if freqs is None else freqs
    spec = {"n_freq": n_freq, "row_width": row_width, "sin_base": sin_base, "cos_base": cos_base, "n_cos": n_cos,
            "flags": flags, "amplitude_bits": bits(amplitude), "freqs_bits": [bits(w) for w in freqs]}
    if scale is not None:
        spec["scale_bits"] = [bits(s) for s in scale]
    return spec


def error(status: Status, field: str, contains: str) -> dict:
    return {"error": {"status": int(status), "name": status.name, "field": field, "message_contains": contains}}


# --- the cases ---------------------------------------------------------------------------------------

def table_cases() -> list[dict]:
    """Every table x every dtype x both position kinds, then count 0."""
    cases = []
    for name, table in TABLES.items():
        for kind, positions in zip(("int64", "float64"), POSITIONS[name]):
            for dtype in DTYPES:
                rows = table_rows(table, positions, dtype)
                expect = rows_expectation(rows, dtype) if rows is not None else error(
                    Status.BAD_ARGUMENT, "dtype", f"{dtype} rows from a computed float32 table would be rounded twice")
                cases.append({"id": f"table/{name}/{dtype}/{kind}", "op": "encode_table", "table": name,
                              "dtype": dtype, **positions_fields(positions, kind), "expect": expect})
        cases.append({"id": f"table/{name}/empty", "op": "encode_table", "table": name, "dtype": table.dtype,
                      **positions_fields([], "int64"),
                      "expect": {"rows": 0, "width": table.width, "dtype": table.dtype, "data_hex": "",
                                 "values_hex": ""}})
    return cases


def spec_cases() -> list[dict]:
    """Each inline spec x every dtype x both position kinds, rows from the library."""
    cases = []
    for name, spec in SPECS.items():
        block = inline_spec(spec_aux(spec))
        for kind, positions in zip(("int64", "float64"), SPEC_POSITIONS):
            for dtype in DTYPES:
                cases.append({"id": f"spec/{name}/{dtype}/{kind}", "op": "encode_spec", "spec": block,
                              "dtype": dtype, **positions_fields(positions, kind),
                              "expect": rows_expectation(library_rows(spec, positions, dtype), dtype)})
    return cases


def info_cases() -> list[dict]:
    """PING, RESOLVE of each table, LIST_TABLES, STATS."""
    cases = [{"id": "ping/empty", "op": "ping", "payload_hex": "", "expect": {"payload_hex": ""}},
             {"id": "ping/bytes", "op": "ping", "payload_hex": bytes(range(256)).hex(),
              "expect": {"payload_hex": bytes(range(256)).hex()}}]
    for name, table in TABLES.items():
        cases.append({"id": f"resolve/{name}", "op": "resolve", "table": name, "expect": {"table": {
            "name": name, "dtype": table.dtype, "computed": table.computed, "rows": table.rows, "width": table.width,
            "start": table.start, "stop": table.stop, "spec_hash": table.hash}}})
    listing = [{"name": name, "error_contains": "data checksum mismatch"} if name in CORRUPT_TABLES else
               {"name": name, "computed": TABLES[name].computed} for name in sorted({**TABLES, **CORRUPT_TABLES})]
    cases.append({"id": "list_tables", "op": "list_tables", "expect": {"tables": listing}})
    cases.append({"id": "stats", "op": "stats", "expect": {"json_subset": {
        "server": "posenc-server", "protocol": 1, "limits": SERVER_FLAGS | {"max_abs_position": LIMIT}}}})
    return cases


def error_cases() -> list[dict]:
    """A request for each error a request can get from the server (the statuses that close a stream
    are about frames a client never writes; INTERNAL needs every table id given out)."""
    POR, BAD = Status.POSITION_OUT_OF_RANGE, Status.BAD_ARGUMENT
    sin = {"op": "encode_table", "table": "sin128", "dtype": "float32"}
    any_ = {"op": "encode_table", "table": "sin128-any", "dtype": "float32"}
    vaswani = {"op": "encode_spec", "spec": inline_spec(spec_aux(posenc.SinusoidalSpec(8))), "dtype": "float32"}
    bad_sin_base = raw_spec(3, 5, 2, 0, 1, 2)  # the doc's example: sin 2 + 3 past the 4 columns
    huge_freq = raw_spec(1, 2, 1, 0, 1, 0, freqs=[1e300])
    cases = [
        ("resolve/unknown", {"op": "resolve", "table": "no-such-table"},
         error(Status.UNKNOWN_TABLE, "name", "no published table named 'no-such-table'")),
        ("table/unknown-name", {**sin, "table": "no-such-table", **positions_fields([0], "int64")},
         error(Status.UNKNOWN_TABLE, "name", "no published table named 'no-such-table'")),
        ("table/unknown-id", {**sin, "table": None, "table_id": 4000, **positions_fields([0], "int64")},
         error(Status.UNKNOWN_TABLE, "table_id", "4000 is not an id this server gave out")),
        ("table/past-stop", {**sin, **positions_fields([0, 4096], "int64")},
         error(POR, "positions", "element 1 is 4096, outside the table's positions [0, 4096)")),
        ("table/before-start", {**sin, "table": "t2t-33", **positions_fields([-101], "int64")},
         error(POR, "positions", "element 0 is -101, outside the table's positions [-100, 100)")),
        ("table/fractional", {**sin, **positions_fields([1.5], "float64")},
         error(POR, "positions", "element 0 is 1.5; table rows need integer positions")),
        ("table/nan", {**sin, **positions_fields([0.0, float("nan")], "float64")},
         error(POR, "positions", "element 1 is nan, not finite")),
        ("table/inf", {**sin, **positions_fields([float("inf")], "float64")},
         error(POR, "positions", "element 0 is inf, not finite")),
        ("computed/beyond-limit", {**any_, **positions_fields([LIMIT + 1], "int64")},
         error(POR, "positions", f"element 0 is {LIMIT + 1}, beyond this server's limit")),
        ("computed/minus-inf", {**any_, **positions_fields([float("-inf")], "float64")},
         error(POR, "positions", "element 0 is -inf, not finite")),
        ("spec/nan", {**vaswani, **positions_fields([float("nan")], "float64")},
         error(POR, "positions", "element 0 is nan, not finite")),
        ("spec/beyond-limit", {**vaswani, **positions_fields([-LIMIT - 1], "int64")},
         error(POR, "positions", "beyond this server's limit")),
        ("spec/angle-overflows", {**vaswani, "spec": huge_freq, **positions_fields([1 << 31], "int64")},
         error(POR, "positions", "the angle overflows float64")),
        ("spec/sin-base", {**vaswani, "spec": bad_sin_base, **positions_fields([0], "int64")},
         error(BAD, "spec.sin_base", "is past the 4 columns")),
        ("spec/interleaved-sin-base", {**vaswani, "spec": raw_spec(2, 4, 1, 0, 2, 1), **positions_fields([0], "int64")},
         error(BAD, "spec.sin_base", "must be 0 when interleaved")),
        ("spec/amplitude-overflows-float16", {**vaswani, "dtype": "float16", "spec": raw_spec(1, 2, 0, 0, 1, 1, 1e5),
                                              **positions_fields([0], "int64")},
         error(BAD, "spec.amplitude", "overflows float16")),
        ("spec/amplitude-nan", {**vaswani, "spec": raw_spec(1, 2, 0, 0, 1, 1, float("nan")),
                                **positions_fields([0], "int64")},
         error(BAD, "spec.amplitude", "must be finite")),
        ("spec/freq-inf", {**vaswani, "spec": raw_spec(1, 2, 0, 0, 1, 1, freqs=[float("inf")]),
                           **positions_fields([0], "int64")},
         error(BAD, "spec.freqs", "element 0 is not finite")),
        ("spec/scale-nan", {**vaswani, "spec": raw_spec(2, 4, 0, 0, 2, 5, scale=[1, 2, 3, float("nan")]),
                            **positions_fields([0], "int64")},
         error(BAD, "spec.scale", "element 3 is not finite")),
        ("spec/row-width-over-max-dim", {**vaswani, "spec": raw_spec(513, 1026, 0, 0, 513, 1, freqs=[1.0] * 513),
                                         **positions_fields([0], "int64")},
         error(BAD, "spec.row_width", "got 1026")),
        ("table/too-many-positions", {**sin, **positions_fields([p % 4096 for p in range(1001)], "int64")},
         error(Status.TOO_MANY_POSITIONS, "count", "1001 positions, over the limit of 1000")),
        ("table/output-too-large", {**sin, "dtype": "float64", **positions_fields(range(100), "int64")},
         error(Status.OUTPUT_TOO_LARGE, "count", "would be 102400 bytes, over the limit of 65536")),
        ("resolve/corrupt", {"op": "resolve", "table": "sin8-corrupt"},
         error(Status.TABLE_UNAVAILABLE, "name", "data checksum mismatch")),
        ("table/corrupt", {**sin, "table": "sin8-corrupt", **positions_fields([0], "int64")},
         error(Status.TABLE_UNAVAILABLE, "name", "data checksum mismatch")),
    ]
    return [{"id": f"error/{case_id}", **{k: v for k, v in request.items() if v is not None}, "expect": expect}
            for case_id, request, expect in cases]


def refusal_cases() -> list[dict]:
    """Input a client refuses before sending anything, naming the field."""
    def refused(field):
        return {"refused_locally": {"field": field}}
    sin = {"op": "encode_table", "table": "sin128", "dtype": "float32", **positions_fields([0], "int64")}
    vaswani = {"op": "encode_spec", "spec": inline_spec(spec_aux(posenc.SinusoidalSpec(8))), "dtype": "float32",
               **positions_fields([0], "int64")}
    cases = [(f"name/{label}", {"op": "resolve", "table": name}, refused("name")) for label, name in (
        ("empty", ""), ("slash", "a/b"), ("dotdot", "a..b"), ("dot", "."), ("space", "sin 128"),
        ("too-long", "x" * 65), ("non-ascii", "sin\u00e9"))]
    cases += [
        ("table/bad-name", {**sin, "table": "../registry"}, refused("name")),
        ("table/unknown-dtype", {**sin, "dtype": "float8"}, refused("dtype")),
        ("spec/unknown-dtype", {**vaswani, "dtype": "int32"}, refused("dtype")),
        ("table/positions-over-u32", {**{k: v for k, v in sin.items() if k != "positions"},
                                      "positions_range": {"start": 0, "count": 1 << 32}}, refused("positions")),
        ("spec/no-frequency", {**vaswani, "spec": raw_spec(0, 0, 0, 0, 0, 1)}, refused("spec.n_freq")),
        ("spec/freqs-not-n-freq", {**vaswani, "spec": raw_spec(2, 4, 0, 0, 2, 1, freqs=[1.0])}, refused("spec.freqs")),
        ("spec/n-cos-over-n-freq", {**vaswani, "spec": raw_spec(2, 5, 0, 0, 3, 1)}, refused("spec.n_cos")),
        ("spec/unknown-flag", {**vaswani, "spec": raw_spec(2, 4, 0, 0, 2, 9)}, refused("spec.flags")),
        ("spec/row-width", {**vaswani, "spec": raw_spec(2, 5, 0, 0, 2, 1)}, refused("spec.row_width")),
        ("spec/scale-without-flag", {**vaswani, "spec": raw_spec(2, 4, 0, 0, 2, 1, scale=[1, 2, 3, 4])},
         refused("spec.scale")),
        ("spec/flag-without-scale", {**vaswani, "spec": raw_spec(2, 4, 0, 0, 2, 5)}, refused("spec.scale")),
        ("spec/scale-length", {**vaswani, "spec": raw_spec(2, 4, 0, 0, 2, 5, scale=[1, 2, 3])}, refused("spec.scale")),
    ]
    return [{"id": f"refused/{case_id}", **request, "expect": expect} for case_id, request, expect in cases]


def all_cases() -> dict:
    """The case file: the server it expects (`server_flags`, `tables`) and the cases, in the order runners
    execute them."""
    cases = info_cases() + table_cases() + spec_cases() + error_cases() + refusal_cases()
    ids = [case["id"] for case in cases]
    assert len(set(ids)) == len(ids), "case ids must be unique"
    return {"version": 1, "server_flags": SERVER_FLAGS,
            "tables": {name: table.to_dict() for name, table in TABLES.items()},
            "corrupt_tables": sorted(CORRUPT_TABLES), "cases": cases}


def write(path: Path) -> int:
    """Write the case file; the number of cases."""
    data = all_cases()
    Path(path).write_text(json.dumps(data, indent=None, separators=(",", ":"), allow_nan=False) + "\n")
    return len(data["cases"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to write the case list (JSON)")
    args = parser.parse_args(argv)
    print(f"{write(Path(args.out))} cases -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
