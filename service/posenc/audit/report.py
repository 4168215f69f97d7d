"""An audit as a JSON-ready dict (the CLI's --json, POST /v1/audit, the explorer) and as text."""

from __future__ import annotations

import numpy as np

from .engine import AuditResult
from .precision import HYPOTHESES

#: Points per series in the error-vs-position profile (log-spaced maxima).
PROFILE_POINTS = 160


def _squeeze(positions: np.ndarray, values: np.ndarray, edges: np.ndarray) -> list:
    """The maximum of `values` in each log-spaced bin of `edges` (None where the bin holds no row)."""
    p = np.maximum(positions, 1.0)
    which = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, len(edges) - 2)
    vals = np.where(np.isfinite(values), values, np.nan)
    out = np.full(len(edges) - 1, np.nan)
    np.fmax.at(out, which, vals)
    return [None if np.isnan(v) else float(v) for v in out]


def _profile(result: AuditResult) -> dict:
    """Error against position, downsampled: the cache (every row) and every simulated way of computing it
    (the judged sample)."""
    rows = result.obs.rows
    nominal = result.cache.start + np.arange(rows, dtype=np.float64)
    edges = np.unique(np.geomspace(max(nominal[0], 1.0), nominal[-1] + 2, PROFILE_POINTS + 1))
    precision = result.reference.precision
    sampled = result.cache.start + result.obs.sample.astype(np.float64)
    series = {"your cache": _squeeze(nominal, result.reference.scan.against_error, edges)}
    series.update({h.label: _squeeze(sampled, precision.simulated_error[h.label], edges) for h in HYPOTHESES[1:]})
    keep = [i for i in range(len(edges) - 1) if series["your cache"][i] is not None]
    return {"positions": [float(np.floor(edges[i + 1] - 1)) for i in keep], "floor": precision.floor,
            "series": {name: [values[i] for i in keep] for name, values in series.items()}}


def status_of(findings: list) -> str:
    """correct | warning | broken from the sorted findings (the most severe first)."""
    primary = findings[0]
    return "correct" if primary.cause == "correct" else "broken" if primary.severity == "error" else "warning"


def to_dict(result: AuditResult) -> dict:
    obs, ref = result.obs, result.reference
    primary = result.findings[0]
    return {
        "status": status_of(result.findings),
        "diagnosis": primary.to_dict(),
        "findings": [f.to_dict() for f in result.findings],
        "cache": {
            "source": result.cache.source, "dtype": result.cache.dtype, "storage_grid": obs.grid,
            "rows": obs.rows, "columns": obs.width, "layout": obs.layout, "rotary_dim": 2 * obs.n_freq,
            "n_freq": obs.n_freq, "start": result.cache.start, "position_offset": result.offset,
            "attention_factor": obs.attention, "fit_rows": obs.fit_rows, "notes": obs.notes,
        },
        "inferred": {"description": result.inferred.description, "spec": result.inferred.spec.to_dict(),
                     "reproduces_frequencies": result.inferred.score <= 1,
                     "base": result.inferred.spec.base, "rope_type": result.inferred.spec.rope_type},
        "expected": None if result.expected is None else {
            "layer_type": result.expected.layer_type, "spec": result.expected.spec.to_dict(),
            "apply": result.expected.apply, "seq_len": result.expected.seq_len,
            "attention_factor": result.expected.attention},
        "built_from": {"source": ref.source, "spec": ref.spec.to_dict(), "attention_factor": ref.grounds.attention,
                       "explains_every_row": ref.explained, "residual_by_cause": ref.precision.residual,
                       "tolerance_ratio_by_cause": ref.precision.over},
        "rows_checked": obs.rows,
        "corrupt_rows": {kind: {"count": int(rows.size), "first": [int(r) for r in rows[:5]]}
                         for kind, rows in ref.scan.corrupt.items()},
        "error_against": result.error_against,
        "error_by_position": result.error_ranges,
        "profile": _profile(result),
    }


def _range(lo: int, hi: int) -> str:
    def short(v):
        for unit, size in (("M", 1 << 20), ("k", 1 << 10)):
            if v >= size and v % size == 0:
                return f"{v // size}{unit}"
        return str(v)
    return f"{short(lo)}..{short(hi)}"


def to_text(doc: dict) -> str:
    c, lines = doc["cache"], []
    lines.append(f"cache: {c['rows']} rows x {c['columns']} columns, {c['dtype']} ({c['source']}), layout "
                 f"{c['layout']}, rotary dim {c['rotary_dim']}, attention factor {c['attention_factor']:.6g}, "
                 f"position offset {c['position_offset']:+g}")
    inferred = doc["inferred"]
    lines.append(f"inferred: {inferred['description']}" +
                 ("" if inferred["reproduces_frequencies"] else " (approximate: no spec reproduces every frequency)"))
    if doc["expected"]:
        e = doc["expected"]
        lines.append(f"config: layer type {e['layer_type']}, {e['spec']['scaling']['rope_type']} base "
                     f"{e['spec']['base']:g}, apply {e['apply']}, attention factor {e['attention_factor']:.6g}")
    lines.append(f"error against {doc['error_against']}:")
    for r in doc["error_by_position"]:
        lines.append(f"  positions {_range(r['from'], r['to']):>14}  max |error| {r['max_abs_error']:.2e}  "
                     f"({r['rows_checked']} rows checked)")
    lines.append(f"diagnosis: {doc['status'].upper()}")
    for f in doc["findings"]:
        lines.append(f"  [{f['severity']}, confidence {f['confidence']}] {f['title']}: {f['evidence']}")
        lines.append(f"    fix: {f['fix']}")
    return "\n".join(lines)
