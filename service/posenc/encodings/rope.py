"""`RopeSpec`: a validated, canonical description of one model's rotary embedding."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from ..args import as_choice, as_dim, as_float, as_int, as_mapping
from ..errors import PosencError
from .canonical import Canonical
from .rope_scaling import ALIASES, VARIANTS, RopeDims

LAYOUTS = ("half", "interleaved")
#: How cos (and, the same way, sin) are laid out over the last axis: the `arrangement` that
#: posenc.rope_cos_sin, POST /v1/rope/cos_sin and posenc.torch.cos_sin take. Name -> columns per
#: frequency. "freq": [c_0 .. c_{n-1}], one column per frequency (the library's and HTTP's default,
#: and each half of a table row); "cat": [c_0 .. c_{n-1}, c_0 .. c_{n-1}], the halves duplicated
#: (`torch.cat((freqs, freqs), -1)`: Llama and most transformers rotary modules, posenc.torch's
#: default); "interleave": [c_0, c_0, c_1, c_1, ...] (`repeat_interleave(freqs, 2)`: Cohere). Not the
#: rotation layout (LAYOUTS): GLM's module returns "cat" and its apply_rotary_pos_emb interleaves.
ARRANGEMENTS = {"freq": 1, "cat": 2, "interleave": 2}
#: Context lengths beyond 2**53 are not exact in float64 (the scaling math divides them).
MAX_LENGTH = 2**53
#: Keys that may sit in a HF scaling dict but are not scaling parameters.
_PASSTHROUGH_KEYS = {"rope_type", "type", "rope_theta", "partial_rotary_factor", "original_max_position_embeddings"}


@dataclass(frozen=True, eq=False, init=False)
class RopeSpec(Canonical):
    """A rotary embedding: head size, base, partial rotary and one scaling variant.

    `scaling` is a HF `rope_parameters` / `rope_scaling` dict (legacy `"type"` accepted),
    e.g. `{"rope_type": "yarn", "factor": 4.0}`. Keys are checked against the variant:
    an unknown or missing key raises `PosencError` naming it. `layout` ("half" or
    "interleaved") is what `rope_apply` uses when it is not told. `xpos_scale_base`
    enables xPos decay in `rope_apply` (None = off).

    `mrope_section` (Qwen2-VL / Qwen2.5-VL M-RoPE) splits the n_freq frequencies into
    consecutive chunks; chunk k takes its angles from position axis k % 3 (temporal, height,
    width), so such a spec accepts [3, n] positions. The sizes must add up to n_freq. It is
    a keyword only: inside a HF scaling dict it is refused like any unknown key, because
    other models (Qwen3-VL's interleaved M-RoPE) use the same key with another meaning; the
    qwen2_vl reader moves it out.
    """

    KIND = "rope"  # the "kind" of to_dict(), a table's encoding
    POSITIONAL = "head_dim"
    KEYWORDS = ("base", "partial_rotary_factor", "scaling", "max_position_embeddings",
                "original_max_position_embeddings", "layout", "xpos_scale_base", "mrope_section",
                "mrope_interleaved")

    head_dim: int
    base: float
    partial_rotary_factor: float
    rope_type: str
    scaling_params: MappingProxyType = field(repr=False)
    max_position_embeddings: int | None
    original_max_position_embeddings: int | None
    layout: str
    xpos_scale_base: float | None
    mrope_section: tuple[int, ...] | None
    mrope_interleaved: bool

    def __init__(self, head_dim, *, base=10000.0, partial_rotary_factor=1.0, scaling=None,
                 max_position_embeddings=None, original_max_position_embeddings=None,
                 layout="half", xpos_scale_base=None, mrope_section=None, mrope_interleaved=False):
        head_dim = as_dim(head_dim, "head_dim")
        base = as_float(base, "base", exclusive_minimum=1.0)
        prf = as_float(partial_rotary_factor, "partial_rotary_factor", exclusive_minimum=0.0, maximum=1.0)
        max_len = None if max_position_embeddings is None else as_int(
            max_position_embeddings, "max_position_embeddings", minimum=1, maximum=MAX_LENGTH)
        scaling = as_mapping(scaling, "scaling")
        type_key = "rope_type" if "rope_type" in scaling else "type"
        rope_type = scaling.get(type_key, "default")
        if not isinstance(rope_type, str):  # also keeps unhashable JSON (lists, objects) out of the lookups
            raise PosencError(f"scaling.{type_key}", f"must be a string, got {type(rope_type).__name__}")
        rope_type = ALIASES.get(rope_type, rope_type)
        if rope_type not in VARIANTS:
            raise PosencError(f"scaling.{type_key}", f"unknown rope_type {rope_type[:40]!r}; known: {sorted(VARIANTS)}")
        # The spec's own value overrides the one inside the scaling dict (as HF's standardize_rope_params).
        original = original_max_position_embeddings
        if original is None:
            original = scaling.get("original_max_position_embeddings")
        original = None if original is None else as_int(original, "original_max_position_embeddings", minimum=1,
                                                        maximum=MAX_LENGTH)
        dims = RopeDims(head_dim, int(head_dim * prf), prf, base, max_len, original)
        if dims.rotary_dim < 1:
            raise PosencError("partial_rotary_factor", f"gives a rotary dim of 0 for head_dim {head_dim}")
        variant = VARIANTS[rope_type]
        params = {k: v for k, v in scaling.items() if k not in _PASSTHROUGH_KEYS}
        allowed = set(variant.KEYS["required"]) | set(variant.KEYS["optional"])
        for key in params:
            if key not in allowed:
                raise PosencError(f"scaling.{key}", f"is not a parameter of rope_type {rope_type!r}; "
                                  f"allowed: {sorted(allowed)}")
        for key in variant.KEYS["required"]:
            if params.get(key) is None:
                raise PosencError(f"scaling.{key}", f"is required for rope_type {rope_type!r}")
        params = variant.validate(params, dims)
        layout = as_choice(layout, "layout", LAYOUTS)
        if xpos_scale_base is not None:
            xpos_scale_base = as_float(xpos_scale_base, "xpos_scale_base", exclusive_minimum=0.0)
        sets = object.__setattr__
        sets(self, "head_dim", head_dim)
        sets(self, "base", base)
        sets(self, "partial_rotary_factor", prf)
        sets(self, "rope_type", rope_type)
        sets(self, "scaling_params", MappingProxyType(params))
        sets(self, "max_position_embeddings", max_len)
        sets(self, "original_max_position_embeddings", original)
        sets(self, "layout", layout)
        sets(self, "xpos_scale_base", xpos_scale_base)
        if 2 * self.n_freq > head_dim:
            raise PosencError("head_dim", f"an odd rotary dim ({self.rotary_dim}) equal to head_dim cannot rotate; "
                              "use partial_rotary_factor < 1")
        if mrope_section is not None:
            mrope_section = _as_mrope_section(mrope_section, self.n_freq)
            if xpos_scale_base is not None:
                raise PosencError("mrope_section", "cannot be combined with xpos_scale_base")
        sets(self, "mrope_section", mrope_section)
        if mrope_interleaved not in (True, False):
            raise PosencError("mrope_interleaved", f"must be true or false, got {mrope_interleaved!r}")
        if mrope_interleaved and mrope_section is None:
            raise PosencError("mrope_interleaved", "needs an mrope_section")
        sets(self, "mrope_interleaved", bool(mrope_interleaved))

    # --- derived -------------------------------------------------------------------
    @property
    def dims(self) -> RopeDims:
        return RopeDims(self.head_dim, self.rotary_dim, self.partial_rotary_factor, self.base,
                        self.max_position_embeddings, self.original_max_position_embeddings)

    @property
    def rotary_dim(self) -> int:
        """d = int(head_dim * partial_rotary_factor)."""
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def n_freq(self) -> int:
        """Number of frequencies: ceil(d/2), or head_dim//2 for proportional."""
        return self.head_dim // 2 if self.rope_type == "proportional" else (self.rotary_dim + 1) // 2

    @property
    def mrope_chunks(self) -> tuple[tuple[int, int, int], ...]:
        """(first, end, axis) per M-RoPE chunk of frequencies, as HF's `freq.split(mrope_section)`
        followed by `chunk[i % 3]`; empty for a plain spec. Interleaved M-RoPE (Qwen3-VL's
        `apply_interleaved_mrope`): frequency f takes axis f % 3 while f < 3 * mrope_section[f % 3]
        (axes 1, 2), else axis 0; returned as runs of one axis."""
        if self.mrope_interleaved:
            section = self.mrope_section
            axes = [f % 3 if f % 3 and f < 3 * section[f % 3] else 0 for f in range(self.n_freq)]
            chunks, first = [], 0
            for f in range(1, self.n_freq + 1):
                if f == self.n_freq or axes[f] != axes[first]:
                    chunks.append((first, f, axes[first]))
                    first = f
            return tuple(chunks)
        chunks, first = [], 0
        for k, size in enumerate(self.mrope_section or ()):
            chunks.append((first, first + size, k % 3))
            first += size
        return tuple(chunks)

    @property
    def scaling(self) -> dict:
        """The scaling dict in canonical form (rope_type plus validated parameters)."""
        out = {"rope_type": self.rope_type}
        out.update({k: list(v) if isinstance(v, tuple) else v for k, v in self.scaling_params.items()})
        return out

    @property
    def length_dependent(self) -> bool:
        """True for the variants whose frequencies depend on seq_len (dynamic, longrope)."""
        return self.rope_type in ("dynamic", "longrope")

    @classmethod
    def from_hf_config(cls, config: dict, *, strict: bool = True) -> "RopeSpec":
        """The one RoPE a HF model uses, from its `config.json`: posenc.models' reading
        (`rope_spec_from_hf_config`). Imported at call time: the models package builds on the
        encodings, never the other way round at import."""
        from ..models import rope_spec_from_hf_config

        return rope_spec_from_hf_config(config, strict=strict)

    def inv_freq(self, seq_len: float | None = None) -> tuple[np.ndarray, float]:
        """(inv_freq float64[n_freq], attention_factor) for this spec at `seq_len`."""
        if seq_len is not None:
            seq_len = as_float(seq_len, "seq_len", exclusive_minimum=0.0)
        try:
            with np.errstate(all="ignore"):
                inv, attention = VARIANTS[self.rope_type].inv_freq(self.dims, self.scaling_params, seq_len)
            inv = np.ascontiguousarray(inv, dtype=np.float64)
            finite = bool(np.isfinite(inv).all()) and math.isfinite(attention)
        except (ArithmeticError, ValueError) as exc:  # e.g. factor ** (d / (d - 2)) overflowing a float
            if isinstance(exc, PosencError):
                raise
            finite = False
        if not finite:
            field = "scaling.factor" if "factor" in self.scaling_params else "base"
            raise PosencError(field, "gives non-finite frequencies" + ("" if seq_len is None else
                                                                      f" at seq_len {seq_len:g}"))
        return inv, float(attention)

    # --- identity ----------------------------------------------------------------------
    def to_dict(self) -> dict:
        out = {
            "kind": self.KIND,
            "head_dim": self.head_dim,
            "base": self.base,
            "partial_rotary_factor": self.partial_rotary_factor,
            "scaling": self.scaling,
            "max_position_embeddings": self.max_position_embeddings,
            "original_max_position_embeddings": self.original_max_position_embeddings,
            "layout": self.layout,
            "xpos_scale_base": self.xpos_scale_base,
        }
        if self.mrope_section is not None:  # only then: plain specs keep their identity (hash)
            out["mrope_section"] = list(self.mrope_section)
        if self.mrope_interleaved:
            out["mrope_interleaved"] = True
        return out

    def __eq__(self, other):
        return isinstance(other, RopeSpec) and self.canonical_json == other.canonical_json

    def __hash__(self):
        return hash(self.canonical_json)

    def __repr__(self):
        extra = "" if self.rope_type == "default" else f", scaling={self.scaling}"
        if self.mrope_section is not None:
            extra += f", mrope_section={list(self.mrope_section)}" + (", interleaved" if self.mrope_interleaved else "")
        return (f"RopeSpec(head_dim={self.head_dim}, base={self.base:g}, "
                f"partial_rotary_factor={self.partial_rotary_factor:g}{extra})")


def _as_mrope_section(value, n_freq: int) -> tuple[int, ...]:
    """Chunk sizes (>= 0) that add up to n_freq, as torch.split needs them."""
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        raise PosencError("mrope_section", f"must be a list of integers, got {value!r}")
    sizes = list(value)
    if not 1 <= len(sizes) <= max(3, n_freq):
        raise PosencError("mrope_section", f"must have 1 to {max(3, n_freq)} entries, got {len(sizes)}")
    sizes = tuple(as_int(v, "mrope_section", minimum=0, maximum=n_freq) for v in sizes)
    if sum(sizes) != n_freq:
        raise PosencError("mrope_section", f"must add up to the spec's {n_freq} rotary frequencies, "
                          f"got {list(sizes)} = {sum(sizes)}")
    return sizes


def seq_len_for(positions: np.ndarray, seq_len) -> float | None:
    """The length a fresh HF module would use for these positions: max(position) + 1."""
    if seq_len is not None:
        return as_float(seq_len, "seq_len", exclusive_minimum=0.0)
    return float(positions.max()) + 1.0 if positions.size else None


__all__ = ["RopeSpec", "LAYOUTS", "seq_len_for"]
