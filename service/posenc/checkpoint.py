"""Learned absolute position tables out of checkpoints (GPT-2 `wpe`, OPT, BERT).

The values exist only in the checkpoint: read the position-embedding tensor from a
`.safetensors` or `.npy` file (or an uploaded body), refuse what is not a finite 2-D float
array, and make the `TableSpec` that publishes it like any other table. The table's
`LearnedSpec` names the tensor and offset and pins the values by `sha256`: the SHA-256 of the
whole tensor as stored (every row, offset rows included; its own dtype, little-endian, C order),
so tables from two different checkpoints never share an identity.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import ml_dtypes
import numpy as np
import safetensors
from safetensors import safe_open

from .errors import PosencError
from .limits import LIMITS
from .encodings import LearnedSpec
from .tables import TableSpec

#: safetensors dtype codes posenc reads (position embeddings are float tensors).
SAFETENSORS_FLOATS = {"F16": np.dtype(np.float16), "BF16": np.dtype(ml_dtypes.bfloat16),
                      "F32": np.dtype(np.float32), "F64": np.dtype(np.float64)}
_FLOATS = frozenset(SAFETENSORS_FLOATS.values())
FORMATS = (".safetensors", ".npy")


def read_file(path, tensor: str | None = None) -> tuple[str | None, np.ndarray]:
    """(tensor name, values) from a `.safetensors` file (only the one tensor is read) or a `.npy`."""
    path = Path(path)
    if path.suffix not in FORMATS:
        raise PosencError("checkpoint", f"{path}: must be a {' or '.join(FORMATS)} file")
    try:
        if path.suffix == ".npy":
            if tensor is not None:
                raise PosencError("tensor", f"{path} is a .npy file: it holds one unnamed array")
            return None, check_values(np.load(path, mmap_mode="r", allow_pickle=False), "checkpoint")
        with safe_open(str(path), framework="numpy") as f:
            name = pick_tensor(list(f.keys()), tensor)
            code = f.get_slice(name).get_dtype()
            if code not in SAFETENSORS_FLOATS:
                raise PosencError("tensor", f"{name!r} is {code}; a position table is one of "
                                  f"{sorted(SAFETENSORS_FLOATS)}")
            return name, check_values(f.get_tensor(name), "tensor")
    except OSError as exc:
        raise PosencError("checkpoint", f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, safetensors.SafetensorError) as exc:
        if isinstance(exc, PosencError):
            raise
        raise PosencError("checkpoint", f"{path} is not a valid {path.suffix} file ({exc})") from None


def read_safetensors(body: bytes, tensor: str | None = None) -> tuple[str, np.ndarray]:
    """(tensor name, values) from the bytes of a safetensors file (an upload)."""
    try:
        tensors = dict(safetensors.deserialize(body))
    except (safetensors.SafetensorError, ValueError, TypeError) as exc:
        raise PosencError("body", f"not a valid safetensors file ({exc})") from None
    name = pick_tensor(list(tensors), tensor)
    entry = tensors[name]
    dtype = SAFETENSORS_FLOATS.get(entry["dtype"])
    if dtype is None:
        raise PosencError("tensor", f"{name!r} is {entry['dtype']}; a position table is one of "
                          f"{sorted(SAFETENSORS_FLOATS)}")
    data = entry["data"]
    if len(data) != dtype.itemsize * int(np.prod(entry["shape"], dtype=np.int64)):
        raise PosencError("body", f"tensor {name!r}: {len(data)} bytes for shape {entry['shape']} {entry['dtype']}")
    values = np.frombuffer(data, dtype.newbyteorder("<")).reshape(entry["shape"])
    return name, check_values(values, "tensor")


def pick_tensor(names: list[str], tensor: str | None) -> str:
    """The tensor to read: `tensor` itself, else the only name that is a dotted suffix of it or it
    of (checkpoints differ in prefixes: `wpe.weight` vs `transformer.wpe.weight`); with no
    `tensor`, the file's only tensor."""
    if tensor is None:
        if len(names) == 1:
            return names[0]
        raise PosencError("tensor", f"the file holds {len(names)} tensors; name one, e.g. one of "
                          f"{_likely(names)}")
    if tensor in names:
        return tensor
    matches = [n for n in names if n.endswith("." + tensor) or tensor.endswith("." + n)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise PosencError("tensor", f"{tensor!r} matches several tensors: {sorted(matches)}; give the full name")
    raise PosencError("tensor", f"no tensor {tensor!r} in the file; it holds e.g. {_likely(names)}")


def _likely(names: list[str]) -> list[str]:
    """Up to 8 names, position-looking ones first, for error messages."""
    ranked = sorted(names, key=lambda n: (not any(w in n.lower() for w in ("pos", "wpe")), n))
    return ranked[:8]


def check_values(values, field: str) -> np.ndarray:
    """A finite 2-D float array [rows, dim] within the limits, little-endian native, C order."""
    if not isinstance(values, np.ndarray) or values.dtype.newbyteorder("=") not in _FLOATS:
        dtype = getattr(values, "dtype", type(values).__name__)
        raise PosencError(field, f"must be a float array (float16, bfloat16, float32, float64), got {dtype}")
    if values.ndim != 2 or 0 in values.shape:
        raise PosencError(field, f"must be a non-empty 2-D table [positions, dim], got shape {values.shape}")
    if values.shape[1] > LIMITS.max_dim:
        raise PosencError(field, f"dim {values.shape[1]} is over the limit of {LIMITS.max_dim} (POSENC_MAX_DIM)")
    LIMITS.check_output(values.shape, values.dtype.itemsize, field=field)
    values = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("="))
    if not np.isfinite(values).all():
        raise PosencError(field, "holds NaN or infinite values; a position table must be finite")
    return values


def values_sha256(values: np.ndarray) -> str:
    """SHA-256 of the tensor as stored: its dtype, little-endian, C order."""
    little = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<"))
    return hashlib.sha256(little.view(np.uint8)).hexdigest()


def learned_table(values: np.ndarray, spec: LearnedSpec | None = None, *, tensor: str | None = None,
                  offset: int | None = None, start: int | None = None, stop: int | None = None,
                  dtype: str | None = None) -> TableSpec:
    """The table publishing `values` ([offset + num_positions, dim]) as positions start..stop-1.

    `spec` (a family reader's, e.g. from `posenc.from_hf_config`) fixes the expected shape and
    offset; `tensor` and `offset` override it. A `spec.sha256` must match the values. The
    stored dtype defaults to the narrowest that holds the values exactly (float64 for a float64
    tensor, float32 otherwise)."""
    values = check_values(values, "values")
    rows, dim = values.shape
    digest = values_sha256(values)
    if spec is None:
        offset = 0 if offset is None else offset
        if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset < rows:
            raise PosencError("offset", f"must be an integer in [0, {rows}) for a tensor of {rows} rows")
        spec = LearnedSpec(rows - offset, dim=dim, tensor=tensor, offset=offset)
    else:
        if not isinstance(spec, LearnedSpec):
            raise PosencError("spec", f"must be a LearnedSpec, got {type(spec).__name__}")
        if spec.sha256 is not None and spec.sha256 != digest:
            raise PosencError("sha256", f"the tensor's values hash to {digest}, not the spec's {spec.sha256}")
        spec = LearnedSpec(spec.num_positions, dim=spec.dim, tensor=spec.tensor if tensor is None else tensor,
                           offset=spec.offset if offset is None else offset)
        if (rows, dim) != (spec.rows, spec.dim):
            raise PosencError("tensor", f"has shape {(rows, dim)}; the model's spec expects "
                              f"{(spec.rows, spec.dim)} (offset {spec.offset} + {spec.num_positions} positions, "
                              f"dim {spec.dim})")
    spec = LearnedSpec(spec.num_positions, dim=dim, tensor=spec.tensor, offset=spec.offset, sha256=digest)
    if dtype is None:
        dtype = "float64" if values.dtype == np.float64 else "float32"
    return TableSpec(spec, 0 if start is None else start, spec.num_positions if stop is None else stop, dtype,
                     source=values)
