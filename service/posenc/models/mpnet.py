"""MPNet (modeling_mpnet.py): a RoBERTa-style learned table added to the embeddings and a T5-style
relative attention bias shared by every layer.

* `MPNetEmbeddings`: token i reads row i + 2 of `embeddings.position_embeddings`
  (max_position_embeddings rows of hidden_size), counting only non-padding tokens (layer type
  "default", apply "add"). Its padding_idx is 1 whatever pad_token_id says (the golden's
  pad_token_id variation caught a reading that followed pad_token_id);
* `MPNetEncoder.compute_position_bias`: one [relative_attention_num_buckets, num_attention_heads]
  table, `encoder.relative_attention_bias`, indexed by T5's bidirectional bucket of key - query
  with max_distance fixed at 128 (the modeling code passes no other), added to every layer's
  scores (layer type "relative", apply "bias"). Its positions are the plain token indices
  (padding not skipped), unlike the table's.

Checked by tests/golden/model_truth_nonrotary.npz (rows read, buckets per query / key pair).
Sizes have no default here: a config without them is refused.
"""

from ..encodings import T5BucketSpec
from . import reader
from .absolute import Table, required_int, table_entry
from .config_keys import renamed
from .fields import MAX_LAYERS, ConfigView
from .positions import LayerPositions, ModelPositions

MAX_DISTANCE = 128  # relative_position_bucket's default, which MPNet never overrides
TENSOR = "encoder.relative_attention_bias.weight"
#: padding_idx = 1 in MPNetEmbeddings, not config.pad_token_id
TABLE = Table("embeddings.position_embeddings.weight", offset=2)


@reader("mpnet")
def read_mpnet(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    layers = required_int(view, "num_hidden_layers", MAX_LAYERS)
    with renamed({"num_buckets": view.field("relative_attention_num_buckets")}):
        spec = T5BucketSpec(required_int(view, "relative_attention_num_buckets", 10**6), max_distance=MAX_DISTANCE,
                            bidirectional=True)
    bias = LayerPositions("relative", spec, tuple(range(layers)), "bias", (
        f"bias = {TENSOR}[bucket(key - query)] ([num_buckets, heads], from the checkpoint), computed once and "
        "added in every layer; bidirectional, max_distance 128 (fixed in the modeling code)",
        "the bias counts plain token indices, padding included; the table's positions skip padding"))
    return ModelPositions("mpnet", "mpnet", {"default": table_entry(view, "default", TABLE), "relative": bias})
