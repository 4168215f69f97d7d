"""`posenc table build|ls|rm|verify`: manage shared-memory tables from the shell.

Tables built here outlive the command (it does not `close()` its store), so other
processes can attach them; `posenc table rm` removes them. Each action imports the store,
the checkpoint readers and the model readers (numpy, numba) itself, when it runs.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import PosencError
from ..shm.locks import LOCK_TIMEOUT_S
from ..shm.paths import check_name
from .options import add_flag

if TYPE_CHECKING:
    from ..tables import TableSpec


def register(sub) -> None:
    p = sub.add_parser("table", help="build, list, remove and verify shared-memory tables")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    build = actions.add_parser("build", help="compute a table into shared memory and publish it")
    build.add_argument("spec", help="JSON (or a JSON file) of an encoding spec such as "
                       "'{\"kind\":\"sinusoidal\",\"dim\":128}' or of a whole table spec; a HF config.json or the model "
                       "directory holding one "
                       "(one table per layer type the model computes positions for: NAME.LAYER_TYPE when "
                       "it has several); or a .safetensors / .npy checkpoint holding a learned position table")
    build.add_argument("--positions", metavar="START:STOP", help="the positions the table holds, a range: "
                       "START:STOP, e.g. 0:131072 (--positions=-8:8 for a negative START; "
                       "default: the table spec's, 0:context length of a HF config, or every position of "
                       "a checkpoint's table)")
    build.add_argument("--name", help="table name; for a config with several layer types the prefix of "
                       "NAME.LAYER_TYPE (default: a readable one, e.g. rope-d128-theta10000-128k for a spec, the "
                       "model's name for a config.json, gpt2-wpe-31dcd5 for a checkpoint; docs/cli.md)")
    build.add_argument("--layer-type", help="HF config / --model-config: only this layer type's encoding")
    build.add_argument("--tensor", help="checkpoint: the position-embedding tensor (default: the one --model-config "
                       "names, or the file's only tensor)")
    build.add_argument("--offset", type=int, help="checkpoint: rows before position 0 (OPT: 2; default: "
                       "--model-config's, else 0)")
    add_flag(build, "--model-config", old=("--config",), metavar="CONFIG",
             help="checkpoint: the model's config.json, for its tensor name, offset and shape")
    build.add_argument("--dtype", choices=["float32", "float64"], help="stored dtype (default float32)")
    build.add_argument("--seq-len", type=float, help="RoPE only: the sequence length dynamic/longrope use")
    build.add_argument("--computed", action="store_true", help="a named computed encoding (sinusoidal, rope): "
                       "no rows stored, each computed on request for any position in START:STOP (default: every "
                       "position the limit admits)")
    build.add_argument("--mode", type=octal, default=0o640, help="file mode, octal (default 0640); the registry "
                       "gains its read bits")
    build.add_argument("--checksum", choices=["crc32c", "crc32"], default="crc32c",
                       help="data checksum (default crc32c; crc32 for readers older than the checksum field)")
    build.add_argument("--progress", choices=["auto", "always", "never"], default="auto",
                       help="progress bar on stderr (auto: when stderr is a terminal)")
    build.set_defaults(handler=run_build)

    ls = actions.add_parser("ls", help="list tables: name, spec, shape, dtype, size, generation, state")
    ls.add_argument("--json", action="store_true", help="one JSON object per line, every field")
    ls.set_defaults(handler=run_ls)

    rm = actions.add_parser("rm", help="unpublish tables and unlink their segments")
    rm.add_argument("names", nargs="+", metavar="NAME")
    rm.set_defaults(handler=run_rm)

    verify = actions.add_parser("verify", help="recompute checksums (all published tables by default)")
    verify.add_argument("names", nargs="*", metavar="NAME")
    verify.set_defaults(handler=run_verify)

    for action in (build, ls, rm, verify):
        add_flag(action, "--shm-dir", old=("--root",), metavar="DIR",
                 help="table store (default $POSENC_SHM_DIR or /dev/shm)")
    for action in (build, rm):
        action.add_argument("--lock-timeout", type=float, default=LOCK_TIMEOUT_S, metavar="SECONDS",
                            help="give up when the registry lock stays taken this long (default %(default)s)")


def octal(text: str) -> int:
    return int(text, 8)


def parse_positions(text: str) -> tuple[int, int]:
    start, sep, stop = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return int(start), int(stop)
    except ValueError:
        raise PosencError("positions", f"must be START:STOP with integers, got {text!r}") from None


def load_json(text: str) -> dict:
    """`text` itself if it looks like JSON, else the contents of the file it names (a model
    directory's config.json when it names a directory)."""
    if not text.lstrip().startswith("{"):
        try:
            path = Path(text)
            text = (path / "config.json" if path.is_dir() else path).read_text()
        except OSError as exc:
            raise PosencError("spec", f"is neither JSON nor a readable file: {text!r} ({exc.strerror})") from None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise PosencError("spec", f"invalid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise PosencError("spec", "must be a JSON object")
    return value


def table_spec(spec: dict, positions: str | None, dtype: str | None, seq_len: float | None,
               computed: bool = False) -> TableSpec:
    """A TableSpec from a table spec dict or an encoding spec dict, plus overrides."""
    from ..tables import TableSpec

    base = dict(spec) if "encoding" in spec else {"encoding": spec}
    if computed:
        base["computed"] = True
    if positions is not None:
        base["start"], base["stop"] = parse_positions(positions)
    if base.get("stop") is None and base.get("computed") is not True:  # what is wrong with the spec is said first
        start = base.get("start", 0)
        TableSpec.from_dict({**base, "stop": start + 1 if isinstance(start, int) else 1})
        raise PosencError("positions", "is required (START:STOP) for this spec")
    if dtype is not None:
        base["dtype"] = dtype
    if seq_len is not None:
        base["seq_len"] = seq_len
    return TableSpec.from_dict(base)


class ProgressBar:
    """`name [#####-----]  48%  62914/131072 rows  1.2 s` on one stderr line, redrawn at most 10x/s."""

    WIDTH = 30

    def __init__(self, name: str, stream=None):
        self.name = name
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.drawn = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self.drawn < 0.1:
            return
        self.drawn = now
        filled = self.WIDTH * done // total
        self.stream.write(f"\r{self.name} [{'#' * filled}{'-' * (self.WIDTH - filled)}] {100 * done // total:3d}%  "
                          f"{done}/{total} rows  {now - self.started:.1f} s")
        if done == total:
            self.stream.write("\n")
        self.stream.flush()


def config_tables(config: dict, args) -> tuple[dict[str | None, TableSpec], dict[str, str]]:
    """One table per computable layer type of the model (keyed None when the model has only one)."""
    from ..models import from_hf_config
    from ..models.tables import context_length, layer_tables

    model = from_hf_config(config)
    if not model.encodings:
        raise PosencError("config", model.no_positions())
    if args.layer_type is not None:
        model.get(args.layer_type, field_name="layer-type")
    start, stop = parse_positions(args.positions) if args.positions is not None else (0, None)
    tables, skipped = layer_tables(model, context=context_length(config), start=start, stop=stop,
                                   dtype=args.dtype or "float32", seq_len=args.seq_len)
    if args.layer_type is not None:
        tables = {k: v for k, v in tables.items() if k.partition(".")[0] == args.layer_type}
        skipped = {k: v for k, v in skipped.items() if k == args.layer_type}
    if not tables:
        reasons = "; ".join(f"{layer_type}: {why}" for layer_type, why in skipped.items())
        raise PosencError("spec", f"this {model.model_type} model has no encoding posenc can tabulate ({reasons})")
    if len(model.encodings) == 1:  # one layer type: names carry only LongRoPE's .short / .long
        only = next(iter(model.encodings))
        tables = {key.removeprefix(only).lstrip(".") or None: table for key, table in tables.items()}
    return tables, skipped


def checkpoint_table(args) -> TableSpec:
    """The learned table in a .safetensors / .npy file; --model-config supplies the family's LearnedSpec."""
    from .. import checkpoint
    from ..models import from_hf_config

    spec = None
    if args.model_config is not None:
        model = from_hf_config(load_json(args.model_config))
        learned = model.of_kind("learned")
        if not learned:
            raise PosencError("model-config", f"this {model.model_type} model has no learned position table "
                              f"(its layer types: {list(model.encodings)})")
        if args.layer_type is None and len(learned) > 1:
            raise PosencError("layer-type", f"the model has several learned tables; choose one of {list(learned)}")
        spec = model.get(args.layer_type or next(iter(learned)), field_name="layer-type").spec
        if spec.KIND != "learned":
            raise PosencError("layer-type", f"{args.layer_type!r} is a {spec.KIND} encoding, not a learned table")
    tensor = args.tensor if args.tensor is not None or spec is None else spec.tensor
    name, values = checkpoint.read_file(args.spec, tensor)
    start, stop = parse_positions(args.positions) if args.positions is not None else (None, None)
    if args.seq_len is not None:
        raise PosencError("seq-len", "only applies to rope tables")
    return checkpoint.learned_table(values, spec, tensor=name, offset=args.offset, start=start, stop=stop,
                                    dtype=args.dtype)


def build_plan(args) -> tuple[dict[str | None, TableSpec], dict[str, str], str]:
    """({layer type or None: table}, {layer type: why it was skipped}, default name) for `posenc table build`."""
    from .. import checkpoint
    from . import table_names

    positions = parse_positions(args.positions) if args.positions is not None else None
    if Path(args.spec).suffix in checkpoint.FORMATS:
        if args.computed:
            raise PosencError("computed", "a checkpoint's learned rows are given, not computed")
        table = checkpoint_table(args)
        return {None: table}, {}, table_names.checkpoint_name(args.spec, table, positions)
    for option in ("tensor", "offset", "model_config"):
        if getattr(args, option) is not None:
            raise PosencError(option.replace("_", "-"), "only applies to a .safetensors / .npy checkpoint")
    spec = load_json(args.spec)
    if "encoding" in spec or "kind" in spec:
        if args.layer_type is not None:
            raise PosencError("layer-type", "only applies to a HF config.json")
        table = table_spec(spec, args.positions, args.dtype, args.seq_len, args.computed)
        return {None: table}, {}, table_names.spec_name(table)
    if args.computed:
        raise PosencError("computed", "takes a sinusoidal or rope spec, not a config or checkpoint")
    tables, skipped = config_tables(spec, args)
    return tables, skipped, table_names.config_name(spec, args.spec, positions, args.dtype, args.seq_len)


def run_build(args) -> int:
    from ..shm import TableStore

    tables, skipped, default_name = build_plan(args)
    base = args.name or default_name
    named = {check_name(base if layer_type is None else f"{base}.{layer_type}"): table
             for layer_type, table in tables.items()}
    show = args.progress == "always" or (args.progress == "auto" and sys.stderr.isatty())
    store = TableStore(args.shm_dir, mode=args.mode, checksum=args.checksum, lock_timeout_s=args.lock_timeout)
    for name, table in named.items():
        info = store.publish(name, table, progress=ProgressBar(name) if show else None)
        print(f"published {info.name} generation {info.generation}: {info.shape[0]}x{info.shape[1]} {info.dtype} "
              f"({human_bytes(info.nbytes)}) in {store.root / info.segment}; serves {info.serves}")
    for layer_type, why in skipped.items():
        print(f"skipped layer type {layer_type}: {why}")
    return 0


def human_bytes(n: int) -> str:
    size, unit = float(n), "B"
    for bigger in ("KiB", "MiB", "GiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"


def spec_summary(spec: dict) -> str:
    enc = spec.get("encoding", {})
    if enc.get("kind") == "rope":
        params = f"head_dim={enc['head_dim']} base={enc['base']:g} {enc['scaling']['rope_type']}"
    elif enc.get("kind") == "sinusoidal":
        params = f"dim={enc['dim']} base={enc['base']:g} {enc['layout']}"
    elif enc.get("kind") == "alibi":
        params = f"n_heads={enc['n_heads']} {enc['variant']}"
    elif enc.get("kind") == "learned":
        params = f"dim={enc['dim']} {enc['tensor'] or 'array'} offset={enc['offset']} sha256={enc['sha256'][:12]}"
    else:
        return "?"
    return f"{enc['kind']} {params} [{spec['start']}:{spec['stop']})"


def run_ls(args) -> int:
    from ..shm import list_tables

    infos = list_tables(args.shm_dir)
    if args.json:
        for info in infos:
            print(json.dumps(info.to_dict()))
        return 0
    rows = [["NAME", "SPEC", "SHAPE", "DTYPE", "SIZE", "GENERATION", "STATE", "SERVES"]]
    rows += [[i.name, spec_summary(i.spec), f"{i.shape[0]}x{i.shape[1]}", i.dtype or "-", human_bytes(i.nbytes),
              str(i.generation), i.state, i.serves] for i in infos]
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return 0


def run_rm(args) -> int:
    from ..shm import TableStore

    store = TableStore(args.shm_dir, lock_timeout_s=args.lock_timeout)
    for name in args.names:
        store.remove(name)
        print(f"removed {name}")
    return 0


def run_verify(args) -> int:
    from ..shm import ShmError, attach, list_tables

    names = args.names or sorted({i.name for i in list_tables(args.shm_dir) if i.state == "READY"})
    failed = 0
    for name in names:
        started = time.perf_counter()
        try:
            with attach(name, root=args.shm_dir, verify=True) as tbl:
                print(f"ok    {name}  generation {tbl.generation}  {human_bytes(tbl.stored_bytes)}  "
                      f"checksum verified in {(time.perf_counter() - started) * 1e3:.1f} ms")
        except ShmError as exc:
            failed += 1
            print(f"FAIL  {name}: {exc}")
    return 1 if failed else 0
