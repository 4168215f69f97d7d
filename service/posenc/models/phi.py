"""Phi-3 / Phi-4-mini (`phi3`) and Phi-3.5-MoE (`phimoe`): LongRoPE.

Phi-3's config class (configuration_phi3.py) always has `original_max_position_embeddings`
(default 4096) and it wins over the one in `rope_scaling`; legacy rope types "su" and "yarn"
both mean longrope there; `partial_rotary_factor` (Phi-4-mini: 0.75) rotates the head's
first dims, `rotate_half` within them. Phi-3.5-MoE (configuration_phimoe.py, default base 1e6)
scales attention by `short_mscale` / `long_mscale` instead of LongRoPE's default factor.
"""

from . import reader
from .rope_params import RopeFamily, Sizes, single_rope_reader

PHI3 = RopeFamily(Sizes(3072, 32, 32, 4096), default_prf=1.0, default_original=4096,
                  rope_type_aliases={"su": "longrope", "yarn": "longrope"})
PHIMOE = RopeFamily(Sizes(4096, 32, 32, 4096 * 32), default_theta=1e6)

reader("phi3")(single_rope_reader(PHI3))
reader("phimoe")(single_rope_reader(PHIMOE))
