"""Moonshine (modeling_moonshine.py): a speech encoder-decoder whose two stacks both rotate.

One flat config serves both stacks: `encoder_num_hidden_layers` / `decoder_num_hidden_layers`,
`encoder_num_attention_heads` / `decoder_num_attention_heads`, one `rope_parameters` (its
config class defaults partial_rotary_factor to 0.9). Each stack builds its own rotary embedding
from that config, head_dim = hidden_size // heads (or `head_dim`), and rotates the first
int(head_dim * factor) dims of its self-attention's q/k in interleaved pairs (its rotate_half
pairs x_2i with x_2i+1, cos/sin repeated pairwise); cross-attention applies no positions.
The encoder counts its own positions, the audio frames after its conv stem (0, 1, ...); the
decoder's are its token positions.

transformers' MoonshineAttention writes each stack's head counts into the one shared config
while it builds the model (`config.update`), so with different encoder and decoder head counts
the decoder is built with the encoder's and the rotary sizes follow whichever was written last:
posenc refuses such a config rather than guess. Layer types: "encoder" and "decoder".

Moonshine-Streaming (modeling_moonshine_streaming.py): only the decoder rotates (interleaved
pairs, as Moonshine's; its config class's default rope_parameters carry partial_rotary_factor
0.8); the encoder's sliding-window layers apply no positions. Before its cross-attention the
decoder adds a learned table, `pos_emb` (max_position_embeddings rows of the encoder's width),
to the encoder's outputs at their frame indices: layer type "encoder_states" (apply "add").
Its config class ignores a top-level rope_theta / partial_rotary_factor when rope_parameters
is absent (its default dict wins), so posenc refuses those rather than read them, unless they
are the default's own values.
"""

from ..encodings import LearnedSpec
from ..errors import PosencError
from ..limits import LIMITS
from . import reader
from .fields import ConfigView
from .generic import _check_keys, read_mechanisms
from .modeling import Modeling
from .positions import LayerPositions, ModelPositions

MOONSHINE = Modeling(layout="interleaved", default_prf=0.9)
#: MoonshineConfig's defaults for the sizes RoPE depends on
DEFAULTS = {"hidden_size": 288, "encoder_num_hidden_layers": 6, "decoder_num_hidden_layers": 6,
            "encoder_num_attention_heads": 8, "decoder_num_attention_heads": 8, "max_position_embeddings": 512}
NOTES = {"encoder": ("the encoder's self-attention (bidirectional) rotates q/k at its audio frames' indices 0, 1, ... "
                     "(the conv stem's output frames: positions are not an input)"),
         "decoder": "the decoder's self-attention (causal) rotates q/k at the token positions; cross-attention "
                    "applies no positions"}


@reader("moonshine")
def read_moonshine(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    _check_keys(view, strict)
    raw = {**DEFAULTS, **{k: v for k, v in config.items() if v is not None or k not in DEFAULTS}}
    full = ConfigView(raw, view.path)
    heads = {stack: full.int(f"{stack}_num_attention_heads") for stack in ("encoder", "decoder")}
    if heads["encoder"] != heads["decoder"]:
        raise PosencError(view.field("decoder_num_attention_heads"), (
            f"differs from encoder_num_attention_heads ({heads['decoder']} vs {heads['encoder']}): transformers' "
            "MoonshineAttention writes each stack's heads into the one shared config while building, so the "
            "decoder is built with the encoder's and the rotary sizes follow whichever was written last; "
            "posenc will not guess"))
    out = {}
    for stack in ("encoder", "decoder"):
        sub = {k: v for k, v in raw.items() if not k.startswith(("encoder_", "decoder_"))}
        sub.update(num_attention_heads=heads[stack], num_hidden_layers=full.int(f"{stack}_num_hidden_layers"))
        model = read_mechanisms(ConfigView(sub, view.path), "moonshine", MOONSHINE)
        entry = model.encodings["default"]
        out[stack] = LayerPositions(stack, entry.spec, entry.layers, entry.apply, (NOTES[stack],) + entry.notes)
    return ModelPositions("moonshine", "moonshine", out)


STREAMING = Modeling(layout="interleaved")
STREAMING_ROPE = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.8}
STREAMING_TENSOR = "model.decoder.pos_emb.weight"


@reader("moonshine_streaming")
def read_moonshine_streaming(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    _check_keys(view, strict)
    raw = {"hidden_size": 320, "num_attention_heads": 8, "num_hidden_layers": 6, "max_position_embeddings": 4096,
           **{k: v for k, v in config.items() if v is not None}}
    if raw.get("rope_parameters") is None:
        for key in ("rope_theta", "partial_rotary_factor", "rope_scaling"):
            if key in raw and raw[key] != STREAMING_ROPE.get(key):  # the default's own value changes nothing
                raise PosencError(view.field(key), (
                    "without rope_parameters, MoonshineStreamingConfig ignores it (its default rope_parameters, "
                    "theta 10000 and partial_rotary_factor 0.8, win, and a rope_scaling replaces them): posenc will "
                    "not guess which one the checkpoint was trained with; give rope_parameters"))
        raw = {k: v for k, v in raw.items() if k not in ("rope_theta", "partial_rotary_factor")}
        raw["rope_parameters"] = dict(STREAMING_ROPE)
    full = ConfigView(raw, view.path)
    decoder = read_mechanisms(full, "moonshine_streaming", STREAMING).encodings["default"]
    encoder = full.obj("encoder_config") or ConfigView({}, view.field("encoder_config"))
    width = encoder.int("hidden_size", 320, maximum=LIMITS.max_dim)
    table = LearnedSpec(full.int("max_position_embeddings", maximum=LIMITS.max_abs_position), dim=width,
                        tensor=STREAMING_TENSOR)
    return ModelPositions("moonshine_streaming", "moonshine_streaming", {
        "decoder": LayerPositions("decoder", decoder.spec, decoder.layers, decoder.apply, (
            "the decoder's self-attention (causal) rotates q/k at the token positions; cross-attention applies "
            "no positions",) + decoder.notes),
        "encoder_states": LayerPositions("encoder_states", table, (), "add", (
            f"the decoder adds row i of {STREAMING_TENSOR} (from the checkpoint) to the encoder's output frame i "
            "before its cross-attention; the encoder's own layers apply no positions",)),
    })
