"""Validated, canonical, hashable specs: the single place parameters are checked."""

from .alibi import VARIANTS as ALIBI_VARIANTS
from .alibi import AlibiSpec
from .canonical import canonical_json, spec_hash
from .learned import LearnedSpec
from .rope import RopeSpec
from .sinusoidal import SinusoidalSpec
from .t5 import T5BucketSpec

__all__ = ["ALIBI_VARIANTS", "AlibiSpec", "LearnedSpec", "RopeSpec", "SinusoidalSpec", "T5BucketSpec", "canonical_json", "spec_hash"]
