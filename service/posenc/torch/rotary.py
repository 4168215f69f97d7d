"""`ExactRotaryEmbedding`: a drop-in for transformers' rotary modules whose cos/sin are exact.

Same forward as the reference modules, `(x, position_ids[, layer_type]) -> (cos, sin)`, each
[batch, n, rotary_dim] in x's dtype on x's device. The angles are formed in float64 by posenc
and cast once (the reference forms them in float32, which is off by ~1e-2 at position 1e6).

Length-dependent variants follow the reference call by call:
* longrope picks long or short factors from this call's max(position_ids) + 1 (stateless);
* dynamic NTK keeps the reference module's state: frequencies grow with the longest sequence
  seen, and fall back to the initial ones when a call is shorter than max_position_embeddings.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..api.rope import arrange
from ..dtypes import output_dtype
from ..encodings import RopeSpec
from ..errors import PosencError
from ..models import LayerPositions, ModelPositions, from_hf_config
from .cache import CosSinCache
from .tensors import ARRANGEMENTS, COMPLEX, complex_parts, cos_sin, positions_array, posenc_dtype, to_torch


#: Table names a "no table named" error lists of those that are there.
SHOWN_TABLES = 8


def rope_layers(source) -> dict[str, RopeSpec]:
    """{layer_type: RopeSpec} from a config (dict or transformers config), ModelPositions,
    LayerPositions or RopeSpec; PosencError when it holds no RoPE or something else besides."""
    if isinstance(source, RopeSpec):
        return {"default": source}
    if isinstance(source, LayerPositions):
        source = ModelPositions("?", "?", {source.layer_type: source})
    if not isinstance(source, ModelPositions):
        source = from_hf_config(source)
    if not source.encodings:
        raise PosencError("model", source.no_positions())
    others = {name: entry.spec.KIND for name, entry in source.encodings.items() if entry.spec.KIND != "rope"}
    if others:
        raise PosencError("model", f"this {source.model_type} model's positions are not rotary "
                          f"({others}); posenc.torch only replaces rotary modules. For ALiBi models use "
                          "posenc.torch.alibi_bias as the attention bias instead")
    specs = {name: entry.spec for name, entry in source.encodings.items()}
    mrope = [name for name, spec in specs.items() if getattr(spec, "mrope_section", None)]
    if mrope:
        raise PosencError("model", f"layer types {mrope} use M-RoPE (positions [3, n]), which "
                          "ExactRotaryEmbedding does not replace yet")
    return specs


class _DynamicState:
    """The reference's dynamic-NTK bookkeeping (transformers' dynamic_frequency_update)."""

    def __init__(self, original: int):
        self.original = original
        self.cached = original

    def seq_len_for(self, seq_len: int) -> float:
        if seq_len > self.cached:
            self.cached = seq_len
        if seq_len < self.original and self.cached > self.original:
            self.cached = self.original
        return float(self.cached)  # the initial frequencies are those at max_position_embeddings


class ExactRotaryEmbedding(nn.Module):
    """Exact cos/sin for one model's rotary layer types.

    `source`: a model config (dict or transformers config), a ModelPositions / LayerPositions
    entry, or a RopeSpec. `arrangement`: how the cache is laid out ("cat" as Llama's module,
    "interleave" as Cohere's, "complex" as Llama-4's one `freqs_cis` tensor). `table`: optional {layer_type: name} (or one name) of
    shared-memory tables to read rows from instead of computing them.
    """

    def __init__(self, source, *, arrangement: str = "cat", table=None, cache: CosSinCache | None = None,
                 shm_root=None):
        super().__init__()
        if arrangement not in ARRANGEMENTS:
            raise PosencError("arrangement", f"must be one of {list(ARRANGEMENTS)}, got {arrangement!r}")
        self.specs = rope_layers(source)
        self.arrangement = arrangement
        self.cache = cache if cache is not None else CosSinCache()
        self._dynamic = {name: _DynamicState(spec.max_position_embeddings)
                         for name, spec in self.specs.items()
                         if spec.rope_type == "dynamic" and spec.max_position_embeddings}
        self.tables = _attach_tables(table, self.specs, shm_root)

    @property
    def layer_types(self) -> tuple[str, ...]:
        return tuple(self.specs)

    def extra_repr(self) -> str:
        return f"layer_types={list(self.specs)}, arrangement={self.arrangement!r}"

    def _spec_for(self, layer_type) -> tuple[str, RopeSpec]:
        if layer_type is None:
            if len(self.specs) != 1:
                raise PosencError("layer_type", f"this module serves several layer types; pass one of "
                                  f"{list(self.specs)}")
            return next(iter(self.specs.items()))
        if layer_type not in self.specs:
            raise PosencError("layer_type", f"unknown layer type {layer_type!r}; known: {list(self.specs)}")
        return layer_type, self.specs[layer_type]

    def _seq_len(self, name: str, spec: RopeSpec, positions: np.ndarray) -> float | None:
        """The seq_len the reference would use for this call (None: not length-dependent)."""
        if not spec.length_dependent or positions.size == 0:
            return None
        longest = int(np.max(positions)) + 1
        if name in self._dynamic:
            return self._dynamic[name].seq_len_for(longest)
        return float(longest)

    @torch.no_grad()
    def forward(self, x: torch.Tensor, position_ids: torch.Tensor, layer_type: str | None = None):
        """(cos, sin) as the stock module returns them, or one complex tensor for COMPLEX."""
        if self.arrangement != COMPLEX:
            return self._cos_sin(x.dtype, x.device, position_ids, layer_type, self.arrangement)
        cos, sin = self._cos_sin(complex_parts(x.dtype), x.device, position_ids, layer_type, "freq")
        return torch.complex(cos, sin)

    def _cos_sin(self, dtype, device, position_ids, layer_type, arrangement):
        name, spec = self._spec_for(layer_type)
        positions = positions_array(position_ids)
        seq_len = self._seq_len(name, spec, positions)
        integral = positions.size and np.all(positions == np.floor(positions)) and positions.min() >= 0
        if not integral:
            return cos_sin(positions, spec, device=device, dtype=dtype, arrangement=arrangement, seq_len=seq_len)
        top = int(positions.max())
        length = self.cache.length_for(top)
        if length > self.cache.max_rows:
            return cos_sin(positions, spec, device=device, dtype=dtype, arrangement=arrangement, seq_len=seq_len)
        key = (spec.canonical_json, seq_len, str(device), dtype, arrangement, length)
        cos_t, sin_t = self.cache.get(key, lambda: self._table(name, spec, length, seq_len, dtype, device,
                                                               arrangement))
        if positions.ndim == 2 and positions.shape[0] == 1 and _is_range(positions[0]):
            first, stop = int(positions[0, 0]), int(positions[0, -1]) + 1  # prefill: a view, no gather
            return cos_t[None, first:stop], sin_t[None, first:stop]
        index = torch.as_tensor(positions.astype(np.int64), device=device)
        return cos_t[index], sin_t[index]

    def _table(self, name, spec, length, seq_len, dtype, device, arrangement):
        table = self.tables.get(name)
        if table is not None and seq_len is None and table.start <= 0 and table.stop >= length \
                and table.spec.dtype in (posenc_dtype(dtype), "float64"):
            # Rows are [cos | sin] of positions start..stop-1, stored in the asked dtype or in float64
            # (cast once here): never a float32 table re-rounded to a 16-bit type.
            rows = table.array[-table.start:length - table.start].astype(output_dtype(posenc_dtype(dtype)))
            n_freq = rows.shape[1] // 2
            return (to_torch(arrange(rows[:, :n_freq], arrangement), device),
                    to_torch(arrange(rows[:, n_freq:], arrangement), device))
        return cos_sin(np.arange(length), spec, device=device, dtype=dtype, arrangement=arrangement, seq_len=seq_len)


def _is_range(row: np.ndarray) -> bool:
    return row.size > 0 and bool(np.all(np.diff(row) == 1))


def _attach_tables(table, specs: dict[str, RopeSpec], shm_root) -> dict:
    """Attach the named shared-memory tables, each checked to hold exactly its layer type's spec."""
    if table is None:
        return {}
    from ..shm import ShmError, attach

    names = table if isinstance(table, dict) else {layer: table for layer in specs}
    if len(specs) > 1 and not isinstance(table, dict):
        raise PosencError("table", f"this model has several layer types {list(specs)}: pass "
                          "{layer_type: table name}")
    attached = {}
    for layer, name in names.items():
        if layer not in specs:
            raise PosencError("table", f"unknown layer type {layer!r}; known: {list(specs)}")
        try:
            tbl = attach(name, root=shm_root)
        except ShmError as exc:
            if exc.field != "name":
                raise
            raise ShmError("table", f"{exc.message}. {_elsewhere(shm_root)}") from None
        if tbl.spec.encoding != specs[layer] or tbl.spec.seq_len is not None:
            tbl.close()
            raise PosencError("table", f"table {name!r} holds {tbl.spec.encoding!r}, not this model's "
                              f"{layer} positions {specs[layer]!r}")
        attached[layer] = tbl
    return attached


def _elsewhere(shm_root) -> str:
    """What to do when a table is not where it was looked for: the directory is `shm_root`
    (default $POSENC_SHM_DIR, else /dev/shm), which a service given another one does not use."""
    from ..shm import list_tables

    ready = sorted({info.name for info in list_tables(shm_root) if info.state == "READY"})
    shown = ", ".join(ready[:SHOWN_TABLES]) + (f" and {len(ready) - SHOWN_TABLES} more" if len(ready) > SHOWN_TABLES
                                               else "")
    there = f"Tables there: {shown}. " if ready else ""
    return (f"{there}A table published into another directory (`posenc serve` with [server] shm_dir or "
            "--shm-dir, `posenc table build --shm-dir DIR`) is read with shm_root=DIR, or with POSENC_SHM_DIR=DIR "
            "in the environment")
