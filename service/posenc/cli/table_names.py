"""Default names of `posenc table build`: what a user recognises, deterministic, unique per table.

* a spec: its kind and key parameters, then its positions and dtype:
  `rope-d128-theta10000-128k`, `sinusoidal-d128-base500-halves-4k`, `alibi-h32-bloom-m8to8`;
  when those do not pin the whole spec (Llama-3's frequency factors, YaRN's betas, a sinusoidal
  `scale`), six hex digits of the table's hash follow: `rope-d128-theta500000-llama3x8-128k-91c2e0`;
* a HF config: the model's name (its `_name_or_path`, else the directory holding config.json,
  else the file's stem), positions and dtype only when given: `Llama-3.1-8B`, `gemma3.full_attention`;
* a checkpoint: the model's directory (or the file's stem) and the tensor: `gpt2-wpe`,
  `opt-embed_positions`; six digits of the values' SHA-256 keep two checkpoints apart.

Names are valid table names (posenc.shm.paths.check_name): 1..64 of [A-Za-z0-9_.-], no "..".
"""

from __future__ import annotations

import re
from pathlib import Path

from ..shm.paths import NAME_MAX, check_name

#: Room left under NAME_MAX for ".LAYER_TYPE.short" after a config's model name.
MODEL_NAME_MAX = 32
_INVALID = re.compile(r"[^A-Za-z0-9_.-]+")
#: Checkpoint file stems that say nothing of the model (HF's): the directory names it instead.
GENERIC_STEMS = ("model", "pytorch_model", "consolidated")


def clean(text: str) -> str:
    """`text` with every run of characters a table name cannot hold as one '-', and no '..'."""
    text = _INVALID.sub("-", text)
    while ".." in text:
        text = text.replace("..", ".")
    return text.strip("-.") or "table"


def number(value: float) -> str:
    """500000.0 -> "500000", 0.25 -> "0.25", -8 -> "m8": no sign or exponent a name cannot hold."""
    text = str(int(value)) if float(value).is_integer() else repr(float(value))
    return text.replace("-", "m").replace("+", "")


def count(n: int) -> str:
    """131072 -> "128k", 4096 -> "4k", 1000 -> "1000": a range's length as people say it."""
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def table_parts(positions: tuple[int, int] | None, dtype: str | None, seq_len: float | None) -> list[str]:
    """The parts naming positions, dtype and seq_len, each when given: `128k` (0:131072), `m8to8`,
    `f64`, `len4096`."""
    parts = []
    if positions is not None:
        start, stop = positions
        parts.append(count(stop) if start == 0 else f"{number(start)}to{number(stop)}")
    if dtype not in (None, "float32"):
        parts.append("f64")
    if seq_len is not None:
        parts.append(f"len{number(seq_len)}")
    return parts


def _encoding_parts(encoding) -> tuple[list[str], dict]:
    """(name parts, the spec fields they pin) of an encoding spec."""
    spec = encoding.to_dict()
    kind = spec["kind"]
    if kind == "rope":
        kept = {"head_dim": spec["head_dim"], "base": spec["base"]}
        parts = [f"d{spec['head_dim']}", f"theta{number(spec['base'])}"]
        if spec["partial_rotary_factor"] != 1.0:
            kept["partial_rotary_factor"] = spec["partial_rotary_factor"]
            parts.append(f"rot{number(spec['partial_rotary_factor'])}")
        scaling = spec["scaling"]
        if scaling["rope_type"] != "default":
            kept["scaling"] = {k: v for k, v in scaling.items() if k in ("rope_type", "factor")}
            parts.append(scaling["rope_type"] + (f"x{number(scaling['factor'])}" if "factor" in scaling else ""))
        if spec["layout"] != "half":
            kept["layout"] = spec["layout"]
            parts.append(spec["layout"])
        return parts, kept
    if kind == "sinusoidal":
        kept = {"dim": spec["dim"], "base": spec["base"], "layout": spec["layout"]}
        parts = [f"d{spec['dim']}"] + ([f"base{number(spec['base'])}"] if spec["base"] != 10000.0 else [])
        return parts + ([spec["layout"]] if spec["layout"] != "interleaved" else []), kept
    if kind == "alibi":
        kept = {"n_heads": spec["n_heads"], "variant": spec["variant"]}
        return [f"h{spec['n_heads']}"] + ([spec["variant"]] if spec["variant"] != "paper" else []), kept
    return [f"d{spec['dim']}"], {}  # learned: named from their checkpoint (checkpoint_name)


def spec_name(table) -> str:
    """The default name of a table given as a spec; see the module docstring."""
    from ..encodings import LearnedSpec
    from ..errors import PosencError
    from ..tables import ENCODINGS

    parts, kept = _encoding_parts(table.encoding)
    try:
        pinned = not isinstance(table.encoding, LearnedSpec) and \
            ENCODINGS[table.kind].from_dict({"kind": table.kind, **kept}) == table.encoding
    except PosencError:  # the kept fields alone are no valid spec (Llama-3 needs its factors)
        pinned = False
    positions = (table.start, table.stop)
    if table.computed:  # `any`: every position the limit admits, else its range then `computed`
        from ..limits import LIMITS

        whole = positions == (-LIMITS.max_abs_position, LIMITS.max_abs_position + 1)
        parts += ["any"] if whole else [*table_parts(positions, None, None), "computed"]
        positions = None
    name = "-".join([table.kind, *parts, *table_parts(positions, table.dtype, table.seq_len)])
    return fitted(name, None if pinned else table.hash[:6])


def fitted(name: str, tag: str | None) -> str:
    """`name`, cleaned, with `-tag` when given; a name over NAME_MAX is cut and tagged, so two long
    names that share their first characters stay apart."""
    name = clean(name)
    if tag is None and len(name) <= NAME_MAX:
        return check_name(name)
    if tag is None:
        from hashlib import sha256
        tag = sha256(name.encode()).hexdigest()[:6]
    return check_name(f"{name[:NAME_MAX - len(tag) - 1].rstrip('-.')}-{tag}")


def model_name(config: dict, path: str) -> str:
    """The model a config.json is of: its `_name_or_path` (last part), else the directory holding
    a `config.json`, else the file's stem."""
    given = config.get("_name_or_path")
    if isinstance(given, str) and given.strip("/"):
        return clean(given.rstrip("/").rsplit("/", 1)[-1])[:MODEL_NAME_MAX]
    file = Path(path)
    if file.is_dir():
        return clean(file.resolve().name)[:MODEL_NAME_MAX]
    return clean(file.resolve().parent.name if file.name == "config.json" else file.stem)[:MODEL_NAME_MAX]


def config_name(config: dict, path: str, positions: tuple[int, int] | None, dtype: str | None,
                seq_len: float | None) -> str:
    """The default base name of a config's tables (each then gets `.LAYER_TYPE` when several): the
    model's name, then the positions, dtype and seq_len the command was given."""
    return fitted("-".join([model_name(config, path), *table_parts(positions, dtype, seq_len)]), None)


def checkpoint_name(path: str, table, positions: tuple[int, int] | None) -> str:
    """The default name of a learned table read from a checkpoint file: the model (the directory of
    a `model*.safetensors`, else the file's stem), the tensor, the positions and dtype when given,
    and six digits of the values' SHA-256 (what tells two checkpoints of one model apart)."""
    file = Path(path)
    source = file.resolve().parent.name if file.stem.startswith(GENERIC_STEMS) else file.stem
    tensor = table.encoding.tensor
    short = tensor.removesuffix(".weight").rsplit(".", 1)[-1] if tensor else None
    parts = [clean(source)[:MODEL_NAME_MAX]] + ([clean(short)] if short and short != source else [])
    parts += table_parts(positions, table.dtype, None)
    return fitted("-".join(parts), table.encoding.sha256[:6])
