"""Encoder-decoder translation / speech models: absolute positions added to the embeddings
once, at the input of each stack (layer types "encoder" and "decoder", apply "add").

* BART / mBART (`BartLearnedPositionalEmbedding`): learned tables of max_position_embeddings
  + 2 rows; position p reads row p + 2 (the "offset 2 hack" in the modeling code).
* Marian, Pegasus (`MarianSinusoidalPositionalEmbedding.create_weight`, Pegasus's copy): fixed sinusoids, sin in the
  first ceil(d/2) columns and cos after them, frequencies 10000^(-2i/d) (layout "halves"),
  positions from 0. transformers forms the angles in float64 numpy and stores float32.
* M2M100 / NLLB / NLLB-MoE (`M2M100SinusoidalPositionalEmbedding`, NLLB-MoE's copy): tensor2tensor sinusoids (layout
  "t2t", zero column for an odd d_model), positions counted from padding_idx + 1, so token i
  reads row i + pad_token_id + 1 (offset), i counting only non-padding tokens; padding tokens
  read the zero row padding_idx.
  transformers forms the angles in float32.
* XGLM (decoder only, layer type "default"): the same t2t table, but position p reads row p + 2
  whatever pad_token_id is (`XGLMSinusoidalPositionalEmbedding` adds a fixed offset of 2), and
  row pad_token_id is zero: with pad_token_id >= 2 the reference gives position
  pad_token_id - 2 a zero row, which posenc refuses (XGLM checkpoints use 1, where no position
  reads it).
* Whisper: the encoder adds `sinusoids(max_source_positions, d_model)` (t2t, float32 angles;
  stored in the checkpoint too, frozen), the decoder a learned table of max_target_positions.

Tensor names are those of the *ForConditionalGeneration checkpoints (prefix "model."); a bare
*Model checkpoint has them without the prefix.
"""

from ..encodings import LearnedSpec, SinusoidalSpec
from ..errors import PosencError
from ..limits import LIMITS
from . import reader
from .config_keys import aliased_int, padding_idx
from .fields import ConfigView
from .positions import LayerPositions, ModelPositions

TENSOR = "model.{stack}.embed_positions.weight"
FROM_CHECKPOINT = "values come from the checkpoint ({tensor}); posenc publishes them once loaded"


def _pair(model_type: str, family: str, encoder: LayerPositions, decoder: LayerPositions) -> ModelPositions:
    return ModelPositions(model_type, family, {"encoder": encoder, "decoder": decoder})


D_MODEL = ("d_model", "hidden_size")  # the config classes' key and its attribute_map alias


def _d_model(view: ConfigView, default: int) -> int:
    return aliased_int(view, D_MODEL, default, maximum=LIMITS.max_dim)


def _learned(view: ConfigView, stack: str, rows_key: str, rows_default: int, dim: int, offset: int) -> LayerPositions:
    tensor = TENSOR.format(stack=stack)
    spec = LearnedSpec(view.int(rows_key, rows_default, maximum=LIMITS.max_abs_position), dim=dim, tensor=tensor,
                       offset=offset)
    notes = (FROM_CHECKPOINT.format(tensor=tensor),)
    if offset:
        notes += (f"position p reads row p + {offset}",)
    return LayerPositions(stack, spec, (), "add", notes)


def _sinusoidal(stack: str, spec: SinusoidalSpec, notes: tuple[str, ...]) -> LayerPositions:
    return LayerPositions(stack, spec, (), "add", notes)


@reader("bart", "mbart")
def read_bart(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    dim = _d_model(view, 1024)
    return _pair(config["model_type"], "bart",
                 *(_learned(view, stack, "max_position_embeddings", 1024, dim, offset=2)
                   for stack in ("encoder", "decoder")))


@reader("marian", "pegasus")
def read_marian(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    spec = SinusoidalSpec(_d_model(view, 1024), layout="halves")
    # MarianMTModel drops the tables when saving; Pegasus keeps them (frozen, the same values)
    stored = {"marian": "not in the checkpoint", "pegasus": "also stored, frozen, as {tensor}"}[config["model_type"]]
    entries = [_sinusoidal(stack, spec, (f"fixed [sin | cos] table ({stored.format(tensor=TENSOR.format(stack=stack))})"
                                         ", positions from 0",)) for stack in ("encoder", "decoder")]
    return _pair(config["model_type"], "marian", *entries)


def _t2t_dim(view: ConfigView, default: int, *, even: bool = False) -> int:
    """d_model for t2t sinusoids: the reference divides by d_model // 2 - 1 (Whisper's
    sinusoids() also refuses an odd one)."""
    dim, field = _d_model(view, default), view.field(view.first_key(*D_MODEL) or D_MODEL[0])
    if dim < 4:
        raise PosencError(field, f"must be >= 4 for tensor2tensor sinusoids (the reference divides by "
                          f"d_model // 2 - 1), got {dim}")
    if even and dim % 2:
        raise PosencError(field, f"must be even: Whisper's sinusoids() refuses odd channels, got {dim}")
    return dim


@reader("m2m_100", "nllb-moe")
def read_m2m100(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    dim = _t2t_dim(view, 1024)
    pad = padding_idx(view, "M2M100")
    spec = SinusoidalSpec(dim, layout="t2t", offset=pad + 1)
    notes = (f"fixed t2t table (not in the checkpoint); token i reads row i + pad_token_id + 1 = i + {pad + 1}",
             ("padding tokens read an all-zero row (padding_idx); positions count only the non-padding tokens "
              "(create_position_ids_from_input_ids), so left padding does not shift them"))
    return _pair(config["model_type"], "m2m_100", _sinusoidal("encoder", spec, notes),
                 _sinusoidal("decoder", spec, notes))


@reader("xglm")
def read_xglm(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    spec = SinusoidalSpec(_t2t_dim(view, 1024), layout="t2t", offset=2)
    pad = padding_idx(view, "XGLM")
    if pad >= 2:  # a row no SinusoidalSpec has: refused rather than a note (tests/model_truth_nonrotary.py)
        raise PosencError(view.field("pad_token_id"), f"is {pad}: XGLM zeroes row pad_token_id of its table, so "
                          f"position {pad - 2} adds nothing there; posenc's sinusoids cannot say that (XGLM "
                          "checkpoints use 1, which no position reads)")
    notes = ("fixed t2t table (not in the checkpoint); position p reads row p + 2",)
    return ModelPositions.single("xglm", "xglm", spec, 0, apply="add", notes=notes)


@reader("whisper")
def read_whisper(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    dim = _t2t_dim(view, 384, even=True)
    encoder = _sinusoidal("encoder", SinusoidalSpec(dim, layout="t2t"), (
        ("sinusoids(max_source_positions, d_model): fixed, also stored (frozen) in the checkpoint as "
         "model.encoder.embed_positions.weight"),
        f"the encoder always adds all {view.int('max_source_positions', 1500)} rows (30 s of audio)"))
    decoder = _learned(view, "decoder", "max_target_positions", 448, dim, offset=0)
    return _pair("whisper", "whisper", encoder, decoder)
