"""Decoder / encoder models whose only position encoding is a learned absolute table added to
the token embeddings (layer type "default", apply "add"); the values live in the checkpoint.

* GPT-2, GPTBigCode (`wpe`): n_positions rows (alias max_position_embeddings, default 1024) of
  n_embd (alias hidden_size, 768); GPT-Neo: max_position_embeddings (2048) of hidden_size
  (2048); position p reads row p.
* OPT (`OPTLearnedPositionalEmbedding`): max_position_embeddings (2048) + 2 rows of
  hidden_size (768, not word_embed_proj_dim); position p reads row p + 2, where p counts the
  attended tokens (`cumsum(attention_mask) - 1`).
* BERT (`BertEmbeddings`): max_position_embeddings (512) rows of hidden_size (768), from 0.
* DistilBERT: max_position_embeddings (512) rows of `dim` (alias hidden_size, 768), from 0;
  with `sinusoidal_pos_embds` the table is initialised to interleaved sinusoids instead
  (`create_sinusoidal_embeddings`, float64 numpy angles stored as float32) and saved.
* RoBERTa / XLM-R / CamemBERT (`create_position_ids_from_input_ids`): positions count from
  pad_token_id + 1 (default 1, so offset 2) in a table of max_position_embeddings rows: 514
  rows hold 512 positions.

transformers 5.24 has only absolute BERT-style embeddings: a config asking for another
`position_embedding_type` (relative_key, relative_key_query) would silently run absolute
positions there, so posenc refuses it.
"""

from ..encodings import LearnedSpec, SinusoidalSpec
from ..errors import PosencError
from ..limits import LIMITS
from . import reader
from .config_keys import aliased_int, padding_idx
from .fields import ConfigView
from .positions import ModelPositions

FROM_CHECKPOINT = "values come from the checkpoint ({tensor}); posenc publishes them once loaded"
ROBERTA_TYPES = ("roberta", "xlm-roberta", "camembert")  # one modeling code, base_model_prefix "roberta"


def _table(model_type: str, family: str, spec: LearnedSpec, *notes: str) -> ModelPositions:
    notes = (FROM_CHECKPOINT.format(tensor=spec.tensor),) + notes
    return ModelPositions.single(model_type, family, spec, 0, apply="add", notes=notes)


def _absolute_only(view: ConfigView) -> None:
    kind = view.str("position_embedding_type", "absolute")
    if kind != "absolute":
        raise PosencError(view.field("position_embedding_type"), f"{kind!r} is not supported: transformers 5.24 "
                          "builds only absolute position embeddings and would silently ignore it")


#: GPT-2-style `wpe` tables: model_type -> (its row-count keys, default), (its width keys, default).
WPE_FAMILIES = {
    "gpt2": ((("n_positions", "max_position_embeddings"), 1024), (("n_embd", "hidden_size"), 768)),
    "gpt_bigcode": ((("n_positions", "max_position_embeddings"), 1024), (("n_embd", "hidden_size"), 768)),
    "gpt_neo": ((("max_position_embeddings",), 2048), (("hidden_size",), 2048)),
}


@reader(*WPE_FAMILIES)
def read_wpe(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    (rows_keys, rows), (dim_keys, dim) = WPE_FAMILIES[config["model_type"]]
    spec = LearnedSpec(aliased_int(view, rows_keys, rows), dim=aliased_int(view, dim_keys, dim, maximum=LIMITS.max_dim),
                       tensor="transformer.wpe.weight")
    return _table(config["model_type"], "gpt2", spec, "a bare *Model checkpoint (openai-community/gpt2) names it "
                  "wpe.weight")


@reader("opt")
def read_opt(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    spec = LearnedSpec(view.int("max_position_embeddings", 2048, maximum=LIMITS.max_abs_position),
                       dim=view.int("hidden_size", 768, maximum=LIMITS.max_dim),
                       tensor="model.decoder.embed_positions.weight", offset=2)
    return _table("opt", "opt", spec, ("position p reads row p + 2; p = cumsum(attention_mask) - 1, so left "
                                       "padding does not shift positions and padding tokens read row 1"))


@reader("bert")
def read_bert(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    _absolute_only(view)
    spec = LearnedSpec(view.int("max_position_embeddings", 512, maximum=LIMITS.max_abs_position),
                       dim=view.int("hidden_size", 768, maximum=LIMITS.max_dim),
                       tensor="bert.embeddings.position_embeddings.weight")
    return _table("bert", "bert", spec, "BertModel checkpoints name it embeddings.position_embeddings.weight")


@reader("distilbert")
def read_distilbert(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    rows = view.int("max_position_embeddings", 512, maximum=LIMITS.max_abs_position)
    dim = aliased_int(view, ("dim", "hidden_size"), 768, maximum=LIMITS.max_dim)
    tensor = "distilbert.embeddings.position_embeddings.weight"
    if view.bool("sinusoidal_pos_embds", False):
        return ModelPositions.single("distilbert", "distilbert", SinusoidalSpec(dim, layout="interleaved"), 0,
                                     apply="add", notes=(f"interleaved sinusoids, positions from 0; the checkpoint "
                                                         f"stores the table too ({tensor}): posenc gives the values "
                                                         "it was initialised with",))
    return _table("distilbert", "distilbert", LearnedSpec(rows, dim=dim, tensor=tensor))


@reader(*ROBERTA_TYPES)
def read_roberta(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    _absolute_only(view)
    offset = padding_idx(view, "RoBERTa") + 1
    rows = view.int("max_position_embeddings", 512, maximum=LIMITS.max_abs_position)
    if rows <= offset:
        raise PosencError(view.field("max_position_embeddings"), f"must exceed pad_token_id + 1 = {offset} "
                          f"(positions start there), got {rows}")
    spec = LearnedSpec(rows - offset, dim=view.int("hidden_size", 768, maximum=LIMITS.max_dim),
                       tensor="roberta.embeddings.position_embeddings.weight", offset=offset)
    return _table(config["model_type"], "roberta", spec,
                  (f"token i reads row i + pad_token_id + 1 = i + {offset}; padding tokens read row pad_token_id, "
                   "and positions count only the non-padding tokens, so left padding does not shift them"))
