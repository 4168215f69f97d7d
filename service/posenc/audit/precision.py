"""How the values were formed: simulate each known way of computing a cache and see which one
explains the user's.

Every hypothesis takes the same frequencies, attention factor and positions (the ones the
structure checks settled on) and computes cos/sin the way a framework does: float64 angles
(exact), float32 angles (HF, the textbook numpy recipe), inv_freq rounded to bfloat16/float16
(`model.to(torch.bfloat16)`), positions rounded to bfloat16/float16, angles formed in
bfloat16/float16, and angles formed the way llama.cpp forms them (`llama_cpp`). Each is rounded
to the cache's storage grid and compared with the cache element by element against a tolerance
(`tolerance`) made of the storage rounding and the rounding freedom of the way that hypothesis
forms its angle (`angle_ulps`): another library's pow, product order or cos may move a float32
angle by a few float32 ulp of itself; a float64 inv_freq computed the usual ways (pow, or exp of
-ln(base) x) is off by up to ~3 |ln inv_freq| float64 ulp. Positions held in 16 bits are whichever
neighbour on that grid the framework's rounding gave (`held_positions`). A hypothesis *explains*
the cache when every element is within that tolerance and it takes away most of the error the
exact values leave (docs/audit.md, "What explains means").
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..reference.rope import rope_cos_sin as reference_cos_sin
from .ggml_rope import GgmlRope
from .observe import GRIDS

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
U64, U32 = 2.0 ** -53, 2.0 ** -24
#: Ulps of its own angle (in the dtype it is formed in) another implementation may differ by: inv_freq
#: computed with that dtype's pow and scaling arithmetic is a few ulp off (HF's float32 Llama-3 smoothing band:
#: up to 3), and the product rounds once more.
ANGLE_ULPS = 8.0
#: float64 inv_freq_i = base^(-x_i) = exp(-L_i), L_i = |ln inv_freq_i|, computed as exp(-ln(base) * x_i) (or
#: exp(i * (-ln(base) / d))) rounds three quantities of size up to L_i in the exponent (ln(base), x_i and their
#: product; or ln(base), the quotient and the product), each moving inv_freq by up to L_i ulp relative; pow(base,
#: -x_i) rounds only x_i. So a correct float64 angle may be off by EXPONENT_ULPS * L_i ulp more than ANGLE_ULPS.
EXPONENT_ULPS = 3.0
#: Ulps per frequency index of llama.cpp's angle: theta_scale = powf(base, -2/n_dims) from another libm may be
#: an ulp off (up to 2u relative), and frequency i multiplies it in i times.
RECURRENCE_ULPS = 2.0
#: A cause explains only when its simulation leaves at most this fraction of the exact values' error.
EXPLAINED_FRACTION = 0.5
#: ... and "high" confidence when it leaves at most this fraction.
HIGH_FRACTION = 0.1
#: Position ranges of the error table: [0, 256), [256, 1024), ... powers of 4 (bfloat16 aliasing starts at 256).
RANGE_EDGES = (0, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 2 ** 62)


def round_to(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(dtype).astype(np.float64)


def storage_dtype(grid: str) -> np.dtype:
    return {name: dt for name, dt, _ in GRIDS}[grid]


def float32_inv_freq(inv: np.ndarray, rotary_dim: int, rope_type: str) -> np.ndarray:
    """inv_freq as HF computes it: float32 `1 / base ** (arange(0, d, 2) / d)` for the variants that are a
    plain power of a base (default, static and dynamic NTK: the base is the effective one, read back from
    `inv`, so a dynamic spec grown to a length uses its grown base); other variants: float32 of the exact."""
    if rope_type in ("default", "ntk", "dynamic") and inv.shape[0] > 1 and rotary_dim > 2:
        base = float(inv[1]) ** (-rotary_dim / 2.0)
        exponent = np.arange(0, rotary_dim, 2, dtype=np.int64).astype(F32) / F32.type(rotary_dim)
        return (F32.type(1.0) / (F32.type(base) ** exponent)).astype(F32)
    return inv.astype(F32)


@dataclass(frozen=True)
class Hypothesis:
    cause: str  # a findings.CAUSES key
    label: str  # the legend of the precision figure
    angle_unit: float  # unit roundoff of the dtype the angle is formed in: its rounding freedom
    value_unit: float  # unit roundoff cos/sin are computed in, before storage


HYPOTHESES = (
    Hypothesis("correct", "float64 angles (exact)", U64, U64),
    Hypothesis("float32_angles", "float32 angles", U32, U32),
    Hypothesis("llama_cpp_angles", "float32 angles (llama.cpp)", U32, U32),
    Hypothesis("bf16_inv_freq", "bfloat16 inv_freq", U32, U32),
    Hypothesis("fp16_inv_freq", "float16 inv_freq", U32, U32),
    Hypothesis("bf16_positions", "bfloat16 positions", U32, U32),
    Hypothesis("fp16_positions", "float16 positions", U32, U32),
    Hypothesis("bf16_angles", "bfloat16 angles", U32, U32),
    Hypothesis("fp16_angles", "float16 angles", U32, U32),
)
BY_CAUSE = {h.cause: h for h in HYPOTHESES}
#: The significant bits of the grid each positions hypothesis holds positions on.
POSITION_BITS = {"bf16_positions": 8, "fp16_positions": 11}


def angle_ulps(cause: str, inv: np.ndarray) -> np.ndarray:
    """[n_freq]: ulps of its own angle each frequency's angle may be off by under the hypothesis (see the
    constants above: the rounding freedom of the ways it is commonly computed)."""
    if cause == "correct":
        return ANGLE_ULPS + EXPONENT_ULPS * np.abs(np.log(inv))
    if cause == "llama_cpp_angles":
        return ANGLE_ULPS + RECURRENCE_ULPS * np.arange(inv.shape[0], dtype=np.float64)
    return np.full(inv.shape[0], ANGLE_ULPS)


def held_positions(bits: int, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The values just below and just above each position on a grid of `bits` significant bits (equal where the
    position is on it). Positions held in 16 bits are one of the two, not always the nearest: a cast rounds to
    nearest, torch.arange(n, dtype=torch.bfloat16) adds the index within a vector to a rounded vector start."""
    mantissa, exponent = np.frexp(positions)
    scale = np.ldexp(1.0, exponent - bits)
    return np.floor(mantissa * 2.0 ** bits) * scale, np.ceil(mantissa * 2.0 ** bits) * scale


def exact_cos_sin(positions: np.ndarray, inv: np.ndarray, attention: float) -> tuple[np.ndarray, np.ndarray]:
    """The exact values: float64 angles, attention factor on both (posenc.reference.rope_cos_sin)."""
    return reference_cos_sin(np.asarray(positions, dtype=np.float64), inv, attention)


def simulate(cause: str, positions: np.ndarray, inv: np.ndarray, inv32: np.ndarray,
             attention: float, ggml: GgmlRope | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(cos, sin) float64 [n, n_freq] as the hypothesis computes them (before storage rounding); positions held
    in 16 bits are the given ones rounded to nearest (`held_positions` gives the other neighbour too);
    llama_cpp_angles needs `ggml` (NaN without it: llama.cpp has no such rope)."""
    p = positions.astype(np.float64)
    if cause == "correct":
        return exact_cos_sin(p, inv, attention)
    with np.errstate(over="ignore", invalid="ignore"):
        if cause == "float32_angles":
            angle = np.outer(p.astype(F32), inv32).astype(F32)
        elif cause == "llama_cpp_angles":
            angle = ggml.angles(p) if ggml is not None else np.full((p.shape[0], inv.shape[0]), np.nan, F32)
        elif cause in ("bf16_inv_freq", "fp16_inv_freq"):
            grid = BF16 if cause == "bf16_inv_freq" else F16
            angle = np.outer(p.astype(F32), inv32.astype(grid).astype(F32)).astype(F32)
        elif cause in ("bf16_positions", "fp16_positions"):
            grid = BF16 if cause == "bf16_positions" else F16
            angle = np.outer(p.astype(grid).astype(F32), inv32).astype(F32)
        else:
            grid = BF16 if cause == "bf16_angles" else F16
            angle = np.outer(p.astype(grid).astype(F32), inv.astype(grid).astype(F32)).astype(grid).astype(F32)
        cos, sin = np.cos(angle).astype(F32), np.sin(angle).astype(F32)
    a = F32.type(attention)
    return (cos * a).astype(np.float64), (sin * a).astype(np.float64)


def tolerance(hyp: Hypothesis, positions: np.ndarray, inv: np.ndarray, attention: float,
              floor: float) -> np.ndarray:
    """[n, n_freq]: how far a cache built the hypothesis' way may lie from its simulation: the storage
    rounding `floor`, plus `angle_ulps` ulps of the angle p * inv_i in the dtype it is formed in, plus two
    roundings of cos/sin in the dtype they are computed in."""
    a = abs(attention)
    angle = np.abs(np.asarray(positions, dtype=np.float64))[:, None] * np.abs(inv)[None, :]
    return floor + a * (angle_ulps(hyp.cause, inv)[None, :] * hyp.angle_unit * angle + 2 * hyp.value_unit)


def elementwise(cos, sin, ref_cos, ref_sin) -> np.ndarray:
    """[n, k] max of |cos - ref_cos| and |sin - ref_sin|, NaN as infinity."""
    with np.errstate(invalid="ignore"):
        err = np.maximum(np.abs(cos - ref_cos), np.abs(sin - ref_sin))
    return np.where(np.isnan(err), np.inf, err)


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


@dataclass
class Precision:
    cause: str  # the hypothesis that explains the cache, or "no_known_cause"
    confidence: str
    evidence: str
    floor: float  # the storage rounding bound
    exact_error: np.ndarray  # per checked row: max |cache - exact|
    simulated_error: dict  # label -> per-row max |simulation - exact| (what that framework gets)
    residual: dict  # cause -> worst |cache - simulation|
    over: dict  # cause -> worst |cache - simulation| / tolerance (<= 1: within its tolerance everywhere)


@dataclass(frozen=True)
class Grounds:
    """What a judgement stands on: the frequencies, the attention factor and the storage of the cache."""

    inv: np.ndarray
    inv32: np.ndarray
    attention: float
    grid: str
    floor: float
    ggml: GgmlRope | None = None  # how llama.cpp would compute these frequencies (None: it has no such rope)

    def stored(self, cause: str, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The hypothesis' (cos, sin) at `positions`, rounded to the cache's storage grid."""
        values = simulate(cause, positions, self.inv, self.inv32, self.attention, self.ggml)
        storage = storage_dtype(self.grid)
        return round_to(values[0], storage), round_to(values[1], storage)

    def residual(self, cause: str, positions: np.ndarray, error_of, simulated=None) -> np.ndarray:
        """[n, k] |cache - simulation| element by element (error_of(cos, sin) computes it for one simulation;
        `simulated`: the stored simulation at `positions`, when the caller has it). Positions held in 16 bits:
        each row at whichever of its two `held_positions` fits it best."""
        if cause not in POSITION_BITS:
            return error_of(*(simulated or self.stored(cause, positions)))
        below, above = held_positions(POSITION_BITS[cause], positions)
        best = error_of(*self.stored(cause, below)).copy()  # error_of may hand back a buffer it reuses
        err = error_of(*self.stored(cause, above))
        better = err.max(axis=1) < best.max(axis=1)
        best[better] = err[better]
        return best


def judge(cos: np.ndarray, sin: np.ndarray, positions: np.ndarray, grounds: Grounds,
          skip: np.ndarray | None = None) -> Precision:
    """Which hypothesis explains the rows given (cos/sin [n, n_freq] at `positions`); rows in `skip`
    (corrupt ones, reported on their own) are left out of the decision."""
    storage = storage_dtype(grounds.grid)
    keep = np.ones(len(positions), bool) if skip is None else ~skip
    raw_c, raw_s = simulate("correct", positions, grounds.inv, grounds.inv32, grounds.attention)
    exact_c, exact_s = round_to(raw_c, storage), round_to(raw_s, storage)
    exact_elem = elementwise(cos, sin, exact_c, exact_s)
    simulated, residual, over = {}, {}, {}
    for hyp in HYPOTHESES:
        if hyp.cause == "correct":  # against the unrounded values: `floor` covers the storage rounding
            c, s = raw_c, raw_s
            resid = elementwise(cos, sin, c, s)[keep]
        else:
            c, s = grounds.stored(hyp.cause, positions)
            resid = grounds.residual(hyp.cause, positions, lambda c2, s2: elementwise(cos, sin, c2, s2),
                                     (c, s))[keep]
        simulated[hyp.label] = elementwise(c, s, exact_c, exact_s).max(axis=1)
        tol = tolerance(hyp, positions[keep], grounds.inv, grounds.attention, grounds.floor)
        residual[hyp.cause] = float(resid.max()) if resid.size else 0.0
        over[hyp.cause] = float((resid / tol).max()) if resid.size else 0.0
    exact_rows = exact_elem.max(axis=1)
    return decide(exact_rows, simulated, residual, over, grounds, positions, keep)


def decide(exact_rows: np.ndarray, simulated: dict, residual: dict, over: dict, grounds: Grounds,
           positions: np.ndarray, keep: np.ndarray) -> Precision:
    """The first hypothesis (simplest first) that explains the cache; else no_known_cause with what was measured.

    Explains = (a) every element within the hypothesis' tolerance, and (b) it accounts for the error: its
    simulation takes away at least half of the worst error the exact values leave (it reproduces the values),
    or its own error has the cache's size range by range (it reproduces the statistics: float32 angles whose
    last bits depend on the library's pow, scaling arithmetic and cos)."""
    worst_exact = float(exact_rows[keep].max()) if keep.any() else 0.0
    base = dict(floor=grounds.floor, exact_error=exact_rows, simulated_error=simulated, residual=residual, over=over)
    if over["correct"] <= 1:
        return Precision("correct", "high", f"every checked element is within its tolerance of the exact value "
                         f"(worst {worst_exact:.1e}: {grounds.grid} rounding plus a few float64 ulp of its angle)",
                         **base)
    explaining = []
    for hyp in HYPOTHESES[1:]:
        if over[hyp.cause] > 1:
            continue
        if residual[hyp.cause] <= EXPLAINED_FRACTION * worst_exact:
            high = residual[hyp.cause] <= max(HIGH_FRACTION * worst_exact, 4 * grounds.floor)
            explaining.append((residual[hyp.cause], hyp.cause, "high" if high else "medium",
                               f"simulating it leaves {residual[hyp.cause]:.1e} (within the tolerance of its "
                               f"rounding at every checked element) against {worst_exact:.1e} from the exact values"))
            continue
        shape = _profile_match(exact_rows[keep], simulated[hyp.label][keep], positions[keep], grounds.floor)
        if shape is not None:
            ranges, spread = shape
            explaining.append((residual[hyp.cause], hyp.cause, "high" if ranges >= 3 else "medium",
                               f"every checked element is within the tolerance of its rounding, and the error "
                               f"grows with position as its own does: within a factor {spread:.1f} of the "
                               f"simulation in {ranges} position range{'' if ranges == 1 else 's'}"))
    if explaining:
        _, best, confidence, evidence = min(explaining)
        return Precision(best, confidence, evidence, **base)
    closest = min((h.cause for h in HYPOTHESES[1:]), key=lambda c: over[c])
    return Precision("no_known_cause", "low", f"error up to {worst_exact:.1e} against the exact values; no known "
                     f"way of computing explains it (closest: {closest}, off by {over[closest]:.3g}x its tolerance)",
                     **base)


def _profile_match(observed: np.ndarray, simulated: np.ndarray, positions: np.ndarray, floor: float):
    """(ranges compared, worst ratio) when the two errors agree within a factor 4 in every position range
    where either rises above the storage rounding; None otherwise."""
    obs = {r["from"]: r["max_abs_error"] for r in range_max(observed, positions)}
    sim = {r["from"]: r["max_abs_error"] for r in range_max(simulated, positions)}
    informative = [lo for lo in obs if sim[lo] > floor or obs[lo] > floor]
    if not informative:
        return None
    ratios = [obs[lo] / sim[lo] if sim[lo] > 0 else np.inf for lo in informative]
    spread = max(max(ratios), 1 / max(min(ratios), 1e-300))
    return (len(informative), spread) if spread <= 4 else None
