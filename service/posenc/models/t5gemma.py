"""T5Gemma (modeling_t5gemma.py): an encoder-decoder whose two stacks are Gemma-2-like decoders,
each with its own config (`encoder`, `decoder`: T5GemmaModuleConfig, model_type
"t5_gemma_module") and its own rotary embedding built from that config's rope_parameters.

Both stacks rotate q/k of their self-attention (half-split, `rotate_half`), on every layer,
sliding_attention and full_attention alike (one rope dict per stack); the encoder's attention
is bidirectional, the decoder's causal. The decoder's cross-attention applies no positions.
The layer types are named by stack: "encoder" and "decoder" (or "<stack> <layer type>" should a
stack's layer types ever differ in RoPE), each indexing that stack's own layers from 0.

T5Gemma-2 (modeling_t5gemma2.py): the encoder is multimodal (`encoder.text_config`, a Gemma-3
text stack, beside a SigLIP vision tower whose image tokens sit in the text sequence at ordinary
positions); the decoder (`decoder`) is a Gemma-3 text stack whose merged attention scores its
rotated q against its own rotated keys and the encoder's unrotated outputs alike. Both stacks
read their RoPE as Gemma-3 does (`gemma._gemma3`: one per layer type, full_attention from
rope_theta (1e6), sliding_attention from rope_local_base_freq (1e4), every 6th layer full
unless layer_types says), so the layer types are "<stack> <layer type>".
"""

from ..errors import PosencError
from . import reader
from .fields import ConfigView
from .gemma import _gemma3
from .generic import _check_keys, read_mechanisms
from .modeling import modeling
from .positions import LayerPositions, ModelPositions

#: T5GemmaModuleConfig's defaults for the sizes RoPE depends on (an absent stack config is built with them)
MODULE_DEFAULTS = {"hidden_size": 2304, "num_attention_heads": 8, "head_dim": 256, "num_hidden_layers": 26,
                   "max_position_embeddings": 8192}
NOTES = {"encoder": "the encoder's self-attention (bidirectional) rotates q/k; its layers are the encoder's",
         "decoder": ("the decoder's self-attention (causal) rotates q/k; its layers are the decoder's; its "
                     "cross-attention applies no positions")}


def _stack(view: ConfigView, stack: str, strict: bool) -> dict[str, LayerPositions]:
    sub = view.obj(stack)
    if sub is None:
        if view.has(stack) and view.raw[stack] is not None:
            raise PosencError(view.field(stack), "must be an object: the stack's T5GemmaModuleConfig")
        sub = ConfigView({}, view.field(stack))
    raw = {**MODULE_DEFAULTS, "model_type": "t5_gemma_module", **sub.raw}
    sub = ConfigView(raw, sub.path)
    _check_keys(sub, strict)
    model = read_mechanisms(sub, "t5_gemma_module", modeling("t5_gemma_module"))
    out = {}
    for name, entry in model.encodings.items():
        layer_type = stack if name == "default" else f"{stack} {name}"
        out[layer_type] = LayerPositions(layer_type, entry.spec, entry.layers, entry.apply,
                                         (NOTES[stack],) + entry.notes)
    return out


@reader("t5gemma")
def read_t5gemma(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    _check_keys(view, strict)
    return ModelPositions("t5gemma", "t5gemma", {**_stack(view, "encoder", strict), **_stack(view, "decoder", strict)})


T5GEMMA2_NOTES = {
    "encoder": ("the encoder's text stack (encoder.text_config) rotates q/k of its bidirectional self-attention; "
                "image tokens take ordinary positions in its sequence"),
    "decoder": ("the decoder's merged attention rotates its q and its own keys; the same rotated q also scores the "
                "encoder's outputs, which are not rotated"),
}


def _t5gemma2_stack(view: ConfigView, stack: str) -> dict[str, LayerPositions]:
    sub = view.obj(stack) or ConfigView({}, view.field(stack))
    if stack == "encoder":
        sub = sub.obj("text_config") or ConfigView({}, sub.field("text_config"))
    model = _gemma3(sub, "t5gemma2")
    return {f"{stack} {name}": LayerPositions(f"{stack} {name}", entry.spec, entry.layers, entry.apply,
                                               (T5GEMMA2_NOTES[stack],) + entry.notes)
            for name, entry in model.encodings.items()}


@reader("t5gemma2")
def read_t5gemma2(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    return ModelPositions("t5gemma2", "t5gemma2", {**_t5gemma2_stack(view, "encoder"), **_t5gemma2_stack(view, "decoder")})
