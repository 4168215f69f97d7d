"""`posenc audit model.gguf [--model-config config.json]`: the RoPE llama.cpp will compute from a GGUF
file, against the exact positions of the model's HF config.

llama.cpp conversions get RoPE wrong often, and nothing fails loudly: a wrong `rope.freq_base`, a
`rope.dimension_count` that ignores partial rotary, a missing or wrong scaling factor / original
context length, Llama-3's `rope_freqs` tensor left out, LongRoPE's factor tensors swapped, a
sliding-window base not written, or an architecture whose rope type pairs dimensions differently
from the HF model. This module reads the file as llama.cpp's loader does (`llama_cpp` holds the
facts: its defaults, which keys each architecture's loader reads, its rope type per architecture,
what convert_hf_to_gguf.py writes), computes the frequencies and attention factor `ggml_rope_ext`
uses for each group of layers (ggml-cpu `rope_yarn`, `ggml_rope_yarn_corr_dims`, llama-context's
`yarn_attn_factor`), and compares them with the config's, naming the same causes the cache audit
names. The error table compares cos/sin at float64 angles from both (llama.cpp's own float32 angle
arithmetic is not part of the file).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..encodings import RopeSpec
from ..encodings.rope import MAX_LENGTH
from ..errors import PosencError
from ..models import from_hf_config
from .engine import Expected, expected_entries
from .findings import Finding
from .ggml_rope import correction_dims
from .gguf_file import MAGIC, GgufFile, open_gguf
from .infer import Inferred, infer_spec, match_score
from .llama_cpp import (
    CONVERTED_AS,
    LLAMA_CPP_VERSION,
    SOFTMAX_MSCALE,
    SWA,
    YARN_DEFAULTS,
    YARN_KEYS,
    YARN_LOG_MUL_SCALE,
    rope_type,
)
from .observe import Observation
from .precision import exact_cos_sin, range_max
from .report import status_of
from .structure import frequency_findings

#: llama.cpp's scaling types (llama_rope_scaling_type_from_string); any other string fails its load.
SCALING_TYPES = ("none", "linear", "yarn", "longrope")
FACTOR_TENSORS = ("rope_freqs", "rope_factors_long", "rope_factors_short")
#: Relative difference of a frequency that float32 metadata explains (a few float32 ulp).
FREQ_TOLERANCE = 2.0 ** -21
#: Relative difference of an attention factor (or softmax scale) that float32 metadata explains.
FACTOR_TOLERANCE = 1e-6
#: Positions compared in the error table: all below this, then log-spaced to the context length.
DENSE_POSITIONS = 4096
SPARSE_POSITIONS = 4096
PAIRING = {"norm": "adjacent pairs (NORM)", "neox": "pairs n_rot/2 apart (NEOX)"}


@dataclass(frozen=True)
class LayerGroup:
    """Layers llama.cpp rotates with one base and frequency scale: "full", or "swa" (sliding-window layers)."""

    name: str
    freq_base: float
    freq_scale: float
    layers: frozenset[int] | None  # None: every layer (the file gives no block_count)


@dataclass
class GgufRope:
    """What llama.cpp's loader and context set up for RoPE from one GGUF file."""

    arch: str
    rope_type: str | None  # llama_cpp.ROPE_TYPE's value; None: an architecture not in that table
    context_length: int
    head_dim: int
    n_rot: int
    n_layer: int | None
    freq_base: float
    scaling_type: str  # as llama.cpp reads it: "linear" when the key is absent
    factor: float | None  # rope.scaling.factor (or the old rope.scale_linear) as written
    freq_scale: float  # what llama.cpp rotates with: 1/factor, 1 for type none or no factor
    original_context: int  # n_ctx_orig_yarn: rope.scaling.original_context_length, else context_length
    attn_factor: float  # rope.scaling.attn_factor (1.0 when absent)
    ext_factor: float  # YaRN's extrapolation mix: 1 for type yarn, 0 otherwise (unless the loader reads the key)
    beta_fast: float
    beta_slow: float
    yarn_attn: float  # llama_hparams.yarn_attn_factor (1.0 unless the loader reads the key)
    mscale_all_dim: float  # the loader's rope_yarn_log_mul (0: not read or absent)
    rope_freqs: np.ndarray | None = None  # Llama-3: per-frequency divisors
    factors_long: np.ndarray | None = None  # LongRoPE
    factors_short: np.ndarray | None = None
    groups: tuple[LayerGroup, ...] = ()
    defaults: list[str] = field(default_factory=list)  # keys absent from the file, taken at llama.cpp's default
    written: dict = field(default_factory=dict)  # every RoPE key the file has, as written
    notes: list[str] = field(default_factory=list)

    @property
    def pairing(self) -> str | None:
        return PAIRING.get(self.rope_type)


#: LLAMA_MAX_LAYERS: llama.cpp refuses a file with more blocks.
MAX_LAYERS = 512
#: The widest rotary dim audited (the widest of any model we know is 512): the error table holds
#: 8192 positions x n_rot / 2 float64 values per array.
MAX_ROTARY_DIM = 1024


class Metadata:
    """The `{arch}.` keys of one file, typed as llama.cpp's `get_key` reads them (a per-layer array gives its
    first value, as n_head() does); a key left out takes the default given, recorded in `defaults`."""

    def __init__(self, fields: dict, arch: str):
        self.fields, self.arch, self.defaults = fields, arch, []

    def raw(self, name: str, default=None, *, record: bool = True):
        full = f"{self.arch}.{name}"
        if full in self.fields:
            return self.fields[full]
        if record and default is not None:
            self.defaults.append(full)
        return default

    def number(self, name: str, default=None, *, integer: bool = False, minimum: float = 0.0,
               above: bool = True, maximum: float = MAX_LENGTH, record: bool = True):
        """The key as a finite number > minimum (>= with above=False) and <= maximum; PosencError naming it
        otherwise."""
        value = self.raw(name, default, record=record)
        if isinstance(value, list) and value:
            value = value[0]
        if value is None:
            return None
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and \
            (value > minimum if above else value >= minimum) and value <= maximum and \
            (not integer or float(value).is_integer())
        if not ok:
            kind = "a whole number" if integer else "a number"
            raise PosencError(f"{self.arch}.{name}", f"must be {kind} {'>' if above else '>='} {minimum:g} and "
                              f"<= {maximum:g}, got {value!r}")
        return int(value) if integer else float(value)


def _swa_layers(meta: Metadata, n_layer: int, period: int) -> frozenset[int]:
    """llama.cpp's SWA layers: the `attention.sliding_window_pattern` array, or its period (set_swa_pattern)."""
    pattern = meta.raw("attention.sliding_window_pattern", record=False)
    if isinstance(pattern, list):
        return frozenset(i for i, swa in enumerate(pattern[:n_layer]) if swa)
    n = period if pattern is None else meta.number("attention.sliding_window_pattern", integer=True, above=False)
    return frozenset(i for i in range(n_layer) if n == 0 or i % n < n - 1)


def read_gguf(source) -> GgufRope:
    """The RoPE set-up llama.cpp derives from a GGUF file (a path, or its bytes: the head of the file is enough
    when it holds the metadata and RoPE tensors); PosencError naming the key when one is missing or bad."""
    file = source if isinstance(source, GgufFile) else open_gguf(source)
    arch = file.fields.get("general.architecture")
    if not isinstance(arch, str):
        raise PosencError("general.architecture", "missing: cannot tell which keys hold the RoPE parameters")
    meta = Metadata(file.fields, arch)
    heads = meta.number("attention.head_count", integer=True, minimum=0, above=False, record=False)
    embedding = meta.number("embedding_length", integer=True, record=False)
    head_dim = meta.number("attention.key_length", integer=True, record=False) or \
        (embedding // heads if embedding and heads else None)
    if not head_dim:
        raise PosencError(f"{arch}.attention.key_length", "missing, and embedding_length / head_count cannot "
                          "give the head dim")
    context = meta.number("context_length", integer=True, record=False)
    if context is None:
        raise PosencError(f"{arch}.context_length", "missing: the length llama.cpp's RoPE is judged at")
    n_rot = meta.number("rope.dimension_count", head_dim, integer=True)
    if n_rot % 2 or n_rot > min(head_dim, MAX_ROTARY_DIM):
        raise PosencError(f"{arch}.rope.dimension_count", f"must be even and at most the head dim {head_dim} "
                          f"(and {MAX_ROTARY_DIM}), got {n_rot}")
    scaling = meta.raw("rope.scaling.type", "linear")
    if scaling not in SCALING_TYPES:
        raise PosencError(f"{arch}.rope.scaling.type", f"{scaling!r} is not one llama.cpp knows "
                          f"({', '.join(SCALING_TYPES)}): llama.cpp refuses to load the file")
    written = "rope.scaling.factor" if f"{arch}.rope.scaling.factor" in file.fields else "rope.scale_linear"
    factor = meta.number(written, minimum=0, above=False, record=False)
    freq_scale = 1.0 if scaling == "none" or not factor else 1.0 / factor
    yarn = {**YARN_DEFAULTS, **{name: meta.number(f"rope.scaling.yarn_{name}", value,
                                                  minimum=-math.inf if name == "ext_factor" else 0.0)
                                for name, value in YARN_KEYS.get(arch, {}).items()}}
    ext = yarn["ext_factor"] if yarn["ext_factor"] >= 0 else (1.0 if scaling == "yarn" else 0.0)
    mscale_all = 0.0
    if arch in YARN_LOG_MUL_SCALE:
        mscale_all = meta.number("rope.scaling.yarn_log_multiplier", 0.0, above=False) / YARN_LOG_MUL_SCALE[arch]
    n_layer = meta.number("block_count", integer=True, record=False)
    if n_layer is not None and n_layer > MAX_LAYERS:
        raise PosencError(f"{arch}.block_count", f"{n_layer} blocks: llama.cpp loads at most {MAX_LAYERS}")
    tensors = {name: file.tensor(f"{name}.weight") for name in FACTOR_TENSORS}
    rope = GgufRope(arch=arch, rope_type=rope_type(arch, f"{arch}.rope.dimension_sections" in file.fields),
                    context_length=context, head_dim=head_dim, n_rot=n_rot, n_layer=n_layer,
                    freq_base=meta.number("rope.freq_base", 10000.0, minimum=1.0), scaling_type=scaling, factor=factor,
                    freq_scale=freq_scale,
                    original_context=meta.number("rope.scaling.original_context_length", context, integer=True),
                    attn_factor=meta.number("rope.scaling.attn_factor", 1.0), ext_factor=ext,
                    beta_fast=yarn["beta_fast"], beta_slow=yarn["beta_slow"], yarn_attn=yarn["attn_factor"],
                    mscale_all_dim=mscale_all, rope_freqs=tensors["rope_freqs"],
                    factors_long=tensors["rope_factors_long"], factors_short=tensors["rope_factors_short"],
                    defaults=meta.defaults,
                    written={k[len(arch) + 1:]: v for k, v in file.fields.items() if k.startswith(f"{arch}.rope.")})
    for name, arr in tensors.items():
        if arr is not None and arr.shape[0] != n_rot // 2:
            raise PosencError(f"{name}.weight", f"has {arr.shape[0]} entries; rope.dimension_count {n_rot} needs "
                              f"{n_rot // 2}")
        if arr is not None and not (np.all(np.isfinite(arr)) and np.all(arr > 0)):
            raise PosencError(f"{name}.weight", "holds a value that is not a positive number: llama.cpp divides the "
                              "frequencies by these")
    rope.groups = _groups(meta, rope)
    ignored = sorted(k for k in rope.written if k.startswith("rope.scaling.yarn_") and
                     k[len("rope.scaling.yarn_"):] not in YARN_KEYS.get(arch, {}) and
                     (k != "rope.scaling.yarn_log_multiplier" or arch not in YARN_LOG_MUL_SCALE))
    if ignored:
        rope.notes.append(f"{', '.join(ignored)} in the file: llama.cpp's loader does not read "
                          f"{'it' if len(ignored) == 1 else 'them'} for architecture {arch!r} (its defaults: "
                          f"beta_fast {rope.beta_fast:g}, beta_slow {rope.beta_slow:g})")
    if file.is_prefix:
        rope.notes.append(f"read from the first {len(file.data)} bytes of the file (its metadata and RoPE tensors)")
    return rope


def _groups(meta: Metadata, rope: GgufRope) -> tuple[LayerGroup, ...]:
    """The full layers and, for architectures whose loader sets them up, the sliding-window ones."""
    rule = SWA.get(rope.arch)
    window = meta.number("attention.sliding_window", 0, minimum=0, above=False, record=False)
    if rule is None or (rule.needs_window and not window):
        return (LayerGroup("full", rope.freq_base, rope.freq_scale, None),)
    if rope.n_layer is None:
        rope.notes.append(f"{rope.arch}.block_count is missing: the sliding-window layers cannot be told apart, "
                          "every layer is judged with the full layers' base")
        return (LayerGroup("full", rope.freq_base, rope.freq_scale, None),)
    swa = _swa_layers(meta, rope.n_layer, rule.period)
    base = meta.number("rope.freq_base_swa", rope.freq_base if rule.base is None else rule.base, minimum=1.0)
    scale = rope.freq_scale if rule.scale is None else rule.scale
    full = frozenset(range(rope.n_layer)) - swa
    return tuple(g for g in (LayerGroup("full", rope.freq_base, rope.freq_scale, full),
                             LayerGroup("swa", base, scale, swa)) if g.layers)


def factors_for(rope: GgufRope, seq_len: int) -> np.ndarray | None:
    """The per-frequency divisors llama.cpp uses (llama_model::get_rope_factors): rope_freqs if present,
    else LongRoPE's long set beyond n_ctx_orig_yarn and the short one within it (whatever the scaling type)."""
    if rope.rope_freqs is not None:
        return rope.rope_freqs
    return rope.factors_long if seq_len > rope.original_context else rope.factors_short


def _get_mscale(scale: float, mscale: float) -> float:
    return 1.0 if scale <= 1.0 else 0.1 * mscale * math.log(scale) + 1.0


def yarn_attn_factor(rope: GgufRope) -> float:
    """llama_context's cparams.yarn_attn_factor: YaRN's magnitude with ggml's own (1 + 0.1 ln factor) divided
    out, DeepSeek's mscale / mscale_all_dim ratio, times rope.scaling.attn_factor."""
    attn = rope.yarn_attn
    if rope.ext_factor != 0:
        factor = 1.0 / rope.freq_scale
        if rope.mscale_all_dim != 0:
            m_all = rope.mscale_all_dim
            m = m_all if rope.arch == "deepseek2" and m_all != 1 else 1.0
            attn = _get_mscale(factor, m) / _get_mscale(factor, m_all)
        else:
            attn = _get_mscale(factor, 1.0)
        attn /= 1.0 + 0.1 * math.log(factor)
    return attn * rope.attn_factor


def llama_cpp_inv_freq(rope: GgufRope, seq_len: int, group: LayerGroup | None = None) -> tuple[np.ndarray, float]:
    """(inv_freq float64[n_rot/2], attention factor) as ggml_rope_ext computes them for a context of seq_len in
    a layer group (the full layers by default)."""
    group = group or rope.groups[0]
    n = rope.n_rot
    i = np.arange(n // 2, dtype=np.float64)
    inv = group.freq_base ** (-2.0 * i / n)
    factors = factors_for(rope, seq_len)
    if factors is not None:
        inv = inv / factors
    attention = yarn_attn_factor(rope)
    scaled = inv * group.freq_scale
    if rope.ext_factor != 0:
        low, high = (float(d) for d in correction_dims(n, rope.original_context, group.freq_base, rope.beta_fast,
                                                        rope.beta_slow))
        mix = (1 - np.clip((i - low) / max(0.001, high - low), 0, 1)) * rope.ext_factor
        scaled = scaled * (1 - mix) + inv * mix
        attention *= 1.0 + 0.1 * math.log(1.0 / group.freq_scale)
    return scaled, attention


def softmax_mscale(rope: GgufRope) -> float | None:
    """The factor DeepSeek-style graphs multiply q.k by (mscale^2, deepseek2.cpp), None for other architectures."""
    if rope.arch not in SOFTMAX_MSCALE:
        return None
    original = yarn_attn_factor(rope) * (1.0 + 0.1 * math.log(1.0 / rope.freq_scale))
    return (original * (1.0 + 0.1 * rope.mscale_all_dim * math.log(1.0 / rope.freq_scale))) ** 2


def _positions(length: int) -> np.ndarray:
    head = np.arange(min(length, DENSE_POSITIONS), dtype=np.float64)
    if length <= DENSE_POSITIONS:
        return head
    tail = np.geomspace(DENSE_POSITIONS, length - 1, SPARSE_POSITIONS).astype(np.int64).astype(np.float64)
    return np.unique(np.concatenate([head, tail]))


def _observation(rope: GgufRope, inv: np.ndarray, attention: float) -> Observation:
    """The GGUF's RoPE as an observation of frequencies (exact, to its float32 metadata) for the structure checks."""
    k = inv.shape[0]
    empty = np.zeros((0, k))
    return Observation(rows=rope.context_length, width=2 * k, layout="half", n_freq=k, grid="float32",
                       floor=attention * 2.0 ** -23, attention=attention, omega=inv,
                       omega_tol=np.full(k, FREQ_TOLERANCE), offset=0.0, fit_rows=0, sample=np.zeros(0, np.int64),
                       cos=empty, sin=empty, notes=list(rope.notes))


def describe_scaling(rope: GgufRope) -> str:
    """What llama.cpp makes of the scaling keys, in words (a missing type is linear in llama.cpp, not "none")."""
    kind = rope.scaling_type + (" (rope.scaling.type absent: llama.cpp's default)"
                                if f"{rope.arch}.rope.scaling.type" in rope.defaults else "")
    if rope.ext_factor != 0:
        return f"{kind}: YaRN, factor {1 / rope.freq_scale:g}, beta_fast {rope.beta_fast:g}, beta_slow " \
               f"{rope.beta_slow:g}, original context {rope.original_context}"
    if rope.freq_scale != 1:
        return f"{kind}: frequencies divided by {1 / rope.freq_scale:g}"
    why = "type none" if rope.scaling_type == "none" else "no rope.scaling.factor"
    return f"{kind}: frequency scale 1 ({why})"


def llama_cpp_spec(rope: GgufRope, group: LayerGroup, inv: np.ndarray) -> Inferred:
    """The spec of what llama.cpp computes (its base and scaling as read: a wrong base is then the base, not
    whatever a fit of scaled frequencies suggests); frequencies divided by a rope_freqs tensor are fitted."""
    tol = np.full(inv.shape[0], FREQ_TOLERANCE)
    reads = f"llama.cpp's {group.name} layers; it reads {describe_scaling(rope)}"
    long, short = rope.factors_long, rope.factors_short
    scaling, name = None, "default"
    if long is not None and short is not None:
        scaling, name = {"rope_type": "longrope", "long_factor": long.tolist(), "short_factor": short.tolist()}, \
            "LongRoPE factor tensors"
    elif rope.ext_factor != 0:
        scaling, name = {"rope_type": "yarn", "factor": 1 / group.freq_scale, "beta_fast": rope.beta_fast,
                         "beta_slow": rope.beta_slow}, "yarn"
    elif group.freq_scale != 1:
        scaling, name = {"rope_type": "linear", "factor": 1 / group.freq_scale}, "linear"
    spec = None
    if rope.rope_freqs is None and (long is None) == (short is None):
        try:
            spec = RopeSpec(rope.n_rot, base=group.freq_base, scaling=scaling,
                            original_max_position_embeddings=rope.original_context if scaling else None,
                            max_position_embeddings=rope.context_length)
        except PosencError:  # values RopeSpec refuses (a factor below 1 ...): described by a fit instead
            spec = None
    if spec is None:
        fit = infer_spec(inv, tol)
        divisors = ", divided by the rope_freqs tensor" if rope.rope_freqs is not None else ""
        return Inferred(fit.spec, fit.score, f"{fit.description} (fitted to {reads}{divisors})", fit.simplest)
    return Inferred(spec, match_score(inv, tol, spec.inv_freq(float(rope.context_length))[0]),
                    f"{name}, base {group.freq_base:g} ({reads})")


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.all(np.abs(a / b - 1) <= FREQ_TOLERANCE))


def layout_finding(rope: GgufRope, apply: str, config: dict) -> Finding | None:
    """Whether llama.cpp's rotation pairs dimensions as the config's model does. Confirmed only when
    convert_hf_to_gguf.py writes the config's architecture under this GGUF architecture: the metadata cannot
    show whether q/k were permuted."""
    kind = rope.rope_type
    if kind == "none":
        return Finding("wrong_layout", f"llama.cpp applies no rotary embedding for architecture {rope.arch!r}; the "
                       f"config's model rotates {apply} pairs")
    if kind not in PAIRING:
        what = "is not in posenc's copy of llama.cpp's rope-type table" if kind is None else \
            f"is rotated by llama.cpp with {kind.upper()} (position sections), which posenc does not model"
        return Finding("layout_unconfirmed", f"architecture {rope.arch!r} {what} ({LLAMA_CPP_VERSION}): the pairing "
                       "of dimensions is not checked", "medium", "warning")
    architectures = config.get("architectures")
    hf = architectures[0] if isinstance(architectures, list) and architectures else None
    converted = CONVERTED_AS.get(hf)
    stored = "half" if kind == "neox" else "interleaved"  # the HF pairing llama.cpp's rotation of unpermuted q/k is
    if converted is not None and converted[0] == rope.arch:
        pairing = "half" if converted[1] else stored
        if pairing == apply:
            return None
        how = "permuting q/k (LlamaModel.permute)" if converted[1] else "with q/k as HF stores them"
        return Finding("wrong_layout", f"convert_hf_to_gguf.py writes {hf} as {rope.arch!r} {how}; llama.cpp then "
                       f"rotates {rope.pairing}, i.e. HF's {pairing} pairs, but the config's model rotates {apply} "
                       "pairs")
    if converted is not None:
        where = f"convert_hf_to_gguf.py writes {hf} as {converted[0]!r}, not {rope.arch!r}"
    else:
        where = f"{hf} is not in posenc's table of convert_hf_to_gguf.py's classes" if hf else \
            "the config names no `architectures`, so which converter class wrote the file is unknown"
    needs = "q/k as HF stores them" if stored == apply else \
        "q/k permuted so that HF's half pairs sit adjacent (LlamaModel.permute)" if apply == "half" else \
        "q/k permuted so that HF's adjacent pairs sit n_rot/2 apart (no converter class does this)"
    return Finding("layout_unconfirmed", f"llama.cpp rotates {rope.pairing} for architecture {rope.arch!r}; {where}. "
                   f"The config's model rotates {apply} pairs, which llama.cpp matches only with {needs}: the "
                   "metadata cannot show how this file's q/k were written, so the layout cannot be confirmed",
                   "medium", "warning")


def converter_layout(rope: GgufRope) -> str | None:
    """The HF pairing llama.cpp's rotation equals for q/k as convert_hf_to_gguf.py writes this architecture:
    half for NEOX, half for NORM after its permutation, interleaved for NORM without (None: not known)."""
    if rope.rope_type == "neox":
        return "half"
    permuted = {perm for arch, perm in CONVERTED_AS.values() if arch == rope.arch}
    if rope.rope_type != "norm" or len(permuted) != 1:
        return None
    return "half" if permuted.pop() else "interleaved"


@dataclass(frozen=True)
class Pair:
    """A config layer type and the llama.cpp layer group its layers are rotated by."""

    expected: Expected
    group: LayerGroup
    layers: int  # how many of the layer type's layers fall in the group (0: unknown)


def _pairs(rope: GgufRope, config: dict, layer_type: str | None) -> tuple[list[Pair], list[str]]:
    """Each RoPE layer type of the config with each llama.cpp layer group that rotates some of its layers (layer
    types that share layers: only the best-matching one); notes for what is not compared."""
    entries = expected_entries(config, layer_type, float(rope.context_length))
    model = from_hf_config(config)
    layers_of = {e.layer_type: frozenset(model.get(e.layer_type).layers) for e in entries}
    pairs, notes = [], []
    for group in rope.groups:
        inv, _ = llama_cpp_inv_freq(rope, rope.context_length, group)
        hits = [e for e in entries if group.layers is None or layers_of[e.layer_type] & group.layers]
        shared = any(layers_of[a.layer_type] & layers_of[b.layer_type] for a in hits for b in hits if a is not b)
        if shared:
            best = min(hits, key=lambda e: (e.inv.shape != inv.shape, float(np.max(np.abs(np.log(inv / e.inv))))
                                            if e.inv.shape == inv.shape else 0.0))
            notes += [f"layer type {e.layer_type!r} shares its layers with {best.layer_type!r}: not compared (posenc "
                      "models one llama.cpp rotation per layer, and compares the layer type it matches best)"
                      for e in hits if e is not best]
            hits = [best]
        for e in hits:
            n = len(layers_of[e.layer_type] & group.layers) if group.layers is not None else 0
            pairs.append(Pair(e, group, n))
    compared = {p.expected.layer_type for p in pairs}
    for e in entries:
        if e.layer_type not in compared and not any(e.layer_type in note for note in notes):
            notes.append(f"layer type {e.layer_type!r}: none of its layers is within the file's "
                         f"{rope.n_layer} blocks, not compared")
    if not pairs:
        raise PosencError("config", f"none of the config's RoPE layers is within the file's {rope.n_layer} blocks")
    return pairs, notes


def _where(pair: Pair, many: bool) -> str:
    if not many:
        return ""
    group = "sliding-window" if pair.group.name == "swa" else "full-attention"
    count = f"{pair.layers} layers" if pair.layers else "its layers"
    return f"layer type {pair.expected.layer_type!r} ({count}, llama.cpp's {group} base " \
           f"{pair.group.freq_base:g}): "


def pair_findings(rope: GgufRope, pair: Pair, many: bool) -> list[Finding]:
    """What llama.cpp computes for one layer group against one config layer type: rotary dim, frequencies at
    the context length (and LongRoPE's other factor set), attention factor, softmax scale."""
    expected, group = pair.expected, pair.group
    length = rope.context_length
    inv, attention = llama_cpp_inv_freq(rope, length, group)
    spec = expected.spec
    where = _where(pair, many)
    findings = []
    if inv.shape != expected.inv.shape or not _close(inv, expected.inv):
        what = f"the GGUF (rope.dimension_count {rope.n_rot})"
        findings += frequency_findings(_observation(rope, inv, attention), spec, llama_cpp_spec(rope, group, inv),
                                       what=what)
    elif spec.rope_type == "longrope":
        original = spec.original_max_position_embeddings
        other_len = original if length > original else original + 1
        other, _ = llama_cpp_inv_freq(rope, other_len, group)
        if not _close(other, spec.inv_freq(float(other_len))[0]):
            which, variant = ("rope_factors_short", "short") if length > original else ("rope_factors_long", "long")
            findings.append(Finding("wrong_length_variant", f"{which} does not hold the config's {variant}_factor: "
                                    f"llama.cpp uses it for contexts {'within' if length > original else 'beyond'} "
                                    f"{original}"))
    if abs(attention / expected.attention - 1) > FACTOR_TOLERANCE:
        if abs(attention - 1) <= FACTOR_TOLERANCE:
            findings.append(Finding("attention_factor_missing", f"llama.cpp will use attention factor 1.0; the "
                                    f"config's scaling needs {expected.attention:.6g} (rope.scaling.attn_factor, "
                                    "or YaRN's own)"))
        else:
            findings.append(Finding("wrong_attention_factor", f"llama.cpp will use attention factor {attention:.6g}; "
                                    f"the config's scaling needs {expected.attention:.6g}"))
    findings += _softmax_findings(rope, spec)
    return [Finding(f.cause, where + f.evidence, f.confidence, f.severity) for f in findings]


def _softmax_findings(rope: GgufRope, spec: RopeSpec) -> list[Finding]:
    got = softmax_mscale(rope)
    m_all = spec.scaling_params.get("mscale_all_dim")
    if got is None or spec.rope_type != "yarn":
        return []
    want = _get_mscale(spec.scaling_params["factor"], m_all) ** 2 if m_all else 1.0
    if abs(got / want - 1) <= FACTOR_TOLERANCE:
        return []
    key = f"{rope.arch}.rope.scaling.yarn_log_multiplier"
    return [Finding("wrong_softmax_scale", f"llama.cpp's {rope.arch} graph multiplies q.k by {got:.6g} (mscale_all_dim "
                    f"{rope.mscale_all_dim:g} from {key}); the config's attention multiplies it by {want:.6g} "
                    f"(mscale(factor, mscale_all_dim {m_all or 0:g})^2)")]


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in findings:
        if (f.cause, f.evidence) not in seen:
            seen.add((f.cause, f.evidence))
            out.append(f)
    return out


def audit_gguf(source, config: dict | None = None, *, layer_type: str | None = None) -> dict:
    """The audit report (the cache audit's shape) of what llama.cpp computes from a GGUF file: a path, or its
    bytes (the head of the file is enough when it holds the metadata and RoPE tensors)."""
    rope = read_gguf(source)
    length = rope.context_length
    pairs, findings, primary_pair = [], [], None
    if config is not None:
        pairs, notes = _pairs(rope, config, layer_type)
        rope.notes += notes
        for pair in pairs:
            found = pair_findings(rope, pair, len(pairs) > 1)
            if primary_pair is None and any(f.severity == "error" for f in found):
                primary_pair = pair
            layout = layout_finding(rope, pair.expected.apply, config)
            findings += ([layout] if layout else []) + found
        findings = _dedupe(findings)
        primary_pair = primary_pair or pairs[0]
    if not findings:
        what = "the config's exact frequencies and attention factor" if pairs else \
            "nothing (no config given: the frequencies are reported, not judged)"
        findings.append(Finding("correct", f"llama.cpp's frequencies and attention factor at context {length} equal "
                                f"{what}", "high" if pairs else "medium", "info"))
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: order[f.severity])
    group = primary_pair.group if primary_pair else rope.groups[0]
    inv, attention = llama_cpp_inv_freq(rope, length, group)
    inferred = llama_cpp_spec(rope, group, inv)
    positions = _positions(length)
    gg_c, gg_s = exact_cos_sin(positions, inv, attention)
    expected = primary_pair.expected if primary_pair else None
    if expected is not None and expected.inv.shape == inv.shape:
        ref_c, ref_s = exact_cos_sin(positions, expected.inv, expected.attention)
        error = np.maximum(np.abs(gg_c - ref_c).max(axis=1), np.abs(gg_s - ref_s).max(axis=1))
        against = f"the config's exact values ({expected.layer_type}, llama.cpp's {group.name} layers)"
    else:
        error, against = np.zeros(positions.shape[0]), "llama.cpp's own values (nothing to compare with)"
    return {
        "status": status_of(findings),
        "diagnosis": findings[0].to_dict(),
        "findings": [f.to_dict() for f in findings],
        "cache": {"source": f"gguf ({rope.arch}, llama.cpp)", "dtype": "float32", "storage_grid": "float32",
                  "rows": length, "columns": rope.n_rot, "layout": converter_layout(rope), "rotary_dim": rope.n_rot,
                  "n_freq": rope.n_rot // 2, "start": 0, "position_offset": 0.0, "attention_factor": attention,
                  "fit_rows": 0, "notes": rope.notes},
        "gguf": _gguf_section(rope),
        "inferred": {"description": inferred.description, "spec": inferred.spec.to_dict(),
                     "reproduces_frequencies": inferred.score <= 1, "base": inferred.spec.base,
                     "rope_type": inferred.spec.rope_type},
        "expected": None if expected is None else {
            "layer_type": expected.layer_type, "spec": expected.spec.to_dict(), "apply": expected.apply,
            "seq_len": expected.seq_len, "attention_factor": expected.attention},
        "compared": [{"layer_type": p.expected.layer_type, "llama_cpp_layers": p.group.name, "layers": p.layers}
                     for p in pairs],
        "built_from": {"source": "gguf", "spec": inferred.spec.to_dict(), "attention_factor": attention},
        "rows_checked": int(positions.shape[0]),
        "corrupt_rows": {},
        "error_against": against,
        "error_by_position": range_max(error, positions),
        "profile": {"positions": positions[::max(1, positions.shape[0] // 160)].tolist(), "floor": 2.0 ** -24,
                    "series": {"your cache": error[::max(1, positions.shape[0] // 160)].tolist()}},
    }


def _gguf_section(rope: GgufRope) -> dict:
    """The keys as written, what llama.cpp makes of them (defaults named), and its frequencies per layer group."""
    groups = []
    for group in rope.groups:
        inv, attention = llama_cpp_inv_freq(rope, rope.context_length, group)
        groups.append({"layers": group.name, "count": None if group.layers is None else len(group.layers),
                       "freq_base": group.freq_base, "freq_scale": group.freq_scale, "attention_factor": attention,
                       "inv_freq": inv.tolist()})
    return {"architecture": rope.arch, "llama_cpp": LLAMA_CPP_VERSION, "rope_type": rope.rope_type,
            "context_length": rope.context_length, "head_dim": rope.head_dim, "rope.dimension_count": rope.n_rot,
            "written": rope.written, "defaults": rope.defaults,
            "scaling": describe_scaling(rope), "rope.freq_base": rope.freq_base,
            "rope.scaling.type": rope.scaling_type, "rope.scaling.factor": rope.factor, "freq_scale": rope.freq_scale,
            "rope.scaling.original_context_length": rope.original_context,
            "rope.scaling.attn_factor": rope.attn_factor,
            "yarn": {"ext_factor": rope.ext_factor, "beta_fast": rope.beta_fast, "beta_slow": rope.beta_slow,
                     "mscale_all_dim": rope.mscale_all_dim},
            "softmax_scale": softmax_mscale(rope),
            "tensors": [n for n, a in zip(FACTOR_TENSORS, (rope.rope_freqs, rope.factors_long, rope.factors_short))
                        if a is not None],
            "groups": groups, "inv_freq": groups[0]["inv_freq"]}


def is_gguf(path: str) -> bool:
    """Whether the file starts with GGUF's magic (a missing file is a PosencError, as for any input)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError as exc:
        raise PosencError("file", str(exc)) from None


__all__ = ["GgufRope", "LayerGroup", "audit_gguf", "is_gguf", "layout_finding", "llama_cpp_inv_freq", "read_gguf"]
