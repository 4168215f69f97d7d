"""The audit: measure the cache, settle which spec it was built from, then name what is wrong.

1. observe (a sample of rows): layout, storage grid, attention factor, per-column frequency,
   offset of row 0;
2. candidates, in order: the config's spec for the best-matching layer type at the length the
   cache claims (start + rows: what a dynamic NTK or LongRoPE model computes for it), the same
   spec at the other lengths a framework may have used (init; a fitted dynamic-NTK length), and
   the spec inferred from the frequencies;
3. the first candidate under which a way of computing *explains* the sample (precision.judge) is
   checked on every row (scan); the first that explains every row is what the cache was built from;
4. findings: only causes that explain the error are named (structure against the config, the
   length variant, the precision cause); corrupt rows are named on their own; when nothing
   explains the cache, `no_known_cause` says what was measured instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..encodings import RopeSpec
from ..errors import PosencError
from ..models import from_hf_config
from . import structure
from .findings import TOOL_ARITHMETIC, Finding
from .ggml_rope import GgmlRope
from .infer import Inferred, fit_base, infer_spec, match_score
from .observe import Cache, Observation, held_offset, observe
from .precision import Grounds, Precision, float32_inv_freq, judge, range_max
from .scan import Scan, scan, shown


@dataclass(frozen=True)
class Expected:
    layer_type: str
    spec: RopeSpec
    apply: str
    seq_len: float | None
    inv: np.ndarray
    attention: float


@dataclass(frozen=True)
class Candidate:
    spec: RopeSpec
    inv: np.ndarray
    attention: float
    source: str  # "config" | "length" (the config's spec at another length) | "inferred"
    note: str = ""  # for "length": what length the values were computed for


def expected_entries(config: dict, layer_type: str | None, claimed: float) -> list[Expected]:
    """Every RoPE layer type of the config, length-dependent variants at the length the cache claims."""
    model = from_hf_config(config)
    entries = model.of_kind("rope")
    if not entries:
        raise PosencError("config", f"this {model.model_type} model uses no RoPE: nothing to audit a cos/sin cache "
                          "against")
    if layer_type is not None:
        entries = {layer_type: model.get(layer_type)}
    out = []
    for name, entry in entries.items():
        spec = entry.spec
        seq_len = claimed if spec.length_dependent else None
        inv, attention = spec.inv_freq(seq_len)
        out.append(Expected(name, spec, entry.apply, seq_len, inv, attention))
    return out


def _dynamic_length(spec: RopeSpec, omega: np.ndarray) -> float | None:
    """The seq_len whose dynamic-NTK base the fitted frequencies have (None: at or below max_position_embeddings)."""
    base, _ = fit_base(omega)
    d, factor, max_len = spec.rotary_dim, spec.scaling_params["factor"], spec.max_position_embeddings
    if not (math.isfinite(base) and base > spec.base * (1 + 1e-6)) or factor <= 1:
        return None
    s = max_len * ((base / spec.base) ** ((d - 2) / d) + factor - 1) / factor
    return float(round(s)) if math.isfinite(s) and s > max_len else None


def length_alternatives(expected: Expected, obs: Observation, claimed: float) -> list[Candidate]:
    """The config's length-dependent spec at the lengths a framework may have computed it for instead."""
    spec = expected.spec
    if not spec.length_dependent:
        return []
    if spec.rope_type == "dynamic":
        trained = spec.max_position_embeddings
        options = [(None, f"dynamic NTK's frequencies before it grows (seq_len <= max_position_embeddings "
                          f"{trained}: plain RoPE at base {spec.base:g})")]
        fitted = _dynamic_length(spec, obs.omega)
        if fitted is not None:
            options.append((fitted, f"dynamic NTK's frequencies at seq_len {fitted:g}"))
        need = f"a cache of {claimed:g} positions needs them at seq_len {claimed:g} (HF recomputes them as the " \
               "sequence grows past max_position_embeddings)"
    else:
        original = spec.original_max_position_embeddings
        if claimed > original:
            options = [(None, f"LongRoPE's short_factor frequencies (HF uses them up to "
                              f"original_max_position_embeddings {original})")]
            need = f"a cache of {claimed:g} positions needs long_factor"
        else:
            options = [(float(original + 1), "LongRoPE's long_factor frequencies")]
            need = f"a cache of {claimed:g} positions (within original_max_position_embeddings {original}) needs " \
                   "short_factor"
    out = []
    for seq_len, what in options:
        inv, attention = spec.inv_freq(seq_len)
        if inv.shape == expected.inv.shape and np.array_equal(inv, expected.inv):
            continue
        out.append(Candidate(spec, inv, attention, "length", f"the values are {what}; {need}"))
    return out


@dataclass
class Reference:
    """The spec the values were built from, how they were computed, and the check of every row."""

    candidate: Candidate
    grounds: Grounds
    precision: Precision
    scan: Scan
    explained: bool  # the precision cause explains every non-corrupt row
    offset: float  # row r holds position start + offset + r under this candidate's frequencies

    @property
    def spec(self) -> RopeSpec:
        return self.candidate.spec

    @property
    def source(self) -> str:
        return self.candidate.source


def _attention_for(obs: Observation, expected: float) -> float:
    """The factor the simulations use: the expected one when the measured one is it to rounding."""
    return expected if abs(obs.attention / expected - 1) <= 4 * obs.floor / max(obs.attention, 1e-300) else \
        obs.attention


def _judged_offset(cache: Cache, obs: Observation, grounds: Grounds, fitted: float) -> tuple[float, Precision]:
    """(offset, judgement) at the fitted offset, or at the candidate's held offset when that one explains the
    sample and the fitted one does not."""
    held = structure.nearest_integer(held_offset(obs, grounds.inv, cache.start, fitted))
    tried = None
    for offset in dict.fromkeys((fitted, held)):
        precision = judge(obs.cos, obs.sin, cache.start + offset + obs.sample.astype(np.float64), grounds)
        if precision.cause != "no_known_cause":
            return offset, precision
        tried = tried or (offset, precision)
    return tried


def choose_reference(cache: Cache, obs: Observation, candidates: list[Candidate], fitted_offset: float,
                     against: tuple[np.ndarray, float] | None) -> Reference:
    """The first candidate whose precision cause explains the sample and then every row; else the one
    that came closest (explained the sample but not every row, or the smallest excess over its tolerance).
    A candidate's rows are at the fitted offset, or else at the one its own frequencies read off the rows
    (`held_offset`: the fit needs a clean prefix, which positions rounded to 16 bits from row 0 do not leave)."""
    tried = []
    for cand in candidates:
        if cand.inv.shape[0] != obs.n_freq:
            continue
        grounds = Grounds(cand.inv, float32_inv_freq(cand.inv, cand.spec.rotary_dim, cand.spec.rope_type),
                          _attention_for(obs, cand.attention), obs.grid, obs.floor,
                          GgmlRope.for_spec(cand.spec, cand.inv))
        offset, precision = _judged_offset(cache, obs, grounds, fitted_offset)
        if precision.cause == "no_known_cause":
            tried.append(((1, min(precision.over.values())), cand, grounds, precision, None, offset))
            continue
        checked = scan(cache, obs, grounds, offset, precision.cause, against)
        if checked.violations.size == 0:
            return Reference(cand, grounds, precision, checked, True, offset)
        tried.append(((0, checked.violations.size), cand, grounds, precision, checked, offset))
    if not tried:
        raise PosencError("cache", "no spec with this many frequencies to compare with")
    _, cand, grounds, precision, checked, offset = min(tried, key=lambda t: t[0])
    if checked is None:
        checked = scan(cache, obs, grounds, offset, "correct", against)
    return Reference(cand, grounds, precision, checked, False, offset)


@dataclass
class AuditResult:
    obs: Observation
    cache: Cache
    offset: float
    inferred: Inferred
    expected: Expected | None
    reference: Reference
    findings: list[Finding]
    error_ranges: list[dict]
    error_against: str


def _unexplained(obs: Observation, ref: Reference, inferred: Inferred) -> Finding:
    """no_known_cause with what was measured: where the rows go wrong, and the structure the fit found."""
    measured = (f"measured: layout {obs.layout}, {obs.n_freq} frequencies ({inferred.description}"
                f"{'' if inferred.score <= 1 else ', approximate'}), attention factor {obs.attention:.6g}, "
                f"row 0 at position {obs.offset:+.6g}")
    checked = ref.scan
    if ref.precision.cause != "no_known_cause" and checked.violations.size:
        bad = checked.violations
        worst = float(checked.exact_error[bad].max())
        return Finding("no_known_cause", f"{bad.size} of {checked.rows} rows are off the values every other row "
                       f"fits ({ref.precision.cause}, {ref.source} spec): rows {shown(bad)}, by up to "
                       f"{worst:.2g}; {measured}", "low")
    return Finding("no_known_cause", f"{ref.precision.evidence}; {measured}", "low")


def _corrupt(checked: Scan) -> list[Finding]:
    if not checked.corrupt:
        return []
    parts = [f"{kind} in rows {shown(rows)}" for kind, rows in checked.corrupt.items()]
    return [Finding("corrupt_rows", f"{checked.corrupt_rows.size} of {checked.rows} rows cannot be the cos and "
                    "sin of an angle: " + "; ".join(parts))]


def explained_findings(obs: Observation, cache: Cache, ref: Reference, expected: Expected | None,
                       inferred: Inferred) -> list[Finding]:
    """The causes that explain the error, given that `ref` explains every row."""
    findings = structure.layout_findings(obs, expected.apply if expected else None)
    if ref.source == "length":
        findings.append(Finding("wrong_length_variant", ref.candidate.note))
    elif expected is not None and ref.source != "config":
        findings += structure.frequency_findings(obs, expected.spec, inferred)
    findings += structure.attention_findings(obs, expected.attention if expected else None, inferred)
    findings += structure.offset_findings(ref.offset, cache.start, expected is not None)
    if expected is not None and cache.noise is None:  # a rotated q's length is not a cache's length
        findings += structure.length_findings(obs, cache.start, expected.spec)
    precision = ref.precision
    if precision.cause != "correct":
        findings.append(Finding(precision.cause, precision.evidence, precision.confidence,
                                "warning" if precision.cause in TOOL_ARITHMETIC else "error"))
    return findings


def audit_cache(cache: Cache, config: dict | None = None, *, layer_type: str | None = None) -> AuditResult:
    """The audit of `cache` as given or, when that explains nothing and its transpose is a cache whose values a
    cause explains, of its transpose with a `transposed` finding (a [dim, n] cache's rows are frequencies)."""
    try:
        result, refused = _audit(cache, config, layer_type), None
    except PosencError as error:
        result, refused = None, error
    if result is None or any(f.cause == "no_known_cause" for f in result.findings):
        flipped = _audit_transposed(cache, config, layer_type)
        if flipped is not None:
            return flipped
    if refused is not None:
        raise refused
    return result


def _audit_transposed(cache: Cache, config: dict | None, layer_type: str | None) -> AuditResult | None:
    """The audit of cos.T / sin.T with a `transposed` warning added, when the arrays have more
    columns than rows (a [dim, n] cache of n > dim positions) and a cause explains the transpose; else None."""
    rows, width = cache.cos.shape if cache.cos.ndim == 2 else (0, 0)
    if cache.noise is not None or cache.layout is not None or width <= rows:
        return None
    flipped = Cache(cache.cos.T, cache.sin.T, cache.dtype, f"{cache.source}, transposed", cache.start)
    try:
        result = _audit(flipped, config, layer_type)
    except PosencError:
        return None
    if any(f.cause == "no_known_cause" for f in result.findings):
        return None
    obs = result.obs
    result.findings[:] = sorted([f for f in result.findings if f.cause != "correct"] + [Finding(
        "transposed", f"the arrays are [{rows}, {width}]: each row holds one frequency ({obs.layout} layout, "
        f"{obs.n_freq} frequencies) over {width} positions, each column one position; read as "
        f"[{width}, {rows}] they are a cache, audited as such", severity="warning")], key=lambda f: f.rank)
    return result


def _audit(cache: Cache, config: dict | None, layer_type: str | None) -> AuditResult:
    obs = observe(cache)
    inferred = infer_spec(obs.omega, obs.omega_tol)
    claimed = float(cache.start + obs.rows)  # the length the cache stands for (HF: max(position_ids) + 1)
    expected, candidates = None, []
    if config is not None:
        entries = expected_entries(config, layer_type, claimed)
        expected = min(entries, key=lambda e: (e.inv.shape[0] != obs.n_freq,
                                               match_score(obs.omega, obs.omega_tol, e.inv)))
        candidates.append(Candidate(expected.spec, expected.inv, expected.attention, "config"))
        candidates += length_alternatives(expected, obs, claimed)
    for guess in (inferred.simplest, inferred):  # a simple spec a rounding explains beats per-frequency factors
        if guess is not None:
            candidates.append(Candidate(guess.spec, *guess.spec.inv_freq(), "inferred"))
    against = (expected.inv, expected.attention) if expected is not None and expected.inv.shape[0] == obs.n_freq \
        else None
    reference = choose_reference(cache, obs, candidates, structure.nearest_integer(obs.offset), against)

    findings = _corrupt(reference.scan)
    if reference.explained:
        findings += explained_findings(obs, cache, reference, expected, inferred)
    else:
        findings.append(_unexplained(obs, reference, inferred))
    if cache.noise is None:
        findings += structure.storage_findings(obs, cache.dtype)
    if not findings:
        findings.append(Finding("correct", f"{reference.precision.evidence}; all {obs.rows} rows checked",
                                severity="info"))
    findings.sort(key=lambda f: f.rank)
    against_name = f"the config's exact values ({expected.layer_type})" if against is not None else \
        f"the exact values of the {reference.source} spec"
    nominal = cache.start + np.arange(obs.rows, dtype=np.float64)
    return AuditResult(obs, cache, reference.offset, inferred, expected, reference, findings,
                       range_max(reference.scan.against_error, nominal), against_name)
