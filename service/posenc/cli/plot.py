"""`posenc plot heatmap|spectrum|decay|alibi|precision [--config config.json | --spec JSON ...] --out FILE`,
`posenc plot lab --results FILE --out FILE`.

The explorer's figures as PNG or SVG files, or as JSON (the page's Vega-Lite spec and the numbers
behind it), by the --out suffix. --spec may repeat (variants side by side); --config draws every
layer type of a model; parameters as --param name=value (heatmap: positions, and dim without a
source; decay: max_distance; alibi: context, gamma, and n_heads without a source; precision:
max_position). A parameter the figure does not take is an error, as is a source without the
encodings the figure draws. `lab` draws a `posenc lab` results file (--results) instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from ..errors import PosencError
from .audit import read_config

#: The figure of a `posenc lab` results file: drawn from --results, not from encodings.
LAB = "lab"


def register(sub) -> None:
    from ..plots import FIGURES

    p = sub.add_parser("plot", help="draw an explorer figure to a PNG or SVG file",
                       description=__doc__.split("\n\n", 1)[1])
    p.add_argument("figure", choices=[*sorted(FIGURES), LAB])
    p.add_argument("--config", help="a model's config.json: every layer type")
    p.add_argument("--spec", action="append", default=[], help='a spec as JSON, e.g. \'{"kind": "rope", '
                   '"head_dim": 128, "base": 5e5}\' (repeat for variants side by side)')
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="a figure parameter")
    p.add_argument("--results", help="lab: a `posenc lab` results file")
    p.add_argument("--out", required=True, help="output file, .png, .svg or .json (Vega-Lite spec and data)")
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


def _lab_drawing(args, fmt: str):
    from ..lab import results
    from ..plots import render_lab

    if not args.results:
        raise PosencError("results", "the lab figure draws a `posenc lab` results file: give --results FILE")
    if args.config or args.spec or args.param:
        raise PosencError("results", "the lab figure takes --results only (no --config, --spec or --param)")
    return render_lab(results.read(args.results), fmt)


def _figure_drawing(args, fmt: str):
    from ..plots import render

    if args.results:
        raise PosencError("results", "only the lab figure draws a results file")
    if args.config and args.spec:
        raise PosencError("spec", "give --config or --spec, not both")
    source = {"config": read_config(args.config)} if args.config else {"specs": _specs(args.spec)} if args.spec else {}
    return render(args.figure, source, _params(args.param), fmt)


def run(args) -> int:
    fmt = Path(args.out).suffix.lower().lstrip(".")
    draw = _lab_drawing if args.figure == LAB else _figure_drawing
    if fmt == "json":  # the explorer's Vega-Lite spec with the numbers behind the figure
        drawn, _ = draw(args, "vega")
        data = orjson.dumps(drawn, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_INDENT_2)
    else:
        data, _ = draw(args, fmt)
    Path(args.out).write_bytes(data)
    print(f"wrote {args.out} ({len(data)} bytes)")
    return 0
