"""Request and response shapes: what OpenAPI documents and what a JSON body is checked against.

Types (strictly: no bool for a number, no "yes" for a bool) and unknown keys are checked here;
values (ranges, spec consistency) by the library, whose errors name the field too. Optional parameters default to None, meaning "the library's
default", so defaults live in one place. Array fields (positions, x, relative_position)
are parsed straight to numpy, not through these models; they appear here for the docs.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, get_type_hints

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model

from ...encodings.alibi import MAX_BIAS_MAX
from ...encodings.rope import ARRANGEMENTS
from ...errors import PosencError
from ...limits import LIMITS
from ...shm import TableInfo

Dtype = Literal["float32", "float64", "float16", "bfloat16"]
PositionsDtype = Literal["int64", "float64"]
#: posenc.encodings.rope.ARRANGEMENTS: "freq", "cat", "interleave".
Arrangement = Literal[tuple(ARRANGEMENTS)]
#: A table name as posenc.shm.paths.check_name accepts it: 1..64 of [A-Za-z0-9_.-], not ".", no "..".
TABLE_NAME_PATTERN = r"^([A-Za-z0-9_-]|\.[A-Za-z0-9_-])[A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*\.?$"
TableName = Annotated[str, Field(min_length=1, max_length=64, pattern=TABLE_NAME_PATTERN)]
#: ALiBi's alibi_bias_max as the library accepts it (posenc.encodings.alibi.MAX_BIAS_MAX).
AlibiBiasMax = Annotated[float, Field(gt=0, le=MAX_BIAS_MAX)]


def _integral(value):
    """An integral float (4.0) as the int it is: JSON Schema's `integer`, and posenc.args.as_int, take it.
    Within int64, as a JSON integer must be (orjson's limit): 1e300 stays a float, refused."""
    return int(value) if type(value) is float and value.is_integer() and abs(value) < 2.0 ** 63 else value


#: An integer as JSON Schema (and the library) count one: 4 or 4.0, never 4.5 or true (bounds go
#: before the validator, or OpenAPI shows them as unknown keywords).
Integer = Annotated[int, BeforeValidator(_integral)]
#: A number of heads as posenc.encodings.alibi accepts it.
NHeads = Annotated[int, Field(ge=1, le=LIMITS.max_dim), BeforeValidator(_integral)]
#: A query or key length.
Length = Annotated[int, Field(ge=1), BeforeValidator(_integral)]

_POSITIONS = Field(None, description="Positions (integers, or floats for fractional positions). With a binary "
                   "body (.npy, or raw little-endian `positions_dtype` values) the body is the positions. RoPE "
                   "with an M-RoPE spec (mrope_section) also takes [3, n] (temporal, height, width; JSON or .npy).",
                   examples=[[0, 1, 2, 4095]])
_POSITIONS_DTYPE = Field("int64", description="Element type of a raw application/octet-stream body.")
_TABLE = Field(None, description="Name of a shared-memory table to read the rows from (GET /v1/tables).",
               examples=["sin128"])
_SEQ_LEN = Field(None, description="Sequence length for length-dependent scalings (dynamic NTK, LongRoPE); "
                 "default max(positions)+1.")
_ROPE_SPEC = Field(None, description="RoPE spec: head_dim (required), base, partial_rotary_factor, scaling "
                   "(a HF rope_scaling dict), max_position_embeddings, original_max_position_embeddings, "
                   "layout, xpos_scale_base.",
                   examples=[{"head_dim": 128, "base": 500000.0}])
_HF_CONFIG = Field(None, description="Instead of spec: a model's config.json, from which the RoPE spec is read.")
_LAYER_TYPE = Field(None, description="With hf_config: the layer type whose RoPE to use, when the model has "
                    "several (e.g. Gemma-3 sliding_attention / full_attention; see POST /v1/models/positions).")
_LAYER = Field(None, description="With hf_config, instead of layer_type: the layer type this layer index uses "
               "(Gemma-3's layer 5: full_attention).", examples=[5])
#: Fields that choose within a model, so go with the hf_config source only (and one at a time).
_HF_CONFIG_ONLY = ("layer_type", "layer")


_NOT_NULL = {"not": {"type": "null"}}
_NULL = {"type": "null"}


def _document_rules(schema: dict, model: type[_Strict]) -> None:
    """Put the rules the model states in class variables (REQUIRED_ARRAY, SOURCES) into its JSON
    schema, so that OpenAPI says what the service accepts."""
    if model.REQUIRED_ARRAY is not None:
        schema.setdefault("required", []).append(model.REQUIRED_ARRAY)
        field = schema["properties"][model.REQUIRED_ARRAY]
        field["anyOf"] = [option for option in field["anyOf"] if option != _NULL]
        field.pop("default", None)
    if model.SOURCES:
        branches = []
        for source in model.SOURCES:
            others = {name: _NULL for name in model.SOURCES if name != source}
            if source != "hf_config":  # layer_type, layer go with hf_config only
                others.update({name: _NULL for name in _HF_CONFIG_ONLY if name in schema["properties"]})
            branches.append({"required": [source], "properties": {source: _NOT_NULL, **others}})
        schema["oneOf"] = branches
        if all(name in schema["properties"] for name in _HF_CONFIG_ONLY):  # one of them at most
            schema.setdefault("allOf", []).append({"anyOf": [{"properties": {name: _NULL}}
                                                             for name in _HF_CONFIG_ONLY]})
    for name, (other, value) in model.ONLY_WITH.items():  # null unless `other` is `value`
        schema.setdefault("allOf", []).append(
            {"anyOf": [{"required": [other], "properties": {other: {"const": value}}},
                       {"properties": {name: _NULL}}]})


class _Strict(BaseModel):
    """A request's fields (unknown ones refused). REQUIRED_ARRAY names the array field a request
    must carry (in its JSON body, or as its binary body); exactly one of SOURCES must be given (not
    null), and `layer_type` or `layer` (not both) only with the `hf_config` source. The route code
    and the OpenAPI document both read these (read_call and which_source(); _document_rules)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_document_rules)
    REQUIRED_ARRAY: ClassVar[str | None] = None
    SOURCES: ClassVar[tuple[str, ...]] = ()
    #: field -> (other field, value): the library takes the field only when the other has that value.
    ONLY_WITH: ClassVar[dict[str, tuple[str, str]]] = {}

    def which_source(self) -> str:
        """The one of SOURCES given (a 422 naming the last of them otherwise)."""
        given = [name for name in self.SOURCES if getattr(self, name) is not None]
        if len(given) != 1:
            raise PosencError(self.SOURCES[-1], f"give exactly one of {', '.join(self.SOURCES)}" +
                              (f" (got {', '.join(given)})" if given else ""))
        chosen = [name for name in _HF_CONFIG_ONLY if getattr(self, name, None) is not None]
        if chosen and given[0] != "hf_config":
            raise PosencError(chosen[0], "applies to hf_config only")
        if len(chosen) > 1:
            raise PosencError(chosen[-1], f"give {' or '.join(_HF_CONFIG_ONLY)}, not both")
        return given[0]


class SinusoidalRequest(_Strict):
    REQUIRED_ARRAY = "positions"
    SOURCES = ("table", "spec")
    positions: list[float] | float | None = _POSITIONS
    table: TableName | None = _TABLE
    spec: dict[str, Any] | None = Field(
        None, description="Sinusoidal spec: dim (required), base, layout (interleaved|halves|t2t), "
        "min_timescale, max_timescale, scale, target_std, offset.", examples=[{"dim": 128}])
    dtype: Dtype = "float32"
    positions_dtype: PositionsDtype = _POSITIONS_DTYPE


class RopeCosSinRequest(_Strict):
    REQUIRED_ARRAY = "positions"
    SOURCES = ("table", "spec", "hf_config")
    positions: list[float] | list[list[float]] | float | None = _POSITIONS
    table: TableName | None = _TABLE
    spec: dict[str, Any] | None = _ROPE_SPEC
    hf_config: dict[str, Any] | None = _HF_CONFIG
    layer_type: str | None = _LAYER_TYPE
    layer: Integer | None = _LAYER
    seq_len: float | None = _SEQ_LEN
    dtype: Dtype = "float32"
    arrangement: Arrangement = Field(
        "freq", description="How each of cos and sin is laid out in a row [cos | sin]: freq = one column per "
        "frequency (rows [n, 2*n_freq], the table layout); cat = the halves duplicated, as transformers' rotary "
        "modules (rows [n, 4*n_freq] = [HF cos | HF sin]); interleave = each value twice (Cohere).")
    positions_dtype: PositionsDtype = _POSITIONS_DTYPE


class RopeApplyRequest(_Strict):
    REQUIRED_ARRAY = "x"
    SOURCES = ("table", "spec", "hf_config")
    x: list[Any] | None = Field(None, description="q or k, shape [..., n, head_dim]. With an application/x-npy "
                                "body the body is x (float16/32/64); the result has x's dtype.")
    positions: list[float] | list[list[float]] | None = Field(
        None, description="n positions, or [3, n] (temporal, height, width) for an M-RoPE spec (mrope_section); "
        "default offset..offset+n-1. With a binary x body: in the query, as JSON.")
    offset: Integer = Field(0, description="First position when `positions` is not given.")
    table: TableName | None = Field(None, description="Use this RoPE table's spec (and seq_len).")
    spec: dict[str, Any] | None = _ROPE_SPEC
    hf_config: dict[str, Any] | None = _HF_CONFIG
    layer_type: str | None = _LAYER_TYPE
    layer: Integer | None = _LAYER
    layout: Literal["half", "interleaved"] | None = Field(None, description="Default: the spec's layout.")
    seq_len: float | None = _SEQ_LEN
    xpos_role: Literal["q", "k"] = "q"
    xpos_center: float = 0.0
    dtype: Dtype | None = Field(None, description="dtype of a JSON x (default float64).")


class RopeInvFreqRequest(_Strict):
    SOURCES = ("table", "spec", "hf_config")
    table: TableName | None = Field(None, description="Use this RoPE table's spec (and seq_len).")
    spec: dict[str, Any] | None = _ROPE_SPEC
    hf_config: dict[str, Any] | None = _HF_CONFIG
    layer_type: str | None = _LAYER_TYPE
    layer: Integer | None = _LAYER
    seq_len: float | None = Field(None, description="For dynamic/longrope; default: the value at init.")


class AlibiSlopesRequest(_Strict):
    ONLY_WITH = {"alibi_bias_max": ("variant", "mpt")}
    n_heads: NHeads = Field(description="Number of attention heads.", examples=[12])
    variant: Literal["paper", "bloom", "mpt", "falcon", "baichuan"] | None = None
    alibi_bias_max: AlibiBiasMax | None = Field(None, description="mpt only (default 8).")
    dtype: Dtype = "float64"


class AlibiBiasRequest(_Strict):
    ONLY_WITH = {"alibi_bias_max": ("variant", "mpt")}
    n_heads: NHeads = Field(examples=[8])
    q_len: Length = Field(examples=[4])
    k_len: Length | None = Field(None, description="Default q_len.")
    q_offset: Integer | None = None
    k_offset: Integer | None = None
    mode: Literal["causal", "symmetric", "bloom"] | None = None
    gamma: float | list[float] | None = Field(None, description="Multiplies the slopes: one number or one per head.")
    variant: Literal["paper", "bloom", "mpt", "falcon", "baichuan"] | None = None
    alibi_bias_max: AlibiBiasMax | None = Field(None, description="mpt only (default 8).")
    dtype: Dtype = "float32"


class T5BucketsRequest(_Strict):
    REQUIRED_ARRAY = "relative_position"
    relative_position: list[Any] | int | None = Field(
        None, description="key - query positions, any shape (binary body: int64 raw or .npy).",
        examples=[[-200, -3, 0, 3, 200]])
    bidirectional: bool | None = None
    num_buckets: Integer | None = None
    max_distance: Integer | None = None


class RowsRequest(_Strict):
    REQUIRED_ARRAY = "positions"
    positions: list[int] | int | None = Field(None, description="Integer positions in the table's range (binary "
                                              "body: int64 raw or .npy).", examples=[[0, 1, 4095]])
    dtype: Dtype | None = Field(None, description="Output dtype, default the table's; no wider than it.")
    positions_dtype: PositionsDtype = _POSITIONS_DTYPE


class TableCreateRequest(_Strict):
    encoding: dict[str, Any] = Field(description="A sinusoidal or rope spec with its `kind`.",
                                     examples=[{"kind": "sinusoidal", "dim": 64}])
    start: Integer | None = Field(None, description="First position (default 0; a computed table: -max_abs_position).")
    stop: Integer | None = Field(None, examples=[4096], description="One past the last position: required for a "
                             "stored table; a computed table defaults to max_abs_position + 1.")
    dtype: Literal["float32", "float64"] = Field("float32", description="How rows are stored; a computed table's "
                                                 "default output dtype (it computes every dtype).")
    seq_len: float | None = None
    computed: bool = Field(False, description="A named computed encoding: no rows stored, every row computed on "
                           "request for any position in [start, stop), at every door (sinusoidal and rope).")


# --- responses ----------------------------------------------------------------------------------
class ArrayResponse(BaseModel):
    dtype: str = Field(examples=["float32"])
    shape: list[int] = Field(examples=[[2, 4]])
    data: list[Any] | float | int | None = Field(description="Nested lists in C order; NaN/inf are null.")


class InvFreqResponse(ArrayResponse):
    attention_factor: float


class ErrorDetail(BaseModel):
    code: str = Field(examples=["invalid_parameter"])
    message: str
    field: str | None = Field(description="The request field at fault, when there is one.")
    request_id: str | None = Field(description="The request's X-Request-Id (null if it never reached the app).")


class ErrorResponse(BaseModel):
    error: ErrorDetail


#: TableInfo fields the CLI shows but anonymous HTTP clients do not get (process ids of the host).
PRIVATE_TABLE_FIELDS = ("writer_pid",)


def public_table_info(info: TableInfo) -> dict:
    doc = info.to_dict()
    for name in PRIVATE_TABLE_FIELDS:
        doc.pop(name, None)
    return doc


def _table_info_model() -> type[BaseModel]:
    """posenc.shm.TableInfo as a response model (one definition); its shape tuple becomes a JSON array."""
    fields = {name: (hint, ...) for name, hint in get_type_hints(TableInfo).items()
              if name not in PRIVATE_TABLE_FIELDS}
    fields["shape"] = (list[int], Field(description="[rows, width]"))
    return create_model("TableInfo", **fields)


TableInfoResponse = _table_info_model()


class TableListResponse(BaseModel):
    tables: list[TableInfoResponse]


class IndexLink(BaseModel):
    path: str = Field(examples=["/docs"])
    about: str = Field(examples=["API docs: every route with its parameters, tried from the browser"])


class IndexResponse(BaseModel):
    service: str = Field(examples=["posenc"])
    version: str = Field(description="posenc's version")
    links: list[IndexLink] = Field(description="this service's pages and probes")


class HealthResponse(BaseModel):
    status: str = Field(examples=["ok"])
    kernel_path: str = Field(description="native ISA path in use (scalar, avx2, avx512) or 'numba'",
                             examples=["avx2"])
    cpu_features: str = Field(description="CPU features the native dispatcher detected", examples=["sse2 avx avx2 fma"])


class InfoResponse(BaseModel):
    version: str = Field(description="posenc's version")
    python: str
    components: dict[str, str | None] = Field(description="Versions of the libraries results depend on")
    kernel_path: str = Field(examples=["avx2"])
    cpu_features: str
    limits: dict[str, int] = Field(description="The [limits] section in force")
    timeouts_s: dict[str, float]
    require_api_key: bool = Field(description="Whether every route but /healthz and /readyz needs the API key")
    table_management: bool = Field(description="Whether PUT/DELETE /v1/tables is on (POSENC_API_KEY set)")
    tables: list[TableInfoResponse]
    gc_frozen_objects: int = Field(description="Objects alive after start-up that a served worker moved out of the "
                                   "garbage collector's reach (gc.freeze), so no full collection pauses requests")


class ReadyResponse(BaseModel):
    status: Literal["ready", "not ready"]
    missing_tables: list[str]
