"""`posenc audit model.gguf [--config config.json]`: the RoPE llama.cpp will compute from a GGUF
file, against the exact positions of the model's HF config.

llama.cpp conversions get RoPE wrong often, and nothing fails loudly: a wrong `rope.freq_base`,
a `rope.dimension_count` that ignores partial rotary, a missing or wrong scaling type / factor /
original context length, YaRN parameters, Llama-3's `rope_freqs` tensor left out, LongRoPE's
factor tensors swapped, or an architecture whose rope type (NORM: adjacent pairs; NEOX: halves)
pairs dimensions differently from the HF model. This module reads the metadata and those
tensors with the `gguf` package, computes the frequencies and attention factor llama.cpp's
`ggml_rope_ext` uses (ggml-cpu `rope_yarn`, `ggml_rope_yarn_corr_dims`), and compares them with
the config's, naming the same causes the cache audit names. The error table compares cos/sin at
float64 angles from both (llama.cpp's own float32 angle arithmetic is not part of the file).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..encodings import RopeSpec
from ..errors import PosencError
from .engine import Expected, expected_entries
from .findings import Finding
from .infer import Inferred, infer_spec, match_score
from .observe import Observation
from .precision import exact_cos_sin, range_max
from .report import status_of
from .structure import frequency_findings

#: llama.cpp's rope type per architecture (llama_model_rope_type): NORM rotates adjacent pairs, NEOX halves.
#: Only architectures whose type is certain here; any other is reported as not checked (M-RoPE and
#: vision architectures among them).
NEOX_ARCHS = frozenset({"falcon", "grok", "dbrx", "stablelm", "qwen", "qwen2", "qwen2moe", "qwen3", "qwen3moe",
                        "phi2", "phi3", "phimoe", "gemma", "gemma2", "gemma3", "starcoder2", "gptneox", "olmo2",
                        "olmoe", "nemotron", "exaone", "minicpm3", "openelm", "codeshell", "orion", "plamo"})
NORM_ARCHS = frozenset({"llama", "llama4", "deci", "baichuan", "starcoder", "internlm2", "minicpm", "xverse",
                        "command-r", "cohere2", "olmo", "arctic", "deepseek", "deepseek2", "granite", "granitemoe",
                        "chameleon"})
#: NORM architectures whose converter permutes q and k (LlamaModel.permute) so that adjacent pairs are HF's
#: halves; the other NORM ones (Llama-4, Cohere, DeepSeek-V2) rotate adjacent pairs in HF too.
PERMUTED_ARCHS = frozenset({"llama", "deci", "baichuan", "internlm2", "minicpm", "granite", "granitemoe"})
#: Relative difference of a frequency that float32 metadata explains (a few float32 ulp).
FREQ_TOLERANCE = 2.0 ** -21
#: Positions compared in the error table: all below this, then log-spaced to the context length.
DENSE_POSITIONS = 4096
SPARSE_POSITIONS = 4096


@dataclass
class GgufRope:
    """What llama.cpp reads for RoPE from one GGUF file."""

    arch: str
    context_length: int
    head_dim: int
    n_rot: int
    freq_base: float
    scaling_type: str
    factor: float | None
    original_context: int | None
    attn_factor: float | None
    yarn: dict = field(default_factory=dict)  # beta_fast, beta_slow, ext_factor when present
    rope_freqs: np.ndarray | None = None  # Llama-3: per-frequency divisors
    factors_long: np.ndarray | None = None  # LongRoPE
    factors_short: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def layout(self) -> str | None:
        """The HF pairing llama.cpp's rotation equals: half (NEOX, or NORM after the converter's permutation)."""
        if self.arch in NEOX_ARCHS or self.arch in PERMUTED_ARCHS:
            return "half"
        return "interleaved" if self.arch in NORM_ARCHS else None


def _value(reader, key: str, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def read_gguf(path: str) -> GgufRope:
    """The RoPE metadata and tensors of a GGUF file; PosencError naming the field when one is missing or bad."""
    from gguf import GGUFReader  # imported on use: the CLI answers --help without it

    try:
        reader = GGUFReader(path, "r")
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise PosencError("file", f"not a readable GGUF file: {exc}") from None
    arch = _value(reader, "general.architecture")
    if not isinstance(arch, str):
        raise PosencError("general.architecture", "missing: cannot tell which keys hold the RoPE parameters")

    def key(name, default=None):
        return _value(reader, f"{arch}.{name}", default)

    heads = key("attention.head_count")
    if isinstance(heads, list):
        heads = heads[0] if heads else None
    embedding = key("embedding_length")
    head_dim = key("attention.key_length") or (embedding // heads if embedding and heads else None)
    if not head_dim:
        raise PosencError(f"{arch}.attention.key_length", "missing, and embedding_length / head_count cannot "
                          "give the head dim")
    context = key("context_length")
    if not context:
        raise PosencError(f"{arch}.context_length", "missing: the length llama.cpp's RoPE is judged at")
    scaling = key("rope.scaling.type", "none")
    tensors = {t.name: np.asarray(t.data, dtype=np.float64).reshape(-1) for t in reader.tensors
               if t.name in ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight")}
    yarn = {name: key(f"rope.scaling.yarn_{name}") for name in ("beta_fast", "beta_slow", "ext_factor")}
    rope = GgufRope(arch=arch, context_length=int(context), head_dim=int(head_dim),
                    n_rot=int(key("rope.dimension_count", head_dim)), freq_base=float(key("rope.freq_base", 10000.0)),
                    scaling_type=str(scaling), factor=key("rope.scaling.factor"),
                    original_context=key("rope.scaling.original_context_length"),
                    attn_factor=key("rope.scaling.attn_factor"), yarn={k: v for k, v in yarn.items() if v is not None},
                    rope_freqs=tensors.get("rope_freqs.weight"), factors_long=tensors.get("rope_factors_long.weight"),
                    factors_short=tensors.get("rope_factors_short.weight"))
    if rope.scaling_type not in ("none", "linear", "yarn", "longrope"):
        raise PosencError(f"{arch}.rope.scaling.type", f"{rope.scaling_type!r} is not one llama.cpp knows "
                          "(none, linear, yarn, longrope)")
    for name, arr in (("rope_freqs", rope.rope_freqs), ("rope_factors_long", rope.factors_long),
                      ("rope_factors_short", rope.factors_short)):
        if arr is not None and arr.shape[0] != rope.n_rot // 2:
            raise PosencError(name, f"has {arr.shape[0]} entries; rope.dimension_count {rope.n_rot} needs "
                              f"{rope.n_rot // 2}")
    return rope


def llama_cpp_inv_freq(rope: GgufRope, seq_len: int) -> tuple[np.ndarray, float]:
    """(inv_freq float64[n_rot/2], attention factor) as ggml_rope_ext computes them for a context of seq_len."""
    n = rope.n_rot
    i = np.arange(n // 2, dtype=np.float64)
    inv = rope.freq_base ** (-2.0 * i / n)
    if rope.rope_freqs is not None:
        inv = inv / rope.rope_freqs
    if rope.scaling_type == "longrope":
        original = rope.original_context or rope.context_length
        factors = rope.factors_long if seq_len > original else rope.factors_short
        if factors is not None:
            inv = inv / factors
    attention = float(rope.attn_factor) if rope.attn_factor else 1.0
    if rope.scaling_type in ("linear", "yarn") and rope.factor:
        freq_scale = 1.0 / float(rope.factor)
        ext = float(rope.yarn.get("ext_factor", -1.0))
        ext = (1.0 if rope.scaling_type == "yarn" else 0.0) if ext < 0 else ext
        if ext != 0:
            original = rope.original_context or rope.context_length
            low, high = _yarn_corr_dims(n, original, rope.freq_base, float(rope.yarn.get("beta_fast", 32.0)),
                                        float(rope.yarn.get("beta_slow", 1.0)))
            ramp = 1 - np.clip((i - low) / max(0.001, high - low), 0, 1)
            mix = ramp * ext
            inv = inv * freq_scale * (1 - mix) + inv * mix
            attention *= 1.0 + 0.1 * math.log(1.0 / freq_scale)
        else:
            inv = inv * freq_scale
    return inv, attention


def _yarn_corr_dims(n_dims: int, original: int, base: float, beta_fast: float, beta_slow: float):
    def corr(rot):
        return n_dims * math.log(original / (rot * 2 * math.pi)) / (2 * math.log(base))

    return max(0.0, math.floor(corr(beta_fast))), min(n_dims - 1.0, math.ceil(corr(beta_slow)))


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
    return Observation(rows=rope.context_length, width=2 * k, layout=rope.layout or "half", n_freq=k,
                       grid="float32", floor=attention * 2.0 ** -23, attention=attention, omega=inv,
                       omega_tol=np.full(k, FREQ_TOLERANCE), offset=0.0, fit_rows=0, sample=np.zeros(0, np.int64),
                       cos=empty, sin=empty, notes=list(rope.notes))


def metadata_spec(rope: GgufRope, inv: np.ndarray) -> Inferred:
    """The spec the GGUF's metadata describes (its base and scaling as written: a wrong base is then the base,
    not whatever a fit of scaled frequencies suggests); frequencies from a rope_freqs tensor are fitted instead."""
    tol = np.full(inv.shape[0], FREQ_TOLERANCE)
    if rope.rope_freqs is not None or rope.factors_long is None and rope.scaling_type == "longrope":
        return infer_spec(inv, tol)
    scaling, original = None, rope.original_context
    if rope.scaling_type == "linear" and rope.factor:
        scaling = {"rope_type": "linear", "factor": float(rope.factor)}
    elif rope.scaling_type == "yarn" and rope.factor:
        scaling = {"rope_type": "yarn", "factor": float(rope.factor),
                   **{k: float(v) for k, v in rope.yarn.items() if k in ("beta_fast", "beta_slow")}}
    elif rope.scaling_type == "longrope":
        scaling = {"rope_type": "longrope", "long_factor": rope.factors_long.tolist(),
                   "short_factor": (rope.factors_short if rope.factors_short is not None else rope.factors_long).tolist()}
    try:
        spec = RopeSpec(rope.n_rot, base=rope.freq_base, scaling=scaling, original_max_position_embeddings=original,
                        max_position_embeddings=rope.context_length)
    except PosencError:
        return infer_spec(inv, tol)
    name = "default" if scaling is None else scaling["rope_type"]
    return Inferred(spec, match_score(inv, tol, spec.inv_freq(float(rope.context_length))[0]),
                    f"{name}, base {rope.freq_base:g} (from the GGUF metadata)")


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.all(np.abs(a / b - 1) <= FREQ_TOLERANCE))


def gguf_findings(rope: GgufRope, expected: Expected) -> list[Finding]:
    """What llama.cpp computes from the file against the config: layout, rotary dim, frequencies at the
    context length (and LongRoPE's other factor set), attention factor."""
    length = rope.context_length
    inv, attention = llama_cpp_inv_freq(rope, length)
    obs = _observation(rope, inv, attention)
    spec = expected.spec
    findings = []
    if rope.layout is not None and rope.layout != expected.apply:
        kind = "NEOX" if rope.arch in NEOX_ARCHS else "NORM"
        findings.append(Finding("wrong_layout", f"architecture {rope.arch!r} makes llama.cpp rotate with rope type "
                                f"{kind} ({rope.layout} pairs as HF counts them) but the config's model rotates "
                                f"{expected.apply} pairs"))
    if inv.shape != expected.inv.shape or not _close(inv, expected.inv):
        inferred = metadata_spec(rope, inv)
        findings += frequency_findings(obs, spec, inferred, what=f"the GGUF (rope.dimension_count {rope.n_rot})")
    elif spec.rope_type == "longrope":
        original = spec.original_max_position_embeddings
        other_len = float(original) if length > original else float(original + 1)
        other, _ = llama_cpp_inv_freq(rope, int(other_len))
        want, _ = spec.inv_freq(other_len)
        if not _close(other, want):
            which = "rope_factors_short" if length > original else "rope_factors_long"
            findings.append(Finding("wrong_length_variant", f"{which} does not hold the config's "
                                    f"{'short' if length > original else 'long'}_factor: llama.cpp uses it for "
                                    f"contexts {'within' if length > original else 'beyond'} {original}"))
    if abs(attention / expected.attention - 1) > 1e-6:
        if abs(attention - 1) <= 1e-6:
            findings.append(Finding("attention_factor_missing", f"llama.cpp will use attention factor 1.0; the "
                                    f"config's scaling needs {expected.attention:.6g} (rope.scaling.attn_factor, "
                                    "or YaRN's own)"))
        else:
            findings.append(Finding("wrong_attention_factor", f"llama.cpp will use attention factor {attention:.6g}; "
                                    f"the config's scaling needs {expected.attention:.6g}"))
    return findings


def audit_gguf(path: str, config: dict | None = None, *, layer_type: str | None = None) -> dict:
    """The audit report (the cache audit's shape) of what llama.cpp computes from the GGUF file at `path`."""
    rope = read_gguf(path)
    length = rope.context_length
    inv, attention = llama_cpp_inv_freq(rope, length)
    inferred = metadata_spec(rope, inv)
    positions = _positions(length)
    expected, findings = None, []
    if config is not None:
        entries = expected_entries(config, layer_type, float(length))
        expected = min(entries, key=lambda e: (e.inv.shape != inv.shape,
                                               float(np.max(np.abs(np.log(inv / e.inv)))) if e.inv.shape == inv.shape
                                               else 0.0))
        findings = gguf_findings(rope, expected)
    if rope.layout is None:
        rope.notes.append(f"llama.cpp's rope type for architecture {rope.arch!r} is not known here: layout not "
                          "checked")
    if not findings:
        what = "the config's exact frequencies and attention factor" if expected else \
            "nothing (no config given: the frequencies are reported, not judged)"
        findings.append(Finding("correct", f"llama.cpp's frequencies and attention factor at context {length} equal "
                                f"{what}", "high" if expected else "medium", "info"))
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: order[f.severity])
    gg_c, gg_s = exact_cos_sin(positions, inv, attention)
    if expected is not None and expected.inv.shape == inv.shape:
        ref_c, ref_s = exact_cos_sin(positions, expected.inv, expected.attention)
        error = np.maximum(np.abs(gg_c - ref_c).max(axis=1), np.abs(gg_s - ref_s).max(axis=1))
        against = f"the config's exact values ({expected.layer_type})"
    else:
        error, against = np.zeros(positions.shape[0]), "llama.cpp's own values (nothing to compare with)"
    primary = findings[0]
    return {
        "status": status_of(findings),
        "diagnosis": primary.to_dict(),
        "findings": [f.to_dict() for f in findings],
        "cache": {"source": f"gguf ({rope.arch}, llama.cpp)", "dtype": "float32", "storage_grid": "float32",
                  "rows": length, "columns": rope.n_rot, "layout": rope.layout, "rotary_dim": rope.n_rot,
                  "n_freq": rope.n_rot // 2, "start": 0, "position_offset": 0.0, "attention_factor": attention,
                  "fit_rows": 0, "notes": rope.notes},
        "gguf": {"architecture": rope.arch, "context_length": length, "head_dim": rope.head_dim,
                 "rope.dimension_count": rope.n_rot, "rope.freq_base": rope.freq_base,
                 "rope.scaling.type": rope.scaling_type, "rope.scaling.factor": rope.factor,
                 "rope.scaling.original_context_length": rope.original_context,
                 "rope.scaling.attn_factor": rope.attn_factor, "yarn": rope.yarn,
                 "tensors": [n for n, a in (("rope_freqs", rope.rope_freqs), ("rope_factors_long", rope.factors_long),
                                            ("rope_factors_short", rope.factors_short)) if a is not None],
                 "inv_freq": inv.tolist()},
        "inferred": {"description": inferred.description, "spec": inferred.spec.to_dict(),
                     "reproduces_frequencies": inferred.score <= 1, "base": inferred.spec.base,
                     "rope_type": inferred.spec.rope_type},
        "expected": None if expected is None else {
            "layer_type": expected.layer_type, "spec": expected.spec.to_dict(), "apply": expected.apply,
            "seq_len": expected.seq_len, "attention_factor": expected.attention},
        "built_from": {"source": "gguf", "spec": inferred.spec.to_dict(), "attention_factor": attention},
        "rows_checked": int(positions.shape[0]),
        "corrupt_rows": {},
        "error_against": against,
        "error_by_position": range_max(error, positions),
        "profile": {"positions": positions[::max(1, positions.shape[0] // 160)].tolist(), "floor": 2.0 ** -24,
                    "series": {"your cache": error[::max(1, positions.shape[0] // 160)].tolist()}},
    }


def is_gguf(path: str) -> bool:
    """Whether the file starts with GGUF's magic (a missing file is a PosencError, as for any input)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except OSError as exc:
        raise PosencError("file", str(exc)) from None


__all__ = ["GgufRope", "audit_gguf", "is_gguf", "llama_cpp_inv_freq", "read_gguf"]
