"""The audit: measure the cache, settle which spec it was built from, then name what is wrong.

1. observe: layout, storage grid, attention factor, per-column frequency, offset of row 0;
2. reference: the config's spec for the best-matching layer type (if a config is given) and the
   spec inferred from the frequencies; the first one under which some way of computing the
   values reproduces the cache is the one the cache was built from;
3. findings: structure (layout, rotary dim, base, scaling, attention factor, offset, length,
   storage) against the config, and precision (which way of computing reproduces the values);
4. the error against the exact values, by position range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..encodings import RopeSpec
from ..errors import PosencError
from ..models import from_hf_config
from . import structure
from .findings import Finding
from .infer import Inferred, infer_spec, match_score
from .observe import Cache, Observation, observe
from .precision import Precision, exact_cos_sin, float32_inv_freq, judge, range_max, row_error


@dataclass(frozen=True)
class Expected:
    layer_type: str
    spec: RopeSpec
    apply: str
    seq_len: float | None
    inv: np.ndarray
    attention: float


def expected_entries(config: dict, layer_type: str | None, rows: int, start: int) -> list[Expected]:
    """Every RoPE layer type of the config (length-dependent variants at init and at the cache's length)."""
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
        lengths = (None, float(start + rows)) if spec.length_dependent else (None,)
        for seq_len in lengths:
            inv, attention = spec.inv_freq(seq_len)
            out.append(Expected(name, spec, entry.apply, seq_len, inv, attention))
    return out


@dataclass
class Reference:
    """The spec the values were built from, and how they were computed."""

    spec: RopeSpec
    inv: np.ndarray
    attention: float
    precision: Precision
    source: str  # "config" | "inferred"


def _positions(obs: Observation, start: int, offset: float) -> np.ndarray:
    return start + offset + obs.sample.astype(np.float64)


def _judge(obs: Observation, spec: RopeSpec, inv: np.ndarray, attention: float, positions) -> Precision:
    inv32 = float32_inv_freq(inv, spec.base, spec.rotary_dim, spec.rope_type)
    return judge(obs.cos, obs.sin, positions, inv, inv32, attention, obs.grid, obs.floor)


def _attention_for(obs: Observation, expected: float) -> float:
    """The factor the simulations use: the expected one when the measured one is it to rounding."""
    return expected if abs(obs.attention / expected - 1) <= 4 * obs.floor / max(obs.attention, 1e-300) else \
        obs.attention


def choose_reference(obs: Observation, candidates: list[tuple[RopeSpec, np.ndarray, float, str]],
                     positions: np.ndarray) -> Reference:
    tried = []
    for spec, inv, attention, source in candidates:
        if inv.shape[0] != obs.n_freq:
            continue
        precision = _judge(obs, spec, inv, _attention_for(obs, attention), positions)
        ref = Reference(spec, inv, _attention_for(obs, attention), precision, source)
        if precision.cause != "no_known_cause":
            return ref
        tried.append(ref)
    if not tried:
        raise PosencError("cache", "no spec with this many frequencies to compare with")
    return min(tried, key=lambda r: float(r.precision.exact_error.max()))


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
    positions: np.ndarray  # the sampled rows' nominal positions (start + row)


def audit_cache(cache: Cache, config: dict | None = None, *, layer_type: str | None = None) -> AuditResult:
    obs = observe(cache)
    offset = structure.nearest_integer(obs.offset)
    inferred = infer_spec(obs.omega, obs.omega_tol)
    expected = None
    if config is not None:
        entries = expected_entries(config, layer_type, obs.rows, cache.start)
        expected = min(entries, key=lambda e: (e.inv.shape[0] != obs.n_freq,
                                               match_score(obs.omega, obs.omega_tol, e.inv)))
    true_positions = _positions(obs, cache.start, offset)
    candidates = []
    if expected is not None:
        candidates.append((expected.spec, expected.inv, expected.attention, "config"))
    candidates.append((inferred.spec, *inferred.spec.inv_freq(), "inferred"))
    reference = choose_reference(obs, candidates, true_positions)

    findings = structure.layout_findings(obs, expected.apply if expected else None)
    if expected is not None and reference.source != "config":
        findings += structure.frequency_findings(obs, expected.spec, inferred)
    findings += structure.attention_findings(obs, expected.attention if expected else None, inferred)
    findings += structure.offset_findings(offset, cache.start, expected is not None)
    if expected is not None:
        findings += structure.length_findings(obs, cache.start, expected.spec)
    if cache.noise is None:
        findings += structure.storage_findings(obs, cache.dtype)
    precision = reference.precision
    if precision.cause != "correct":
        findings.append(Finding(precision.cause, precision.evidence, precision.confidence))
    if not findings:
        findings.append(Finding("correct", precision.evidence, severity="info"))
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: order[f.severity])

    nominal = cache.start + obs.sample.astype(np.float64)
    if expected is not None and expected.inv.shape[0] == obs.n_freq:
        c, s = exact_cos_sin(nominal, expected.inv, expected.attention)
        err, against = row_error(obs.cos, obs.sin, c, s), f"the config's exact values ({expected.layer_type})"
    else:
        err, against = precision.exact_error, "the exact values of the inferred spec"
    return AuditResult(obs, cache, offset, inferred, expected, reference, findings, range_max(err, nominal),
                       against, nominal)
