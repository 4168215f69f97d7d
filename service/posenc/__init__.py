"""posenc: exact, fast positional encodings.

    >>> import posenc
    >>> posenc.sinusoidal([0, 1, 2], 8).shape
    (3, 8)
    >>> spec = posenc.RopeSpec.from_hf_config(config_json_dict)
    >>> cos, sin = posenc.rope_cos_sin(range(4096), spec)
"""

from . import numba_cache  # noqa: F401  before any kernel is decorated: a cache dir for any user
from .api import (QuantizedSlopes, RopeAlibi, RopeAlibiSpec, alibi_bias, alibi_slopes, alibi_slopes_uint8,
                  rope_alibi, rope_apply, rope_cos_sin, rope_inv_freq, sinusoidal, t5_position_bias,
                  t5_relative_position_bucket, xpos_scale)
from .errors import OutputTooLarge, PosencError
from .limits import LIMITS
from .models import LayerPositions, ModelPositions, from_hf_config
from .encodings import LearnedSpec, RopeSpec, SinusoidalSpec, T5BucketSpec

__version__ = "0.1.0"

__all__ = ["LIMITS", "LayerPositions", "ModelPositions", "OutputTooLarge", "PosencError", "QuantizedSlopes", "RopeAlibi", "RopeAlibiSpec", "RopeSpec",
           "LearnedSpec", "SinusoidalSpec", "T5BucketSpec", "alibi_bias", "alibi_slopes", "alibi_slopes_uint8", "from_hf_config", "rope_alibi", "rope_apply",
           "rope_cos_sin", "rope_inv_freq", "sinusoidal", "t5_position_bias", "t5_relative_position_bucket", "xpos_scale"]
