"""Fixed tensor2tensor sinusoids (layout "t2t": sin in the first d // 2 columns, cos after them,
timescales 10000^(-i / (d/2 - 1))) added to the embeddings, in the copies of M2M100's / Pegasus's
modules that tests/golden/model_truth_nonrotary.npz checked (rows at the probe positions, and a
variation with another pad_token_id):

* FSMT (`SinusoidalPositionalEmbedding`, fairseq's): encoder and decoder, token i reads row
  i + pad_token_id + 1, counting only non-padding tokens; the table is also saved (a trainable
  parameter initialised with these values) as {stack}.embed_positions.weight.
* Kosmos-2's text model (`Kosmos2TextSinusoidalPositionalEmbedding`): the same rule, one stack,
  width `embed_dim`; not in the checkpoint.
* Pegasus-X (`PegasusXSinusoidalPositionalEmbedding`): encoder and decoder, positions from 0
  whatever pad_token_id is, computed on the fly; an odd d_model fails in the reference (its cos
  half is one column short), so posenc refuses it.
* TIPSv2's text tower (`Tipsv2SinusoidalPositionalEmbedding`): positions from 0, width
  `hidden_size`, a non-persistent buffer.

Sizes have no default here: a config without them is refused.
"""

from ..encodings import SinusoidalSpec
from ..errors import PosencError
from ..limits import LIMITS
from . import reader
from .absolute import required_int
from .config_keys import padding_idx
from .fields import ConfigView
from .positions import LayerPositions, ModelPositions

PADDING = ("positions count only the non-padding tokens, so left padding does not shift them; padding tokens read "
           "an all-zero row (padding_idx)")


def _dim(view: ConfigView, key: str, *, even: bool = False) -> int:
    dim = required_int(view, key, LIMITS.max_dim)
    if dim < 4:
        raise PosencError(view.field(key), f"must be >= 4 for tensor2tensor sinusoids (the reference divides by "
                          f"{key} // 2 - 1), got {dim}")
    if even and dim % 2:
        raise PosencError(view.field(key), f"must be even: the reference's cos half is one column short for {dim}")
    return dim


def _entry(stack: str, spec: SinusoidalSpec, *notes: str) -> LayerPositions:
    return LayerPositions(stack, spec, (), "add", notes)


def _from_pad(view: ConfigView, family: str) -> tuple[int, str]:
    offset = padding_idx(view, family) + 1
    return offset, f"token i reads row i + pad_token_id + 1 = i + {offset}"


@reader("fsmt")
def read_fsmt(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    offset, rule = _from_pad(view, "FSMT")
    spec = SinusoidalSpec(_dim(view, "d_model"), layout="t2t", offset=offset)
    return ModelPositions("fsmt", "t2t", {stack: _entry(stack, spec, rule, PADDING, (
        f"the checkpoint also stores the table ({stack}.embed_positions.weight, initialised with these values)"))
        for stack in ("encoder", "decoder")})


@reader("kosmos_2_text_model")
def read_kosmos2_text(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    offset, rule = _from_pad(view, "Kosmos-2")
    spec = SinusoidalSpec(_dim(view, "embed_dim"), layout="t2t", offset=offset)
    return ModelPositions("kosmos_2_text_model", "t2t", {"default": _entry(
        "default", spec, f"fixed t2t table (not in the checkpoint); {rule}", PADDING)})


@reader("pegasus_x")
def read_pegasus_x(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    spec = SinusoidalSpec(_dim(view, "d_model", even=True), layout="t2t")
    note = "t2t sinusoids computed on the fly (not in the checkpoint), positions from 0"
    return ModelPositions("pegasus_x", "t2t", {stack: _entry(stack, spec, note) for stack in ("encoder", "decoder")})


@reader("tipsv2_text_model")
def read_tipsv2_text(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    spec = SinusoidalSpec(_dim(view, "hidden_size"), layout="t2t")
    return ModelPositions("tipsv2_text_model", "t2t", {"default": _entry(
        "default", spec, "fixed t2t table (a non-persistent buffer, not in the checkpoint), positions from 0")})
