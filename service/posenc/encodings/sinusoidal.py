"""`SinusoidalSpec`: which frequencies go to which columns, for the three reference layouts."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..args import as_choice, as_dim, as_float, as_vector
from ..errors import PosencError
from .canonical import Canonical
from .columns import ColumnPlan

LAYOUTS = ("interleaved", "halves", "t2t")


@dataclass(frozen=True, init=False)
class SinusoidalSpec(Canonical):
    """Layouts (FORMULAS.md section 5):

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
    """

    KIND = "sinusoidal"  # the "kind" of to_dict(), a table's encoding
    POSITIONAL = "dim"
    KEYWORDS = ("base", "layout", "min_timescale", "max_timescale", "scale", "target_std")

    dim: int
    base: float = 10000.0
    layout: str = "interleaved"
    min_timescale: float = 1.0
    max_timescale: float | None = None
    scale: tuple[float, ...] | None = None
    target_std: float | None = None

    def __init__(self, dim, *, base=10000.0, layout="interleaved", min_timescale=1.0, max_timescale=None,
                 scale=None, target_std=None):
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
            scale = tuple(float(v) for v in as_vector(scale, "scale", dim))
        if target_std is not None:
            target_std = as_float(target_std, "target_std", exclusive_minimum=0.0)
        for name, value in (("dim", dim), ("base", base), ("layout", layout), ("min_timescale", min_timescale),
                            ("max_timescale", max_timescale), ("scale", scale), ("target_std", target_std)):
            object.__setattr__(self, name, value)

    # --- column plan ---------------------------------------------------------------------
    @property
    def n_sin(self) -> int:
        return self.dim // 2 if self.layout == "t2t" else (self.dim + 1) // 2

    @property
    def n_cos(self) -> int:
        return self.dim // 2

    @cached_property
    def freqs(self) -> np.ndarray:
        """Angular frequencies for the n_sin (>= n_cos) sin columns, float64.

        Evaluated element by element with the C library's pow/exp/log (math.*), in the operation
        order docs/protocol.md states, so that any client can reproduce them bit for bit
        (numpy's vectorised power and exp differ from libm in the last bit for some elements)."""
        if self.layout == "t2t":
            num = self.dim // 2
            max_ts = self.base if self.max_timescale is None else self.max_timescale
            log_inc = math.log(max_ts / self.min_timescale) / max(num - 1, 1)
            values = [self.min_timescale * math.exp(i * -log_inc) for i in range(num)]
        else:
            values = [math.pow(self.base, -(2.0 * i) / self.dim) for i in range(self.n_sin)]
        freqs = np.array(values, dtype=np.float64)
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
        return {"kind": self.KIND, "dim": self.dim, "base": self.base, "layout": self.layout,
                "min_timescale": self.min_timescale, "max_timescale": self.max_timescale,
                "scale": None if self.scale is None else list(self.scale), "target_std": self.target_std}
