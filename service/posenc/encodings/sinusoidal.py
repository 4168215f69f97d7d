"""`SinusoidalSpec`: which frequencies go to which columns, for the three reference layouts."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .. import crmath
from ..args import as_choice, as_dim, as_float, as_int, as_vector
from ..errors import PosencError
from ..limits import LIMITS
from .canonical import Canonical
from .columns import ColumnPlan

LAYOUTS = ("interleaved", "halves", "t2t")
#: Largest per-column `scale` / `target_std`: they multiply values in [-1, 1], and the product must
#: fit every output dtype (float16's largest finite value).
MAX_FACTOR = 65504.0


@dataclass(frozen=True, init=False)
class SinusoidalSpec(Canonical):
    """Layouts (docs/formulas.md section 5):

    * "interleaved" (Vaswani, DistilBERT, XLM): PE[p,2i]=sin(p w_i), PE[p,2i+1]=cos(p w_i),
      w_i = base^(-2i/dim); odd dim ends with a sin column.
    * "halves" (Marian): [sin | cos] with the same w_i; odd dim: ceil(dim/2) sin, floor(dim/2) cos.
    * "t2t" (tensor2tensor, fairseq, M2M100, Whisper, TimesFM): [sin | cos] with
      w_i = min_timescale * exp(-i ln(max_timescale/min_timescale) / max(dim//2 - 1, 1));
      odd dim gets a trailing zero column. max_timescale defaults to base.

    `scale` multiplies column j by scale[j]. `target_std` multiplies the whole table by a
    constant so its RMS over many positions is target_std (each sin/cos column has mean
    square 1/2): the factor does not depend on which positions you ask for, so rows from
    different calls agree.

    `offset` shifts positions: position p gets the row of p + offset (M2M100 / fairseq count
    positions from padding_idx + 1, so token 0 reads row 2). It is applied to the positions,
    never inside the kernels.
    """

    KIND = "sinusoidal"  # the "kind" of to_dict(), a table's encoding
    POSITIONAL = "dim"
    KEYWORDS = ("base", "layout", "min_timescale", "max_timescale", "scale", "target_std", "offset")

    dim: int
    base: float = 10000.0
    layout: str = "interleaved"
    min_timescale: float = 1.0
    max_timescale: float | None = None
    scale: tuple[float, ...] | None = None
    target_std: float | None = None
    offset: int = 0

    def __init__(self, dim, *, base=10000.0, layout="interleaved", min_timescale=1.0, max_timescale=None,
                 scale=None, target_std=None, offset=0):
        dim = as_dim(dim, "dim")
        layout = as_choice(layout, "layout", LAYOUTS)
        base = as_float(base, "base", exclusive_minimum=0.0)
        min_timescale = as_float(min_timescale, "min_timescale", exclusive_minimum=0.0)
        if max_timescale is not None:
            max_timescale = as_float(max_timescale, "max_timescale", exclusive_minimum=0.0)
        if layout != "t2t":
            if min_timescale != 1.0:
                raise PosencError("min_timescale", f"only applies to layout 't2t', not {layout!r}")
            if max_timescale is not None:
                raise PosencError("max_timescale", f"only applies to layout 't2t' (use base for {layout!r})")
        if scale is not None:
            scale = as_vector(scale, "scale", dim)
            if np.abs(scale).max() > MAX_FACTOR:
                raise PosencError("scale", f"entries must be within +-{MAX_FACTOR:g}")
            scale = tuple(float(v) for v in scale)
        if target_std is not None:
            target_std = as_float(target_std, "target_std", exclusive_minimum=0.0, maximum=MAX_FACTOR)
            if layout == "t2t" and dim < 2:  # t2t's one column is zero: no factor gives it an RMS
                raise PosencError("target_std", "needs a sin or cos column; layout 't2t' with dim 1 has only "
                                  "its zero column")
        offset = as_int(offset, "offset", minimum=0, maximum=LIMITS.max_abs_position)
        for name, value in (("dim", dim), ("base", base), ("layout", layout), ("min_timescale", min_timescale),
                            ("max_timescale", max_timescale), ("scale", scale), ("target_std", target_std),
                            ("offset", offset)):
            object.__setattr__(self, name, value)
        with np.errstate(all="ignore"):
            finite = np.isfinite(self.freqs * LIMITS.max_abs_position).all()
        if not finite:
            raise PosencError("min_timescale" if layout == "t2t" else "base",
                              "gives frequencies whose angles overflow float64 within the position limit")

    # --- column plan ---------------------------------------------------------------------
    @property
    def n_sin(self) -> int:
        return self.dim // 2 if self.layout == "t2t" else (self.dim + 1) // 2

    @property
    def n_cos(self) -> int:
        return self.dim // 2

    @cached_property
    def freqs(self) -> np.ndarray:
        """Angular frequencies for the n_sin (>= n_cos) sin columns, float64: each pow, exp and log
        correctly rounded (posenc.crmath), so the same bits on every CPU."""
        with np.errstate(all="ignore"):  # extreme timescales give inf/0 here, refused in __init__
            if self.layout == "t2t":
                num = self.dim // 2
                max_ts = self.base if self.max_timescale is None else self.max_timescale
                log_inc = crmath.log(max_ts / self.min_timescale) / max(num - 1, 1)
                freqs = self.min_timescale * crmath.exp_each(np.arange(num, dtype=np.float64) * -log_inc)
            else:
                freqs = 1.0 / crmath.pow_each(self.base, 2.0 * np.arange(self.n_sin, dtype=np.float64) / self.dim)
        freqs.flags.writeable = False
        return freqs

    def column_plan(self) -> ColumnPlan:
        """Where each frequency's sin and cos go in a row."""
        if self.layout == "interleaved":
            return ColumnPlan(self.dim, 0, 1, True, self.n_cos)
        return ColumnPlan(self.dim, 0, self.n_sin, False, self.n_cos)

    @property
    def amplitude(self) -> float:
        """The constant factor target_std implies (1.0 without it)."""
        if self.target_std is None:
            return 1.0
        return self.target_std / math.sqrt(0.5 * (self.n_sin + self.n_cos) / self.dim)

    # --- identity --------------------------------------------------------------------------
    def to_dict(self) -> dict:
        out = {"kind": self.KIND, "dim": self.dim, "base": self.base, "layout": self.layout,
               "min_timescale": self.min_timescale, "max_timescale": self.max_timescale,
               "scale": None if self.scale is None else list(self.scale), "target_std": self.target_std}
        if self.offset:  # only then: unshifted specs keep their identity (hash)
            out["offset"] = self.offset
        return out
