"""`posenc bench json`: printing float32 arrays as JSON, libposenc's printer vs orjson, same run.

Both print the same bytes (tests/native/test_json_f32.py; every float32 in
native/tools/json_f32_exhaustive.py). Rows: one table row (1 x 128, the hot GET), a 64 x 128
answer and a 1024 x 128 batch, positional-encoding values (sin/cos). Columns: orjson
(`orjson.dumps(arr, option=OPT_SERIALIZE_NUMPY)`, what codecs.json_data called before), each native
writer through the Python call (`json_text.json_f32_by`, which builds a shape array and reads
`arr.ctypes`: slower per call than the hot path), and `codecs.json_data` itself, what responses call
(the AVX-512 writer through the two-argument call where it runs, else orjson); per call and per number.
"""

from __future__ import annotations

import numpy as np
import orjson

from .. import native
from ..http.api.codecs import NATIVE_JSON, json_data, json_printer
from ..native import json_text
from .timing import machine_line, markdown_table, measure

SHAPES = ((1, 128), (64, 128), (1024, 128))


def add_arguments(parser) -> None:
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds per cell, median reported")


def table(rows: int, width: int) -> np.ndarray:
    """Rows of a sinusoidal table at positions 1000.. (the values a response prints)."""
    angles = (1000 + np.arange(rows))[:, None] * 10000.0 ** (-np.arange(width // 2) / (width // 2))
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1).astype(np.float32)


def _loop(fn, arr: np.ndarray, calls: int):
    def run():
        for _ in range(calls):
            fn(arr)
    return run


def _printers() -> dict[str, object]:
    printers = {"orjson": lambda a: orjson.dumps(a, option=orjson.OPT_SERIALIZE_NUMPY)}
    for name in json_text.WRITERS:
        if json_text.json_f32_by(name, np.zeros(1, np.float32)) is not None:
            printers[f"native {name}"] = lambda a, n=name: json_text.json_f32_by(n, a)
    printers[f"json_data ({json_printer()})"] = json_data
    return printers


def run(args) -> str:
    printers = _printers()
    rows = []
    for shape in SHAPES:
        arr = table(*shape)
        calls = max(1, 200_000 // arr.size)
        timings = {label: measure(label, _loop(fn, arr, calls), 0, repeats=args.repeats).seconds / calls
                   for label, fn in printers.items()}
        base = timings["orjson"]
        for label, seconds in timings.items():
            rows.append(["x".join(map(str, shape)), label, f"{seconds * 1e6:.2f}", f"{seconds / arr.size * 1e9:.2f}",
                         "1.00x" if label == "orjson" else f"{base / seconds:.1f}x"])
    text = markdown_table(["array (float32)", "printer", "µs per call", "ns per number", "vs orjson"], rows)
    status = ("responses print with the AVX-512 writer" if NATIVE_JSON else
              f"responses print with orjson (native writer here: {json_text.writer() or native.STATUS})")
    return (f"{text}\n\nSame bytes from every printer. Median of {args.repeats} rounds, one thread. 'native WRITER' "
            "rows go through json_f32_by, which picks the writer by name and builds its arguments from `arr.ctypes` "
            "(~3 us a call); 'json_data' is what responses call: the two-argument hot path (~1 us of Python: "
            f"checks, ctypes, the copy out) plus the C printer; {status}. Machine: {machine_line()}; "
            f"CPU features: {native.cpu_features() or 'unknown'}.\n")
