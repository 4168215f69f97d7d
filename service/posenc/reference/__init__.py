"""The oracle: plain numpy float64, written to be obviously right, slow where it must be.

Only tests and benchmarks import this package; the public API runs the kernels. Each
function follows the reference model code cited in docs/formulas.md line by line.
"""

from .alibi import alibi_bias, alibi_slopes
from .rope import mrope_cos_sin, rope_apply, rope_cos_sin, xpos_scale
from .sinusoidal import sinusoidal
from .t5 import t5_relative_position_bucket

__all__ = ["alibi_bias", "alibi_slopes", "mrope_cos_sin", "rope_apply", "rope_cos_sin", "xpos_scale", "sinusoidal",
           "t5_relative_position_bucket"]
