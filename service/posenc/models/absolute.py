"""Learned absolute position tables of the standard kinds, for the model types whose modeling
code builds one the way BERT, RoBERTa, CLIP's text tower or BART does (layer type "default",
or "encoder" / "decoder" for an encoder-decoder; apply "add"). The values live in the
checkpoint; posenc names the tensor and which row each position reads.

Each entry was checked against what transformers 5.24 itself reads (tests/golden/
generate_nonrotary.py records the table and the rows a tiny model of each type reads, and a
variation with another pad_token_id shows whether an offset follows it):

* `Table(offset=0)`: position p reads row p of a `max_position_embeddings`-row table (BERT's
  `embeddings.position_embeddings`, CLIP's `embeddings.position_embedding`);
* `PAD_PLUS_ONE`: RoBERTa's `create_position_ids_from_input_ids`: token i reads row
  i + pad_token_id + 1 of the max_position_embeddings rows (positions count only non-padding
  tokens, padding reads row pad_token_id);
* `Table(offset=2, extra_rows=2)`: a table of max_position_embeddings + 2 rows read from row 2
  whatever pad_token_id is (BART's copies, Nyströmformer's, BioGPT's);

Each table's width key is the one the modeling code passes to `nn.Embedding` (ALBERT and
ELECTRA: `embedding_size`; RemBERT: `input_embedding_size`). Sizes have no default here: a
config without them is refused (transformers always saves them), so posenc never guesses a
config class's default. Keys that switch the table off or to another mechanism (DeBERTa's
`relative_attention`, TAPAS's per-cell positions, a non-"absolute" `position_embedding_type`,
XLM's `sinusoidal_embeddings`) are refused naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..encodings import LearnedSpec
from ..errors import PosencError
from ..limits import LIMITS
from . import reader
from .config_keys import padding_idx
from .fields import ConfigView
from .positions import LayerPositions, ModelPositions

PAD_PLUS_ONE = -1  # the offset is pad_token_id + 1
FROM_CHECKPOINT = ("values come from the checkpoint ({tensor}, as a bare model names it; a head model's checkpoint "
                   "may prefix it); posenc publishes them once loaded")


@dataclass(frozen=True)
class Table:
    tensor: str
    dim: str | tuple[str, ...] = "hidden_size"  # the config key nn.Embedding's width comes from (the first present)
    rows: str = "max_position_embeddings"
    offset: int = 0  # or PAD_PLUS_ONE
    extra_rows: int = 0  # rows beyond config[rows]


#: (key, the value posenc answers for, the config class's value when absent): anything else is another mechanism
Guard = tuple[str, object, object]
BERT = Table("embeddings.position_embeddings.weight")
CLIP = Table("embeddings.position_embedding.weight")
ROBERTA = Table("embeddings.position_embeddings.weight", offset=PAD_PLUS_ONE)
PLUS_TWO = Table("embeddings.position_embeddings.weight", offset=2, extra_rows=2)
ABSOLUTE: Guard = ("position_embedding_type", "absolute", "absolute")

#: model_type -> ({stack: Table}, guards)
TABLES: dict[str, tuple[dict[str, Table], tuple[Guard, ...]]] = {
    **{t: ({"default": BERT}, (ABSOLUTE,)) for t in (
        "align_text_model", "bert-generation", "big_bird", "chinese_clip_text_model", "ernie", "flava_text_model",
        "fnet", "instructblip_qformer", "instructblipvideo_qformer", "megatron-bert", "mobilebert", "roc_bert",
        "splinter")},
    # the text tokens' table; GIT's image tokens (its vision tower's patch table) and VisualBERT's
    # visual embeddings (visual_position_embeddings, from image_text_alignment) are not text positions
    **{t: ({"default": BERT}, ()) for t in ("git", "visual_bert")},
    **{t: ({"default": Table(BERT.tensor, dim="embedding_size")}, (ABSOLUTE,)) for t in (
        "albert", "convbert", "electra", "squeezebert")},
    "rembert": ({"default": Table(BERT.tensor, dim="input_embedding_size")}, (ABSOLUTE,)),
    # BlipTextModel inside BlipTextLMHeadModel (`bert`), inside BLIP's text_decoder
    "blip_text_model": ({"default": Table("bert." + BERT.tensor)}, (ABSOLUTE,)),
    **{t: ({"default": Table(BERT.tensor, dim=("embedding_size", "hidden_size"))},  # getattr(config, "embedding_size", hidden_size)
           (ABSOLUTE, ("relative_attention", False, False), ("position_biased_input", True, True)))
       for t in ("deberta", "deberta-v2")},
    "tapas": ({"default": BERT}, (ABSOLUTE, ("reset_position_index_per_cell", False, True))),
    **{t: ({"default": CLIP}, ()) for t in (
        "clip_text_model", "clipseg_text_model", "metaclip_2_text_model", "siglip_text_model", "siglip2_text_model",
        "xclip_text_model")},
    **{t: ({"default": Table("text_model." + CLIP.tensor)}, ()) for t in (
        "groupvit_text_model", "owlv2_text_model", "owlvit_text_model")},
    **{t: ({"default": ROBERTA}, (ABSOLUTE,)) for t in (
        "altclip_text_model", "bridgetower_text_model", "clap_text_model", "data2vec-text", "luke",
        "roberta-prelayernorm", "xlm-roberta-xl", "longformer", "markuplm", "xmod")},
    **{t: ({"default": PLUS_TWO}, (ABSOLUTE,)) for t in ("mra", "nystromformer", "yoso")},
    "biogpt": ({"default": Table("embed_positions.weight", offset=2, extra_rows=2)}, ()),
    # TrOCRForCausalLM's decoder (a VisionEncoderDecoder checkpoint prefixes decoder.)
    "trocr": ({"default": Table("model.decoder.embed_positions.weight", dim=("d_model", "hidden_size"), offset=2,
                                extra_rows=2)}, (("use_learned_position_embeddings", True, True),)),
    **{t: ({"default": Table("position_embeddings.weight", dim="emb_dim")}, (("sinusoidal_embeddings", False, False),))
       for t in ("xlm", "flaubert")},
    **{t: ({s: Table(f"{s}.embed_positions.weight", dim="d_model", offset=2, extra_rows=2)
            for s in ("encoder", "decoder")}, ()) for t in ("mvp", "plbart")},
    **{t: ({s: Table(f"{s}.embed_positions.weight", dim="d_model") for s in ("encoder", "decoder")}, ())
       for t in ("blenderbot", "blenderbot-small", "bigbird_pegasus")},
    "led": ({"encoder": Table("encoder.embed_positions.weight", dim="d_model", rows="max_encoder_position_embeddings"),
             "decoder": Table("decoder.embed_positions.weight", dim="d_model", rows="max_decoder_position_embeddings")},
            ()),
}


def required_int(view: ConfigView, key: str, maximum: int) -> int:
    value = view.int(key, None, maximum=maximum)
    if value is None:
        raise PosencError(view.field(key), f"is missing: the {view.raw.get('model_type')} position table's size "
                          "comes from it, and posenc does not guess a config class's default")
    return value


def _guard(view: ConfigView, guard: Guard) -> None:
    key, wanted, default = guard
    value = view.raw[key] if view.has(key) else default  # an explicit null: the class's default
    if value != wanted:
        raise PosencError(view.field(key), f"is {value!r}: this {view.raw.get('model_type')} model then uses "
                          f"another position mechanism than the learned absolute table posenc reads "
                          f"({key} = {wanted!r}); posenc will not guess it")


def table_entry(view: ConfigView, stack: str, table: Table) -> LayerPositions:
    rows = required_int(view, table.rows, LIMITS.max_abs_position) + table.extra_rows
    offset = padding_idx(view, view.raw.get("model_type")) + 1 if table.offset == PAD_PLUS_ONE else table.offset
    if rows <= offset:
        raise PosencError(view.field(table.rows), f"gives {rows} rows, but positions start at row {offset}")
    dim_keys = (table.dim,) if isinstance(table.dim, str) else table.dim
    dim = required_int(view, view.first_key(*dim_keys) or dim_keys[-1], LIMITS.max_dim)
    spec = LearnedSpec(rows - offset, dim=dim, tensor=table.tensor, offset=offset)
    notes = (FROM_CHECKPOINT.format(tensor=table.tensor),)
    if table.offset == PAD_PLUS_ONE:
        notes += (f"token i reads row i + pad_token_id + 1 = i + {offset}; padding tokens read row pad_token_id, and "
                  "positions count only the non-padding tokens, so left padding does not shift them",)
    elif offset:
        notes += (f"position p reads row p + {offset}",)
    return LayerPositions(stack, spec, (), "add", notes)


@reader(*TABLES)
def read_absolute(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    stacks, guards = TABLES[config["model_type"]]
    for guard in guards:
        _guard(view, guard)
    return ModelPositions(config["model_type"], "absolute",
                          {stack: table_entry(view, stack, table) for stack, table in stacks.items()})
