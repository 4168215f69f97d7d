"""/v1 routes for each family of the public API: compute from a spec, or read a named table.

A spec request whose rows a published table holds exactly (same encoding and seq_len,
integer positions in range, a dtype no wider than the table's) is answered from shared
memory (a table hit); otherwise the kernels compute it (a miss).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import Response

from .... import api
from ....api.rope import arrange_rows, as_rope_spec, rope_rows_at, rope_table
from ....api.sinusoidal import sinusoidal_table
from ....args import as_positions
from ....dtypes import cast_output, output_dtype
from ....encodings import RopeSpec, SinusoidalSpec
from ....encodings.rope import ARRANGEMENTS, seq_len_for
from ....errors import PosencError
from ....limits import LIMITS
from ..calls import Call, as_array, fields_under, read_call, respond, service_of
from ..openapi import array_responses, request_body
from ..schemas import (
    AlibiBiasRequest,
    AlibiSlopesRequest,
    InvFreqResponse,
    RopeApplyRequest,
    RopeCosSinRequest,
    RopeInvFreqRequest,
    SinusoidalRequest,
    T5BucketsRequest,
)
from .models import layer_spec
from .rows import named_table, rows_response

router = APIRouter(prefix="/v1", tags=["encodings"])


def _route(path: str, model, summary: str, returns=None):
    responses = array_responses(returns) if returns else array_responses()
    return router.post(path, summary=summary, responses=responses, openapi_extra=request_body(model))


def spec_job(service, key, exact: np.ndarray, dtype: np.dtype, compute: Callable[[np.ndarray], np.ndarray],
             width: int, arrangement: str = "freq") -> tuple[Callable[[], np.ndarray], int, bool]:
    """(job, elements, gathered) for a spec's rows at validated positions: a gather from a covering
    table when one exists (gathered), else the kernels; RoPE rows [cos | sin] with each half laid out
    as `arrangement` (`width` is the stored one). (http.prepared answers the plainest requests with
    the same plan functions and the same tables, without this per-request wrapping.)"""
    table = None if key is None else service.tables.covering(key, exact, dtype)
    elements = exact.size * width * ARRANGEMENTS[arrangement]
    if table is not None:
        return (lambda: arrange_rows(table.spec.cast_rows(table.lookup(exact), exact, dtype), arrangement)), \
            elements, True
    return (lambda: arrange_rows(compute(exact), arrangement)), elements, False


def sinusoidal_plan(spec: SinusoidalSpec, dtype: np.dtype):
    """(table key, compute, row width) of a sinusoidal spec request."""
    return spec_key_for(spec, None), (lambda exact: sinusoidal_table(exact, spec, dtype)), spec.dim


def rope_plan(spec: RopeSpec, seq_len, dtype: np.dtype):
    """(table key, compute, row width) of a 1-D RoPE cos/sin spec request. The frequencies follow
    max(positions) + 1 only for a length-dependent spec without seq_len; otherwise they are fixed
    here (seq_len checked once), and a call computes rows only."""
    if spec.length_dependent and seq_len is None:
        compute = lambda exact: rope_table(exact, spec, seq_len=None, dtype=dtype)
    else:
        at = seq_len_for(None, seq_len) if seq_len is not None else None
        at = at if spec.length_dependent else None  # checked, then unused: init frequencies
        compute = rope_rows_at(spec, at, dtype)  # rope_table_at's rows function, bound once
    return spec_key_for(spec, seq_len), compute, 2 * spec.n_freq


async def _from_spec_or_table(request: Request, call: Call, plan, positions, dtype: np.dtype,
                              arrangement: str = "freq") -> Response:
    """Rows for a spec (see spec_job). The hit or miss is counted once the answer is ready (a
    request that fails is retried by FastAPI: see fastcompute)."""
    service = service_of(request)
    key, compute, width = plan
    job, elements, gathered = spec_job(service, key, as_positions(positions), dtype, compute, width, arrangement)
    response = await respond(request, call.media, job, elements, gathered=gathered)
    service.metrics.table(hit=gathered)
    return response


async def _rope_spec(request: Request, params) -> tuple[RopeSpec, float | None]:
    """The RoPE spec (and default seq_len) from exactly one of table, spec, hf_config."""
    source = params.which_source()
    if source == "table":
        table = await named_table(request, params.table, "rope")
        return table.spec.encoding, table.spec.seq_len
    if source == "hf_config":
        return service_of(request).specs(layer_spec, params.hf_config, params.layer_type, params.layer,
                                         "rope"), None
    return service_of(request).specs(rope_spec_of, params.spec), None


def rope_spec_of(doc) -> RopeSpec:
    with fields_under("spec"):
        return as_rope_spec(doc)


def sinusoidal_spec_of(doc) -> SinusoidalSpec:
    with fields_under("spec"):
        return SinusoidalSpec.from_dict(doc)


@_route("/sinusoidal", SinusoidalRequest, "Sinusoidal encodings for positions")
async def sinusoidal(request: Request) -> Response:
    """Rows [n, dim] for a sinusoidal `spec`, or read from a sinusoidal `table`."""
    call = await read_call(request, SinusoidalRequest)
    params, dtype = call.params, output_dtype(call.params.dtype)
    positions = call.arrays["positions"]
    if params.which_source() == "table":
        table = await named_table(request, params.table, "sinusoidal")
        return await rows_response(request, call.media, table, positions, dtype)
    spec = service_of(request).specs(sinusoidal_spec_of, params.spec)
    return await _from_spec_or_table(request, call, sinusoidal_plan(spec, dtype), positions, dtype)


def spec_key_for(encoding, seq_len):
    """The table-matching key of a request, or None when no table can stand in for it
    (length-dependent RoPE without seq_len: its frequencies follow max(positions))."""
    if isinstance(encoding, RopeSpec) and encoding.length_dependent and seq_len is None:
        return None
    return encoding.canonical_json, seq_len


@_route("/rope/cos_sin", RopeCosSinRequest, "RoPE cos/sin rows [cos | sin] for positions")
async def rope_cos_sin(request: Request) -> Response:
    """Rows [cos | sin], attention factor applied: with `arrangement` "freq" (the default) cos(p*w_0..)
    then sin(p*w_0..), [n, 2*n_freq] (the table layout); "cat" / "interleave" lay each half out as
    posenc.rope_cos_sin does ([n, 4*n_freq])."""
    call = await read_call(request, RopeCosSinRequest)
    params, dtype = call.params, output_dtype(call.params.dtype)
    positions = call.arrays["positions"]
    mrope = np.ndim(positions) == 2
    arrangement = params.arrangement
    if params.which_source() == "table" and not mrope:
        table = await named_table(request, params.table, "rope")
        built = table.spec.seq_len
        if params.seq_len is not None and params.seq_len != built:
            raise PosencError("seq_len", f"table {params.table!r} was built without a seq_len (frequencies at init); "
                              "leave seq_len out" if built is None else
                              f"table {params.table!r} was built for seq_len {built:g}")
        return await rows_response(request, call.media, table, positions, dtype, arrangement)
    spec, table_seq_len = await _rope_spec(request, params)
    if mrope:  # [3, n] (temporal, height, width): angles per axis, in no table row (a table lends its spec)
        seq_len = table_seq_len if params.seq_len is None else params.seq_len
        return await respond(request, call.media, lambda: mrope_rows(positions, spec, seq_len, dtype, arrangement),
                             positions.size // 3 * 2 * spec.n_freq * ARRANGEMENTS[arrangement])
    return await _from_spec_or_table(request, call, rope_plan(spec, params.seq_len, dtype), positions, dtype,
                                     arrangement)


def mrope_rows(positions, spec: RopeSpec, seq_len, dtype, arrangement: str = "freq") -> np.ndarray:
    """[cos | sin] for M-RoPE positions [3, n] (temporal, height, width): the layout of 1-D rows,
    each frequency chunk's angles taken from its axis (spec.mrope_section), each half laid out as
    `arrangement`."""
    cos, sin = api.rope_cos_sin(positions, spec, seq_len=seq_len, dtype=dtype, arrangement=arrangement)
    return np.concatenate((cos, sin), axis=1)


@_route("/rope/apply", RopeApplyRequest, "Rotate q or k by RoPE")
async def rope_apply(request: Request) -> Response:
    """x [..., n, head_dim] rotated by the positions' angles; same shape and dtype as x."""
    call = await read_call(request, RopeApplyRequest)
    params = call.params
    x = call.arrays["x"]
    if not isinstance(x, np.ndarray):  # a JSON x (any JSON value); a binary body's x is an array
        dtype = output_dtype(params.dtype or "float64", "dtype")
        x = as_array(x, "x", LIMITS.max_output_bytes // dtype.itemsize, dtype)
    elif params.dtype is not None:
        raise PosencError("dtype", "applies to a JSON x only (a binary x carries its own dtype)")
    spec, table_seq_len = await _rope_spec(request, params)
    seq_len = table_seq_len if params.seq_len is None else params.seq_len
    limit = service_of(request).config.limits.max_positions
    positions = call.arrays.get("positions", params.positions)  # the body's, or the query's with a binary x
    if positions is None:
        n = x.shape[-2] if x.ndim >= 2 else 0
        positions = range(params.offset, params.offset + n)
    positions = as_array(positions, "positions", limit)
    return await respond(request, call.media,
                         lambda: api.rope_apply(x, positions, spec, layout=params.layout, seq_len=seq_len,
                                                xpos_role=params.xpos_role, xpos_center=params.xpos_center),
                         int(x.size))


@_route("/rope/inv_freq", RopeInvFreqRequest, "RoPE inverse frequencies and attention factor",
        returns=InvFreqResponse)
async def rope_inv_freq(request: Request) -> Response:
    """float64 [n_freq]; the attention factor is a JSON key or the X-Posenc-Attention-Factor header."""
    call = await read_call(request, RopeInvFreqRequest)
    spec, table_seq_len = await _rope_spec(request, call.params)
    seq_len = table_seq_len if call.params.seq_len is None else call.params.seq_len
    inv, attention = api.rope_inv_freq(spec, seq_len=seq_len)
    return await respond(request, call.media, lambda: inv, inv.size, gathered=True, extra={"attention_factor": attention})


@_route("/alibi/slopes", AlibiSlopesRequest, "ALiBi slopes per head")
async def alibi_slopes(request: Request) -> Response:
    """[n_heads] in the reference's head order (float64 unless dtype says otherwise)."""
    call = await read_call(request, AlibiSlopesRequest)
    params = call.params
    dtype = output_dtype(params.dtype)
    options = params.model_dump(exclude_none=True, exclude={"n_heads", "dtype"})
    return await respond(request, call.media, lambda: cast_output(api.alibi_slopes(params.n_heads, **options), dtype),
                         1)


@_route("/alibi/bias", AlibiBiasRequest, "ALiBi bias block [n_heads, q_len, k_len]")
async def alibi_bias(request: Request) -> Response:
    """Queries q_offset.., keys k_offset..; causal blocks hold -inf above the diagonal (null in JSON)."""
    call = await read_call(request, AlibiBiasRequest)
    params = call.params
    options = params.model_dump(exclude_none=True, exclude={"n_heads", "q_len", "k_len"})
    elements = max(params.n_heads, 0) * max(params.q_len, 0) * max(params.k_len or params.q_len, 0)
    return await respond(request, call.media,
                         lambda: api.alibi_bias(params.n_heads, params.q_len, params.k_len, **options), elements)


@_route("/t5/buckets", T5BucketsRequest, "T5 relative-position buckets")
async def t5_buckets(request: Request) -> Response:
    """int64 buckets, same shape as relative_position (key - query)."""
    call = await read_call(request, T5BucketsRequest)
    rel = call.arrays["relative_position"]
    options = call.params.model_dump(exclude_none=True)
    return await respond(request, call.media, lambda: api.t5_relative_position_bucket(rel, **options), rel.size)

