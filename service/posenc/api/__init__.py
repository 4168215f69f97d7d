"""The public functions: validate arguments into specs, run the kernels, cast the output."""

from .alibi import QuantizedSlopes, alibi_bias, alibi_slopes, alibi_slopes_uint8
from .combined import RopeAlibi, RopeAlibiSpec, rope_alibi
from .rope import rope_apply, rope_cos_sin, rope_inv_freq, rope_table, xpos_scale
from .sinusoidal import sinusoidal
from .t5 import t5_position_bias, t5_relative_position_bucket

__all__ = ["QuantizedSlopes", "RopeAlibi", "RopeAlibiSpec", "alibi_bias", "alibi_slopes", "alibi_slopes_uint8",
           "rope_alibi", "rope_apply", "rope_cos_sin", "rope_inv_freq", "rope_table", "sinusoidal", "t5_position_bias", "t5_relative_position_bucket",
           "xpos_scale"]
