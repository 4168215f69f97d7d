"""/v1/pick: which positional encoding, with which parameters, for a job (posenc.pick): the answer's
reasons each cite a row of the lab's measurements or a primary source. The same answer as
`posenc pick --json`."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from ....errors import PosencError
from ....pick import GOALS, LATENCIES, TRAINING_BUDGETS, pick
from ....pick.scenario import MAX_CONTEXT
from ..calls import read_call, service_of
from ..openapi import error_responses, request_body
from ..schemas import Integer, _Strict

router = APIRouter(prefix="/v1", tags=["pick"])
#: Cost estimate of one answer (reading a config, a few specs): small, but a posted results file is parsed.
PICK_COST_NS = 2e6


class PickRequest(_Strict):
    target_context: Integer = Field(ge=2, le=MAX_CONTEXT, description="The context length to serve.",
                                    examples=[32768])
    goal: Literal[GOALS] | None = Field(None, description="train a new model or extend a checkpoint (default: "
                                        "extend when hf_config or original_context is given, else train).")
    extrapolate: bool = Field(False, description="The model must work past the length it is trained at.")
    train_context: Integer | None = Field(None, ge=2, le=MAX_CONTEXT,
                                          description="goal train: the length the new model trains at.")
    training_budget: Literal[TRAINING_BUDGETS] | None = Field(
        None, description="none: no training (test-time scaling); fine_tune: a short run; full: (continued) "
        "pre-training. Default: full to train, none to extend.")
    latency: Literal[LATENCIES] = Field("normal", description="tight: per-token latency decides.")
    n_heads: Integer | None = Field(None, ge=1, le=4096, description="Attention heads (ALiBi's slopes).")
    head_dim: Integer | None = Field(None, ge=2, le=65536, description="A new RoPE model's head size (default 128).")
    original_context: Integer | None = Field(None, ge=2, le=MAX_CONTEXT,
                                             description="goal extend without hf_config: the context a RoPE "
                                             "model was trained at.")
    hf_config: dict[str, Any] | None = Field(None, description="goal extend: the model's config.json.")
    results: dict[str, Any] | None = Field(None, description="A `posenc lab` results document to reason from "
                                           "(default: the documented-size run shipped with posenc).")


class PickResponse(BaseModel):
    scenario: dict[str, Any] = Field(description="The question as answered, every default resolved.")
    recommendation: dict[str, Any] = Field(description="scheme, summary, parameters, posenc's spec, config_patch.")
    reasons: list[dict[str, Any]] = Field(description="Each {text, evidence: [a lab row (file, JSON path, value) "
                                                      "or a primary source (title, url, what it says)]}.")
    notes: list[dict[str, Any]] = Field(description="What the evidence does not cover, with its evidence.")
    computed: dict[str, Any] = Field(description="Numbers posenc computes for the recommended RoPE encoding.")
    lab: dict[str, Any] = Field(description="The results file the lab evidence comes from.")


@router.post("/pick", summary="Which encoding and parameters for a job, each reason citing the lab or a paper",
             response_model=PickResponse, responses=error_responses(400, 406, 413, 415, 422),
             openapi_extra=request_body(PickRequest))
async def pick_route(request: Request) -> dict:
    call = await read_call(request, PickRequest)
    return await service_of(request).run(lambda: _answer(call.params), PICK_COST_NS)


def _answer(p: PickRequest) -> dict:
    """posenc.pick's answer; its errors about the model's config named as this route's field, hf_config."""
    try:
        return pick(p.target_context, goal=p.goal, extrapolate=p.extrapolate, train_context=p.train_context,
                    training_budget=p.training_budget, latency=p.latency, n_heads=p.n_heads, head_dim=p.head_dim,
                    original_context=p.original_context, config=p.hf_config, results=p.results).to_dict()
    except PosencError as exc:
        if exc.field == "config" or exc.field.startswith("config."):
            raise PosencError("hf_config" + exc.field[len("config"):], exc.message) from None
        raise
