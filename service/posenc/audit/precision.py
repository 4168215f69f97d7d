"""How the values were formed: simulate each known way of computing a cache and see which one
reproduces the user's.

Every hypothesis takes the same frequencies, attention factor and positions (the ones the
structure checks settled on) and computes cos/sin the way a framework does: float64 angles
(exact), float32 angles (HF, the textbook numpy recipe), positions rounded to bfloat16/float16,
angles formed in bfloat16/float16. Each is rounded to the cache's storage grid and compared
with the cache row by row. A hypothesis *reproduces* the cache when its residual is a small
fraction of the exact one; float32 angles, whose last bits depend on the library's pow and cos,
may instead match by the *shape* of the error: the same size as the simulation's error, range by
range, over the positions where it rises above the storage rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..reference.rope import rope_cos_sin as reference_cos_sin
from .observe import GRIDS

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
#: Position ranges of the error table: [0, 256), [256, 1024), ... powers of 4 (bfloat16 aliasing starts at 256).
RANGE_EDGES = (0, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 2 ** 62)


def _round(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(dtype).astype(np.float64)


def float32_inv_freq(inv: np.ndarray, base: float, rotary_dim: int, rope_type: str) -> np.ndarray:
    """inv_freq as HF computes it: float32 `1 / base ** (arange(0, d, 2) / d)` (other variants: float32 of exact)."""
    if rope_type in ("default", "ntk", "dynamic"):
        exponent = np.arange(0, rotary_dim, 2, dtype=np.int64).astype(F32) / F32.type(rotary_dim)
        return (F32.type(1.0) / (F32.type(base) ** exponent)).astype(F32)
    return inv.astype(F32)


@dataclass(frozen=True)
class Hypothesis:
    cause: str  # a findings.CAUSES key
    label: str  # the legend of the precision figure


HYPOTHESES = (
    Hypothesis("correct", "float64 angles (exact)"),
    Hypothesis("float32_angles", "float32 angles"),
    Hypothesis("bf16_positions", "bfloat16 positions"),
    Hypothesis("fp16_positions", "float16 positions"),
    Hypothesis("bf16_angles", "bfloat16 angles"),
    Hypothesis("fp16_angles", "float16 angles"),
)


def exact_cos_sin(positions: np.ndarray, inv: np.ndarray, attention: float) -> tuple[np.ndarray, np.ndarray]:
    """The exact values: float64 angles, attention factor on both (posenc.reference.rope_cos_sin)."""
    return reference_cos_sin(np.asarray(positions, dtype=np.float64), inv, attention)


def simulate(cause: str, positions: np.ndarray, inv: np.ndarray, inv32: np.ndarray,
             attention: float) -> tuple[np.ndarray, np.ndarray]:
    """(cos, sin) float64 [n, n_freq] as the hypothesis computes them (before storage rounding)."""
    p = positions.astype(np.float64)
    if cause == "correct":
        return exact_cos_sin(p, inv, attention)
    with np.errstate(over="ignore", invalid="ignore"):
        if cause == "float32_angles":
            angle = np.outer(p.astype(F32), inv32).astype(F32)
        elif cause in ("bf16_positions", "fp16_positions"):
            grid = BF16 if cause == "bf16_positions" else F16
            angle = np.outer(p.astype(grid).astype(F32), inv32).astype(F32)
        else:
            grid = BF16 if cause == "bf16_angles" else F16
            angle = np.outer(p.astype(grid).astype(F32), inv.astype(grid).astype(F32)).astype(grid).astype(F32)
        cos, sin = np.cos(angle).astype(F32), np.sin(angle).astype(F32)
    a = F32.type(attention)
    return (cos * a).astype(np.float64), (sin * a).astype(np.float64)


def range_max(err_rows: np.ndarray, positions: np.ndarray) -> list[dict]:
    """The worst error per position range (only ranges that hold rows)."""
    out = []
    for lo, hi in zip(RANGE_EDGES[:-1], RANGE_EDGES[1:]):
        inside = (positions >= lo) & (positions < hi)
        if inside.any():
            worst = err_rows[inside]
            out.append({"from": lo, "to": int(min(hi, positions[inside].max() + 1)),
                        "rows_checked": int(inside.sum()),
                        "max_abs_error": float(np.max(np.where(np.isfinite(worst), worst, np.inf)))})
    return out


def row_error(cos, sin, ref_cos, ref_sin) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        err = np.maximum(np.abs(cos - ref_cos).max(axis=1), np.abs(sin - ref_sin).max(axis=1))
    return np.where(np.isnan(err), np.inf, err)


@dataclass
class Precision:
    cause: str  # the hypothesis that reproduces the cache, or "no_known_cause"
    confidence: str
    evidence: str
    floor: float  # the storage rounding bound
    exact_error: np.ndarray  # per sampled row: |cache - exact| (the reference the structure checks chose)
    simulated_error: dict  # label -> per-row |simulation - exact| (what that framework gets)
    residual: dict  # cause -> worst |cache - simulation|


def judge(cos: np.ndarray, sin: np.ndarray, positions: np.ndarray, inv: np.ndarray, inv32: np.ndarray,
          attention: float, grid: str, floor: float) -> Precision:
    storage = {name: dt for name, dt, _ in GRIDS}[grid]
    floor = floor + 1e-300
    exact_c, exact_s = (_round(x, storage) for x in simulate("correct", positions, inv, inv32, attention))
    exact_err = row_error(cos, sin, exact_c, exact_s)
    simulated, residual = {}, {}
    for hyp in HYPOTHESES:
        c, s = (_round(x, storage) for x in simulate(hyp.cause, positions, inv, inv32, attention))
        simulated[hyp.label] = row_error(c, s, exact_c, exact_s)
        residual[hyp.cause] = row_error(cos, sin, c, s)
    worst_exact = float(exact_err.max())
    base = dict(floor=floor, exact_error=exact_err, simulated_error=simulated,
                residual={k: float(v.max()) for k, v in residual.items()})
    if worst_exact <= floor:
        return Precision("correct", "high", f"every checked row is within {floor:.1e} of the exact value "
                         f"(the {grid} rounding)", **base)
    # Direct reproduction: the simulation leaves a small fraction of the exact residual.
    direct = sorted((float(residual[h.cause].max()), h.cause) for h in HYPOTHESES[1:])
    best_resid, best = direct[0]
    if best_resid <= max(floor, 0.1 * worst_exact):
        confidence = "high" if best_resid <= max(4 * floor, 0.01 * worst_exact) else "medium"
        return Precision(best, confidence, f"simulating it reproduces the cache to {best_resid:.1e} "
                         f"(against {worst_exact:.1e} from the exact values)", **base)
    # Shape match for float32 angles: the same error size range by range where it rises above the floor.
    shape = _profile_match(exact_err, simulated["float32 angles"], positions, floor)
    if shape is not None:
        ranges, spread = shape
        confidence = "high" if ranges >= 3 else "medium"
        return Precision("float32_angles", confidence, f"the error grows with position like float32 angles do: "
                         f"within a factor {spread:.1f} of the simulation in {ranges} position ranges", **base)
    return Precision("no_known_cause", "low", f"error up to {worst_exact:.1e}; no simulated cause reproduces it "
                     f"(best: {best} leaves {best_resid:.1e})", **base)


def _profile_match(observed: np.ndarray, simulated: np.ndarray, positions: np.ndarray, floor: float):
    obs = {r["from"]: r["max_abs_error"] for r in range_max(observed, positions)}
    sim = {r["from"]: r["max_abs_error"] for r in range_max(simulated, positions)}
    informative = [lo for lo in obs if sim[lo] > 4 * floor or obs[lo] > 4 * floor]
    if not informative:
        return None
    ratios = [obs[lo] / sim[lo] if sim[lo] > 0 else np.inf for lo in informative]
    spread = max(max(ratios), 1 / max(min(ratios), 1e-300))
    return (len(informative), spread) if spread <= 4 else None
