"""posenc: exact, fast positional encodings.

    >>> import posenc
    >>> posenc.sinusoidal([0, 1, 2], 8).shape
    (3, 8)
    >>> spec = posenc.RopeSpec.from_hf_config(config_json_dict)
    >>> cos, sin = posenc.rope_cos_sin(range(4096), spec)

The public names import on first use (`posenc._lazy`): `import posenc` loads none of numpy,
numba or ml_dtypes, so the CLI starts at once and a caller pays only for what it uses. One
consequence: a POSENC_ISA the CPU cannot run raises at the first call that loads the native
kernels (importing `posenc.native`), not at `import posenc`.
"""

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

__version__ = "0.1.0"

if TYPE_CHECKING:  # the names as type checkers and IDEs see them; at run time __getattr__ imports them
    from .api import (QuantizedSlopes, RopeAlibi, RopeAlibiSpec, alibi_bias, alibi_slopes, alibi_slopes_uint8,
                      rope_alibi, rope_apply, rope_cos_sin, rope_inv_freq, sinusoidal, t5_position_bias,
                      t5_relative_position_bucket, xpos_scale)
    from .encodings import LearnedSpec, RopeSpec, SinusoidalSpec, T5BucketSpec
    from .errors import OutputTooLarge, PosencError
    from .limits import LIMITS
    from .models import LayerPositions, ModelPositions, from_hf_config

# The public names (a literal, for static readers), where each lives; then the submodules the eager import bound as a
# side effect, which callers use as `posenc.native`, `posenc.kernels`, ... without importing them.
__all__ = ["LIMITS", "LayerPositions", "ModelPositions", "OutputTooLarge", "PosencError",
           "QuantizedSlopes", "RopeAlibi", "RopeAlibiSpec", "RopeSpec", "LearnedSpec", "SinusoidalSpec",
           "T5BucketSpec", "alibi_bias", "alibi_slopes", "alibi_slopes_uint8", "from_hf_config",
           "rope_alibi", "rope_apply", "rope_cos_sin", "rope_inv_freq", "sinusoidal", "t5_position_bias",
           "t5_relative_position_bucket", "xpos_scale"]
__getattr__, __dir__ = lazy_exports(__name__, {
    "LIMITS": "limits", "LayerPositions": "models", "ModelPositions": "models", "OutputTooLarge": "errors",
    "PosencError": "errors", "QuantizedSlopes": "api", "RopeAlibi": "api", "RopeAlibiSpec": "api",
    "RopeSpec": "encodings", "LearnedSpec": "encodings", "SinusoidalSpec": "encodings",
    "T5BucketSpec": "encodings", "alibi_bias": "api", "alibi_slopes": "api", "alibi_slopes_uint8": "api",
    "from_hf_config": "models", "rope_alibi": "api", "rope_apply": "api", "rope_cos_sin": "api",
    "rope_inv_freq": "api", "sinusoidal": "api", "t5_position_bias": "api",
    "t5_relative_position_bucket": "api", "xpos_scale": "api",
}, submodules=("api", "args", "dtypes", "encodings", "errors", "kernels", "limits", "models", "native"))
