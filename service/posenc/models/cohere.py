"""Cohere (Command-R) and Cohere2 (Command-R7B / Command-A): interleaved RoPE.

Both rotate (x_2i, x_2i+1) pairs: their `rotate_half` is the GPT-J one and the rotary
embedding `repeat_interleave`s the frequencies (modeling_cohere.py, modeling_cohere2.py).
Cohere: default base 5e5, every layer. Cohere2: default base 1e4, head_dim from `head_dim`
or hidden // heads (its `__post_init__` sets hidden // heads, then a `head_dim` key in the
config overrides it), and only `sliding_attention` layers
are rotated: `full_attention` layers use no position encoding at all (NoPE), which the
ModelPositions says in a note. Layer types: `layer_types`, else every
`sliding_window_pattern`-th layer (default 4) is full.
"""

from . import reader
from .fields import ConfigView
from .layer_types import FULL, SLIDING, periodic_layer_types
from .positions import LayerPositions, ModelPositions
from .rope_params import RopeFamily, Sizes, read_dims, read_rope, single_rope_reader

COHERE = RopeFamily(Sizes(8192, 64, 40, 8192), default_theta=500_000.0, layout="interleaved")
COHERE2 = RopeFamily(Sizes(8192, 64, 40, 8192), layout="interleaved")

reader("cohere")(single_rope_reader(COHERE))


@reader("cohere2")
def read_cohere2(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    dims = read_dims(view, COHERE2)
    spec = read_rope(view, COHERE2, dims)
    layer_types = periodic_layer_types(view, dims.layers, "sliding_window_pattern", 4, full_at_zero=False)
    sliding = tuple(i for i, t in enumerate(layer_types) if t == SLIDING)
    nope = [i for i, t in enumerate(layer_types) if t == FULL]
    notes = (f"{FULL} layers {nope} use no position encoding (NoPE)",) if nope else ()
    entry = LayerPositions(SLIDING, spec, sliding, spec.layout, notes)
    return ModelPositions("cohere2", "cohere2", {SLIDING: entry})
