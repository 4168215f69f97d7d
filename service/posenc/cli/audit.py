"""`posenc audit FILE [FILE2] [--model-config config.json] [--json]`: diagnose a RoPE cos/sin cache, or
the RoPE llama.cpp will compute from a GGUF model file.

FILE is .npy, .npz or .safetensors; two .npy files are cos then sin (or, with --rotated, q
before then after the rotation); a .gguf file (by its magic) is read for its RoPE metadata and
tensors and compared with --model-config. Exit status: 0 correct, 1 warnings only, 3 broken, 2 bad input.
"""

from __future__ import annotations

import json
import mmap
import os
import sys
from pathlib import Path

from ..errors import PosencError
from .options import add_flag

EXIT = {"correct": 0, "warning": 1, "broken": 3}


def register(sub) -> None:
    p = sub.add_parser("audit", help="diagnose a RoPE cos/sin cache (or q before/after rotation)",
                       description=__doc__.split("\n\n", 1)[1])
    p.add_argument("files", nargs="+", metavar="FILE", help=".npy/.npz/.safetensors (one, or cos and sin), or .gguf")
    add_flag(p, "--model-config", old=("--config",), metavar="CONFIG",
             help="the model's config.json (without it the spec is inferred)")
    p.add_argument("--layer-type", help="which of the config's layer types to audit against (default: best match)")
    p.add_argument("--start", type=int, default=0, help="the position of the first row (default 0)")
    p.add_argument("--rotated", action="store_true", help="two files are q before and after rotation")
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.set_defaults(handler=run)


def read_config(path: str) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PosencError("config", f"cannot read {path}: {exc}") from None


def _mapped(path: str):
    """The file's bytes, memory-mapped: the audit reads a cache in chunks, so a 200 MB .npy or .safetensors is
    never copied into memory whole (.npz members are unpacked, as they must be)."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return b""
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise PosencError("file", str(exc)) from None


def run(args) -> int:
    import orjson

    from ..audit import audit_bytes, to_text
    from ..audit.gguf import audit_gguf, is_gguf

    config = read_config(args.model_config) if args.model_config else None
    if len(args.files) == 1 and is_gguf(args.files[0]):
        report = audit_gguf(args.files[0], config, layer_type=args.layer_type)
    else:
        files = [_mapped(f) for f in args.files]
        names = ("q", "q_rot") if args.rotated else ("cos", "sin")
        report = audit_bytes(*files, names=names, config=config, start=args.start, layer_type=args.layer_type)
    if args.json:
        sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(to_text(report))
    return EXIT[report["status"]]
