"""`patch_model`: make a loaded transformers model's RoPE exact, in place, in one line.

Every rotary module of the model (transformers names them `*RotaryEmbedding`) is replaced by an
`ExactRotaryEmbedding` serving the same layer types, after a check that posenc's reading of the
config reproduces the stock module at small positions (where float32 angles are still exact to
~1e-6): a model whose positions posenc would get wrong is refused, never silently changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from ..errors import PosencError
from ..models import from_hf_config
from .cache import CosSinCache
from .rotary import ExactRotaryEmbedding, rope_layers
from .tensors import ARRANGEMENTS

#: Positions the stock and exact modules are compared at before a swap.
PROBE_POSITIONS = (0, 1, 2, 3, 5, 7, 11)
#: float32 angles at p <= 11 are within a few 1e-7 of exact: 1e-4 separates layouts and bases sharply.
PROBE_TOLERANCE = 1e-4


@dataclass
class Replacement:
    path: str  # dotted module path inside the model
    stock: str  # class name of the module replaced
    layer_types: tuple[str, ...]
    arrangement: str
    #: {layer_type: "'NAME' in DIR (DTYPE, positions START:STOP)"} of the shared-memory tables its
    #: rows are read from; empty when posenc computes them
    tables: dict[str, str] = field(default_factory=dict)

    def source(self) -> str:
        """Where the rows come from, as the report says it: a table or posenc's computation."""
        if not self.tables:
            return "rows computed by posenc"
        read = ", ".join(f"{layer}: {where}" if len(self.layer_types) > 1 else where
                         for layer, where in self.tables.items())
        return (f"rows read from shared-memory table {read}; computed where it does not serve: positions "
                "beyond it, or a dtype it is not stored in (a float64 table serves every dtype)")


@dataclass
class PatchReport:
    model_type: str
    replaced: list[Replacement] = field(default_factory=list)

    def __str__(self):
        lines = [f"posenc.torch.patch_model: {len(self.replaced)} rotary module(s) of this "
                 f"{self.model_type} model now exact"]
        lines += [f"  {r.path}: {r.stock} -> ExactRotaryEmbedding (layer types {list(r.layer_types)}, "
                  f"{r.arrangement}; {r.source()})" for r in self.replaced]
        return "\n".join(lines)


def _rotary_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(path, module) for path, module in model.named_modules()
            if type(module).__name__.endswith("RotaryEmbedding") and not isinstance(module, ExactRotaryEmbedding)]


def _stock_layer_types(path: str, module: nn.Module, model_positions) -> tuple[str, ...]:
    """Which of the model's layer types this stock module serves."""
    own = getattr(module, "layer_types", None)
    if own:  # one module for several layer types, called with layer_type= (Gemma-3)
        missing = [name for name in own if name not in model_positions.encodings]
        if missing:
            raise PosencError("model", f"the rotary module {path!r} serves layer types {list(own)}, but posenc "
                              f"reads {list(model_positions.encodings)} from this config; not patched")
        return tuple(own)
    rope = {name: entry for name, entry in model_positions.encodings.items() if entry.spec.KIND == "rope"}
    if len(rope) == 1:
        return tuple(rope)
    match = re.search(r"layers\.(\d+)\.", path + ".")
    if match:  # a module per layer (ModernBERT-style): the layer type of that layer index
        index = int(match.group(1))
        owners = [name for name, entry in rope.items() if index in entry.layers]
        if len(owners) == 1:
            return tuple(owners)
    raise PosencError("model", f"cannot tell which of the layer types {list(rope)} the rotary module "
                      f"{path!r} serves")


def _probe(path: str, stock: nn.Module, exact: ExactRotaryEmbedding, layer_type: str, multi: bool) -> str:
    """The arrangement under which exact matches stock at PROBE_POSITIONS; PosencError if none does.
    `layer_type` is the one probed; the stock module is called with it only when it serves several."""
    position_ids = torch.tensor([PROBE_POSITIONS])
    x = torch.zeros(1, 1, len(PROBE_POSITIONS), 1, dtype=torch.float32)
    args = (x, position_ids, layer_type) if multi else (x, position_ids)
    called_with = layer_type if multi else None
    with torch.no_grad():
        want_cos, want_sin = _cos_sin_of(stock(*args), stock)
    errors = {}
    for arrangement in ARRANGEMENTS:
        exact.arrangement = arrangement
        exact.cache.clear()
        got_cos, got_sin = _cos_sin_of(exact(x.to(torch.float64), position_ids, called_with), stock)
        if got_cos.shape != want_cos.shape:
            errors[arrangement] = f"shape {got_cos.shape} vs the stock {want_cos.shape}"
            continue
        err = max(np.abs(got_cos - want_cos).max(), np.abs(got_sin - want_sin).max())
        if err <= PROBE_TOLERANCE:
            exact.cache.clear()
            return arrangement
        errors[arrangement] = f"max difference {err:.3g}"
    raise PosencError("model", f"posenc's positions for {path!r} (layer type {layer_type!r}) do not reproduce the "
                      f"stock {type(stock).__name__} at positions {PROBE_POSITIONS} ({errors}); not patched"
                      + _cast_inv_freq_hint(stock))


def _cos_sin_of(output, stock: nn.Module) -> tuple[np.ndarray, np.ndarray]:
    """(cos, sin) as float64 arrays from what a rotary module returns: a (cos, sin) pair (most
    families) or one complex tensor cos + i*sin (Llama-4's freqs_cis), each compared like for like
    (a complex one only matches the exact module's COMPLEX arrangement, by its shape and dtype)."""
    if isinstance(output, torch.Tensor) and output.is_complex():
        return output.real.to(torch.float64).numpy(), output.imag.to(torch.float64).numpy()
    if isinstance(output, (tuple, list)) and len(output) == 2 and not any(t.is_complex() for t in output):
        return tuple(t.to(torch.float64).numpy() for t in output)
    raise PosencError("model", f"the rotary module {type(stock).__name__} returns "
                      f"{type(output).__name__}, neither (cos, sin) nor one complex tensor; not patched")


def _cast_inv_freq_hint(stock: nn.Module) -> str:
    """Why a probe failed when the stock module's inverse frequencies are not float32:
    `model.to(torch.bfloat16)` casts every floating buffer, `inv_freq` included, so the stock
    angles are p times a bf16-rounded frequency (differences of ~1e-2 at p = 11) and no
    correct spec can match them. The config is fine; the cast is the difference."""
    cast = {name: buffer.dtype for name, buffer in stock.named_buffers()
            if name.endswith("inv_freq") and buffer.is_floating_point() and buffer.dtype.itemsize < 4}
    if not cast:
        return ""
    dtypes = sorted({str(dtype) for dtype in cast.values()})
    were = "was" if len(cast) == 1 else "were"
    return (f". The stock module's {', '.join(sorted(cast))} {were} cast to {', '.join(dtypes)} (model.to(...) casts "
            "buffers too), so its angles use rounded frequencies: that, not the config, is the difference. Call "
            "patch_model before casting the model (the exact module's rows stay exact in any dtype), or load it "
            f"in that dtype with from_pretrained(..., dtype={dtypes[0]}) (torch_dtype= before transformers 4.56) "
            "instead of .to(), which keeps inv_freq in float32")


def patch_model(model: nn.Module, *, table=None, shm_root=None, cache: CosSinCache | None = None) -> PatchReport:
    """Replace every rotary module of `model` with an exact one; returns what was replaced.

    `table`: a shared-memory table name (or {layer_type: name}) that `posenc serve` or `posenc table
    build` publishes for this model, read instead of computing the rows, so many processes on a host
    share one cache; `shm_root`: the directory they publish into (default $POSENC_SHM_DIR, else
    /dev/shm). The report says which modules read a table.
    Refuses (PosencError, nothing changed) a model that is not rotary (ALiBi, T5, learned tables),
    one without rotary modules, or one whose stock module posenc's spec does not reproduce.
    """
    config = getattr(model, "config", None)
    if config is None:
        raise PosencError("model", "has no .config: pass a transformers model")
    positions = from_hf_config(config)
    rope_layers(positions)  # refuses ALiBi, T5, learned, M-RoPE before anything changes
    found = _rotary_modules(model)
    if not found:
        raise PosencError("model", f"this {positions.model_type} model has no *RotaryEmbedding module to replace")
    cache = cache if cache is not None else CosSinCache()
    planned = []
    for path, stock in found:
        layer_types = _stock_layer_types(path, stock, positions)
        multi = bool(getattr(stock, "layer_types", None))
        entries = {name: positions.encodings[name] for name in layer_types}
        tables = table if not isinstance(table, dict) else {k: v for k, v in table.items() if k in layer_types}
        exact = ExactRotaryEmbedding(positions if multi or len(entries) == len(positions.encodings)
                                     else entries[layer_types[0]], table=tables, cache=cache, shm_root=shm_root)
        arrangement = _probe(path, stock, exact, layer_types[0], multi)
        for other in layer_types[1:]:
            if _probe(path, stock, exact, other, multi) != arrangement:
                raise PosencError("model", f"layer types of {path!r} disagree on the cache layout")
        planned.append((path, stock, exact, layer_types, arrangement))
    report = PatchReport(positions.model_type)
    for path, stock, exact, layer_types, arrangement in planned:
        exact.arrangement = arrangement
        parent_path, _, attr = path.rpartition(".")
        parent = model.get_submodule(parent_path) if parent_path else model
        setattr(parent, attr, exact.to(_device_of(stock)))
        tables = {layer: f"{table.name!r} in {table.path.parent} ({table.spec.dtype}, positions "
                         f"{table.start}:{table.stop})" for layer, table in exact.tables.items()}
        report.replaced.append(Replacement(path, type(stock).__name__, layer_types, arrangement, tables))
    return report


def _device_of(module: nn.Module):
    for buffer in module.buffers():
        return buffer.device
    return torch.device("cpu")
