"""T5 / mT5 / UMT5: relative-position buckets feeding a learned per-head bias (modeling_t5.py,
modeling_umt5.py).

Each self-attention adds `relative_attention_bias(bucket(key - query))`, a [num_buckets,
n_heads] table from the checkpoint, to its scores. The encoder's buckets are bidirectional,
the decoder's causal (`bidirectional = not is_decoder`); cross-attention has no position
bias. T5 / mT5 hold the table in layer 0 of each stack only and pass that layer's bias on to
every later layer; UMT5 gives every layer its own table. Config keys (all three config
classes): `relative_attention_num_buckets` (32), `relative_attention_max_distance` (128),
`num_layers` (T5 6, mT5/UMT5 8; alias num_hidden_layers), `num_decoder_layers` (null = num_layers;
absent: num_layers, but Switch's class defaults it to 12).
Switch Transformers (modeling_switch_transformers.py) is T5's attention with MoE feed-forwards:
the same buckets and layer-0 tables (`num_layers` 12, `num_decoder_layers` 12), checked by
tests/golden/model_truth_nonrotary.npz.
"""

from ..encodings import T5BucketSpec
from . import reader
from .config_keys import aliased_int, renamed
from .fields import MAX_LAYERS, ConfigView
from .positions import LayerPositions, ModelPositions

DEFAULT_LAYERS = {"t5": 6, "mt5": 8, "umt5": 8, "switch_transformers": 12}
DEFAULT_DECODER_LAYERS = {"switch_transformers": 12}  # T5 / mT5 / UMT5 default it to num_layers
TENSOR = "{stack}.block.{layer}.layer.0.SelfAttention.relative_attention_bias.weight"


def bias_tensors(model_type: str, stack: str, layers: int) -> tuple[str, ...]:
    """The checkpoint tensors holding a stack's bias tables: layer 0's (T5, mT5) or every layer's (UMT5)."""
    holders = range(layers) if model_type == "umt5" else range(min(layers, 1))
    return tuple(TENSOR.format(stack=stack, layer=i) for i in holders)


def _stack(view: ConfigView, model_type: str, stack: str, layers: int) -> LayerPositions:
    with renamed({"num_buckets": view.field("relative_attention_num_buckets"),
                  "max_distance": view.field("relative_attention_max_distance")}):
        spec = T5BucketSpec(view.int("relative_attention_num_buckets", 32),
                            max_distance=view.int("relative_attention_max_distance", 128),
                            bidirectional=stack == "encoder")
    tables = bias_tensors(model_type, stack, layers)
    if model_type == "umt5":
        shared = f"every layer has its own bias table: {tables[0]} .. {tables[-1]}"
    else:
        shared = f"one bias table, {tables[0]}, computed in layer 0 and reused by every layer"
    direction = "bidirectional" if stack == "encoder" else "causal: keys after the query all read bucket 0"
    notes = ((f"self-attention bias = table[bucket(key - query)] ([num_buckets, n_heads], from the checkpoint); "
              f"{direction}"), shared)
    if stack == "decoder":
        notes += ("cross-attention has no position bias",)
    return LayerPositions(stack, spec, tuple(range(layers)), "bias", notes)


@reader("t5", "mt5", "umt5", "switch_transformers")
def read_t5(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    model_type = config["model_type"]
    encoder_layers = aliased_int(view, ("num_layers", "num_hidden_layers"), DEFAULT_LAYERS[model_type],
                                 maximum=MAX_LAYERS)
    # absent: the config class's default (Switch: 12); null: num_layers, as every class derives it
    default = DEFAULT_DECODER_LAYERS.get(model_type) if "num_decoder_layers" not in view.raw else None
    decoder_layers = view.layers("num_decoder_layers", default or encoder_layers)
    return ModelPositions(model_type, "t5", {"encoder": _stack(view, model_type, "encoder", encoder_layers),
                                             "decoder": _stack(view, model_type, "decoder", decoder_layers)})
