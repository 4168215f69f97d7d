"""`posenc plot heatmap|spectrum|decay|alibi|precision [--model-config config.json | --spec JSON ...] --out FILE`,
`posenc plot lab --results FILE --out FILE`.

The explorer's figures as files, the format by the --out suffix: .png or .svg (drawn by
matplotlib), .json (the page's Vega-Lite spec and the numbers behind the figure) or .csv (the
figure's points, the same file as the page's CSV export). --spec may repeat (variants side by side,
or with --overlay on one axis); --model-config draws every layer type of a model; parameters as --param
name=value (heatmap: positions, and dim without a source; decay: max_distance; alibi: context,
gamma, and n_heads without a source; precision: max_position). A parameter the figure does not
take is an error, as is a source without the encodings the figure draws. `lab` draws a
`posenc lab` results file (--results) instead, in any of those formats.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from ..errors import PosencError
from .audit import read_config
from .options import add_flag

#: --out's suffix -> what is written (posenc.plots' format name), and the help's words for it.
OUT_SUFFIXES = {".png": ("png", "PNG image"), ".svg": ("svg", "SVG image"),
                ".json": ("vega", "the explorer's Vega-Lite spec and the numbers behind the figure"),
                ".csv": ("csv", "the figure's points, as the explorer's CSV export")}
#: The figures whose variants --overlay draws on one axis.
OVERLAY_FIGURES = ("spectrum", "decay")
#: The figure of a `posenc lab` results file: drawn from --results, not from encodings.
LAB = "lab"


def register(sub) -> None:
    from ..plots import FIGURES

    p = sub.add_parser("plot", help="draw an explorer figure to a PNG, SVG, JSON or CSV file",
                       description=__doc__.split("\n\n", 1)[1])
    p.add_argument("figure", choices=[*sorted(FIGURES), LAB])
    add_flag(p, "--model-config", old=("--config",), dest="config", metavar="CONFIG",
             help="a model's config.json: every layer type")
    p.add_argument("--spec", action="append", default=[], help='a spec as JSON, e.g. \'{"kind": "rope", '
                   '"head_dim": 128, "base": 5e5}\' (repeat for variants side by side, or on one axis with --overlay)')
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="a figure parameter")
    p.add_argument("--overlay", action="store_true", help=f"{' and '.join(OVERLAY_FIGURES)}: draw every variant on "
                   "one axis with a legend (default: one panel each, side by side)")
    p.add_argument("--results", help="lab: a `posenc lab` results file")
    p.add_argument("--out", required=True, metavar="FILE", help="output file, its suffix the format: " +
                   "; ".join(f"{suffix} {words}" for suffix, (_, words) in OUT_SUFFIXES.items()))
    p.set_defaults(handler=run)


def _params(items: list[str]) -> dict:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise PosencError("param", f"{item!r} is not NAME=VALUE")
        try:
            out[name] = json.loads(value)
        except json.JSONDecodeError:
            out[name] = value
    return out


def _specs(items: list[str]) -> list[dict]:
    out = []
    for i, item in enumerate(items):
        try:
            out.append(json.loads(item))
        except json.JSONDecodeError as exc:
            raise PosencError(f"spec.{i}", f"is not JSON: {exc}") from None
    return out


def out_format(path: str) -> str:
    """The posenc.plots format `path`'s suffix asks for, or an error listing the suffixes."""
    suffix = Path(path).suffix.lower()
    if suffix not in OUT_SUFFIXES:
        raise PosencError("--out", f"must end in one of {', '.join(OUT_SUFFIXES)}, got {suffix or 'no suffix'!r} "
                          f"({path})")
    return OUT_SUFFIXES[suffix][0]


def _lab_drawing(args, fmt: str):
    from ..lab import results
    from ..plots import render_lab

    if not args.results:
        raise PosencError("results", "the lab figure draws a `posenc lab` results file: give --results FILE")
    if args.config or args.spec or args.param or args.overlay:
        raise PosencError("results", "the lab figure takes --results only (no --model-config, --spec, --param "
                          "or --overlay)")
    return render_lab(results.read(args.results), fmt)


def _figure_drawing(args, fmt: str):
    from ..plots import render

    if args.results:
        raise PosencError("results", "only the lab figure draws a results file")
    if args.config and args.spec:
        raise PosencError("spec", "give --model-config or --spec, not both")
    params = _params(args.param)
    if args.overlay:
        if args.figure not in OVERLAY_FIGURES:
            raise PosencError("--overlay", f"draws the variants of {' and '.join(OVERLAY_FIGURES)} on one axis, "
                              f"not of {args.figure}")
        params["overlay"] = True
    source = {"config": read_config(args.config)} if args.config else {"specs": _specs(args.spec)} if args.spec else {}
    return render(args.figure, source, params, fmt)


def run(args) -> int:
    fmt = out_format(args.out)
    drawn, _ = (_lab_drawing if args.figure == LAB else _figure_drawing)(args, fmt)
    data = orjson.dumps(drawn, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_INDENT_2) if fmt == "vega" else drawn
    Path(args.out).write_bytes(data)
    print(f"wrote {args.out} ({len(data)} bytes)")
    return 0
