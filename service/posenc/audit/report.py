"""An audit as a JSON-ready dict (the CLI's --json, POST /v1/audit, the explorer) and as text."""

from __future__ import annotations

import numpy as np

from .engine import AuditResult
from .precision import HYPOTHESES

#: Points per series in the error-vs-position profile (log-spaced maxima).
PROFILE_POINTS = 160


def _profile(result: AuditResult) -> dict:
    """Error against position for the cache and for every simulated way of computing it, downsampled."""
    positions = result.positions
    p = np.maximum(positions, 1.0)
    edges = np.unique(np.geomspace(p.min(), p.max() + 1, PROFILE_POINTS + 1))
    which = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, len(edges) - 2)
    keep = np.unique(which)
    precision = result.reference.precision
    series = {"your cache": precision.exact_error}
    series.update({h.label: precision.simulated_error[h.label] for h in HYPOTHESES[1:]})

    def squeeze(values):
        vals = np.where(np.isfinite(values), values, np.nan)
        out = []
        for b in keep:
            v = vals[which == b]
            out.append(None if np.all(np.isnan(v)) else float(np.nanmax(v)))
        return out

    return {"positions": [float(positions[which == b].max()) for b in keep],
            "floor": precision.floor, "series": {name: squeeze(v) for name, v in series.items()}}


def to_dict(result: AuditResult) -> dict:
    obs, ref = result.obs, result.reference
    primary = result.findings[0]
    return {
        "status": ("correct" if primary.cause == "correct" else
                   "broken" if primary.severity == "error" else "warning"),
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
        "built_from": {"source": ref.source, "spec": ref.spec.to_dict(), "attention_factor": ref.attention,
                       "residual_by_cause": ref.precision.residual},
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
