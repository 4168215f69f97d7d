"""`posenc positions CONFIG --positions 0,1,4096`: what a model's positions look like, per layer type.

The question a new user asks first ("what are my model's cos/sin at position 4096?") answered from
the config alone, through `posenc.from_hf_config`: every layer type, the layers that use it (and
the ones that use none), the spec posenc read, and the values at the chosen positions -- RoPE's
cos and sin, the rows a table of a sinusoidal or ALiBi spec holds, T5's buckets, or where a
learned table's rows live. Every number is the library's own (`posenc.rope_cos_sin`,
`TableSpec.compute`, `posenc.t5_relative_position_bucket`), so `--json` is a way to check them.
"""

from __future__ import annotations

import json
import sys

from ..errors import PosencError


def register(sub) -> None:
    p = sub.add_parser("positions", help="a model config's cos/sin (or bias, rows, buckets) at chosen positions",
                       description="Every layer type of a model config (config.json, a model directory, or a "
                                   "JSON dict file): the layers using it, the spec posenc read, and its values "
                                   "at --positions.")
    add_arguments(p)


def add_arguments(p) -> None:
    """The arguments of `posenc positions`; `parsed` reads them for `posenc demo --model-config`."""
    p.add_argument("config", metavar="CONFIG",
                   help="a model's config.json, the model directory holding one, or a JSON file of the dict")
    p.add_argument("--positions", required=True,
                   help="the positions, comma-separated, e.g. 0,1,4096 (--positions=-3,0,3 when the first is "
                        "negative; T5 reads them as relative positions key - query)")
    p.add_argument("--layer-type", help="only this layer type (default: every one)")
    p.add_argument("--layer", type=int, metavar="N", help="only the layer type layer N uses")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64", "float16", "bfloat16"],
                   help="output dtype (default float32)")
    p.add_argument("--arrangement", default="freq",
                   help="RoPE: how cos and sin are laid out, as HTTP's `arrangement`: freq "
                   "(default: one column per frequency), cat (the halves duplicated, as transformers' rotary "
                   "modules hand them over), interleave (each value twice, as Cohere's)")
    p.add_argument("--seq-len", type=float, help="RoPE: the sequence length length-dependent scaling (dynamic NTK, "
                   "LongRoPE) uses (default: max position + 1, as a fresh transformers module)")
    p.add_argument("--json", action="store_true", help="one JSON object: specs, layers and values at full precision")
    p.set_defaults(handler=run)


def parsed(argv: list[str]):
    """`posenc positions ARGV...`'s arguments, every default included: what a command that hands
    over to it (`posenc demo --model-config`) runs it with."""
    import argparse

    parser = argparse.ArgumentParser(prog="posenc positions")
    add_arguments(parser)
    return parser.parse_args(argv)


def parse_positions(text: str) -> list[int | float]:
    """`0,1,4096` -> [0, 1, 4096]: integers stay integers (T5 buckets need them), others are floats."""
    values = []
    for item in text.split(","):
        item = item.strip()
        try:
            values.append(int(item))
        except ValueError:
            try:
                values.append(float(item))
            except ValueError:
                raise PosencError("positions", f"must be comma-separated numbers, got {item!r} in {text!r}") from None
    return values


def layers_without_positions(model, config: dict) -> list[int] | None:
    """The layers no layer type lists (NoPE layers), when that is known: the config gives the layer
    count and every layer type applies per layer (None when an encoding is added once at the input)."""
    from ..models.mechanisms import LAYER_KEYS
    from ..models.tables import config_size

    if model.without or not model.encodings:  # the reader said which
        return list(model.without)
    count = config_size(config, LAYER_KEYS)
    entries = model.encodings.values()
    if count is None or not all(entry.layers for entry in entries):
        return None
    used = {layer for entry in entries for layer in entry.layers}
    return [layer for layer in range(count) if layer not in used]


def select(model, layer_type: str | None, layer: int | None) -> list:
    """The LayerPositions to show: one layer type, the one layer N uses (`ModelPositions.layer`), or all."""
    if layer_type is not None and layer is not None:
        raise PosencError("layer", "give --layer-type or --layer, not both")
    if layer is not None:
        return [model.layer(layer)]
    if layer_type is not None:
        return [model.get(layer_type)]
    return list(model.encodings.values())  # none for a model without positions: that is the answer


def values(entry, positions: list, dtype: str, seq_len: float | None, arrangement: str) -> tuple[dict, list[str]]:
    """({name: array [n, ...]}, what they are) for one layer type at `positions`; RoPE's cos and sin
    laid out as `arrangement` by the library (which refuses any other name, naming the choices)."""
    import numpy as np

    from .. import api
    from ..dtypes import output_dtype
    from ..encodings import RopeSpec
    from ..tables import TableSpec

    spec, kind = entry.spec, entry.spec.KIND
    if kind == RopeSpec.KIND:
        cos, sin = api.rope_cos_sin(positions, spec, seq_len=seq_len, dtype=dtype, arrangement=arrangement)
        about = [f"cos and sin [position, {cos.shape[1]}] ({spec.n_freq} frequencies, arrangement {arrangement}; "
                 "attention factor applied)"]
        if spec.length_dependent:
            used = seq_len if seq_len is not None else max(positions) + 1
            about.append(f"frequencies at seq_len {used:g}" + ("" if seq_len is not None else
                         " (max position + 1, as a fresh transformers module; --seq-len to choose)"))
        return {"cos": cos, "sin": sin}, about
    if kind == "t5":
        buckets = api.t5_relative_position_bucket(np.asarray(positions), spec)
        return {"bucket": buckets[:, None]}, [
            ("bucket of each position read as a relative position (key - query); the bias per bucket and "
             "head is a table in the checkpoint")]
    if kind == "learned":
        rows = np.asarray(positions) + spec.offset
        if rows.dtype.kind != "i" or rows.min() < 0 or rows.max() >= spec.rows:
            raise PosencError("positions", f"a learned table holds integer positions {-spec.offset}.."
                              f"{spec.num_positions - 1}")
        return {"checkpoint_row": rows[:, None]}, [
            (f"rows of {spec.tensor or 'the checkpoint tensor'} (position + offset {spec.offset}): the values are "
             "in the checkpoint (posenc table build model.safetensors --model-config config.json publishes them)")]
    exact = np.asarray(positions, dtype=np.float64)
    table = TableSpec(spec, int(np.floor(exact.min())), int(np.floor(exact.max())) + 1, "float64")
    name = "bias" if kind == "alibi" else "rows"
    about = (f"bias [position, head] a key at that position gets ({spec.n_heads} heads): an ALiBi table's rows"
             if kind == "alibi" else f"the encoding rows ({spec.dim} values each)")
    return {name: table.compute(exact, output_dtype(dtype))}, [about]


def as_plain(array):
    """Integers as they are, every float type (bfloat16 included, which numpy does not print) as float64: exact."""
    return array if array.dtype.kind in "iu" else array.astype("float64")


def run(args) -> int:
    import numpy as np

    from .. import from_hf_config
    from ..models import config_dict
    from ..models.positions import layer_runs

    config = config_dict(str(args.config))
    model = from_hf_config(config)
    positions = parse_positions(args.positions)
    if not positions:
        raise PosencError("positions", "give at least one position")
    chosen = select(model, args.layer_type, args.layer)
    if args.arrangement != "freq" and not any(entry.spec.KIND == "rope" for entry in chosen):
        raise PosencError("arrangement", "lays out RoPE's cos and sin; the layer types shown use "
                          f"{sorted({entry.spec.KIND for entry in chosen}) or 'no positions'}")
    none = layers_without_positions(model, config)
    shown = []
    for entry in chosen:
        try:
            arrays, about = values(entry, positions, args.dtype, args.seq_len, args.arrangement)
        except PosencError as exc:
            raise type(exc)(exc.field, f"layer type {entry.layer_type!r}: {exc.message}") from None
        shown.append((entry, arrays, about))
    if args.json:
        doc = {"config": str(args.config), "model_type": model.model_type, "reader": model.reader,
               "positions": positions, "dtype": args.dtype, "arrangement": args.arrangement,
               "layers_without_positions": none, "notes": list(model.notes),
               "layer_types": {entry.layer_type: {**entry.to_dict(), "about": about,
                                                  "values": {k: as_plain(v).tolist() for k, v in arrays.items()}}
                               for entry, arrays, about in shown}}
        json.dump(doc, sys.stdout)
        print()
        return 0
    np.set_printoptions(precision=8, linewidth=110, threshold=sys.maxsize)
    print(f"{args.config}: model_type {model.model_type} (reader {model.reader}), "
          f"layer types {', '.join(model.layer_types) or 'none: no layer applies positions'}")
    if none:
        print(f"layers without positions (NoPE): {layer_runs(none)}")
    for note in model.notes:
        print(f"note: {note}")
    width = max(len(f"{p:g}") for p in positions)
    for entry, arrays, about in shown:
        where = f"layers {layer_runs(entry.layers)}" if entry.layers else "once, at the input"
        print(f"\n{entry.layer_type}: {entry.spec.KIND} ({entry.apply}), {where}")
        print(f"  spec: {json.dumps(entry.spec.to_dict())}")
        for line in (*entry.notes, *about):
            print(f"  {line}")
        for name, array in arrays.items():
            print(f"  {name} ({array.dtype}):")
            for p, row in zip(positions, array):
                text = np.array2string(as_plain(row), prefix=" " * (width + 7))
                print(f"    {p:>{width}g}: {text}")
    return 0
