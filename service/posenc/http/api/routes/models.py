"""/v1/models: what a model's config.json says about its positions, and the one spec a route
needs out of it (`layer_spec`: routes that take `hf_config` also take `layer_type` or `layer`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from ....errors import PosencError
from ....models import ModelPositions, from_hf_config
from ..calls import fields_under, read_call
from ..openapi import error_responses, request_body
from ..schemas import Integer, _Strict

router = APIRouter(prefix="/v1/models", tags=["models"])


class ModelPositionsRequest(_Strict):
    hf_config: dict[str, Any] = Field(description="A model's config.json.",
                                      examples=[{"model_type": "llama", "hidden_size": 4096,
                                                 "num_attention_heads": 32, "rope_theta": 500000.0}])
    layer: Integer | None = Field(None, description="Only the layer type this layer index uses (as `posenc positions "
                              "--layer` and `ModelPositions.layer`): layer_types then holds that one; a layer "
                              "that uses none is a 422 naming the layers that do.", examples=[5])


class LayerPositionsResponse(BaseModel):
    layer_type: str = Field(examples=["sliding_attention"])
    kind: str = Field(description="rope, alibi, t5, sinusoidal or learned", examples=["rope"])
    spec: dict[str, Any] = Field(description="The validated spec, as the spec routes and tables take it.")
    layers: list[int] = Field(description="Indices of the layers using it (empty: applied once at the input).")
    apply: str = Field(description="RoPE: half | interleaved; bias (ALiBi, T5); add (sinusoidal, learned).")
    notes: list[str]


class ModelPositionsResponse(BaseModel):
    model_type: str = Field(examples=["gemma3_text"])
    reader: str = Field(description="The family reader that read the config.", examples=["gemma3"])
    layer_types: dict[str, LayerPositionsResponse]
    layers_without_positions: list[int] = Field(
        description="Layers that apply no positions (NoPE attention, linear / conv / mamba layers); every layer "
                    "of a model without positions, whose layer_types is then empty.", examples=[[3, 7, 11]])
    notes: list[str] = Field(description="What the reading took that a caller should know: a model type read "
                                         "through its architecture, a value where the config's forms or "
                                         "transformers disagree and which one was taken, and why.")


def read_model(config) -> ModelPositions:
    with fields_under("hf_config"):
        return from_hf_config(config)


def layer_spec(config, layer_type: str | None, layer: int | None, kind: str):
    """The `kind` spec of the config's model for `layer_type`, or for the layer type layer index
    `layer` uses (the request gave one at most: _Strict.which_source); without either, the model's
    only layer type of that kind (a 422 on `layer_type` naming the choices when it has several)."""
    model = read_model(config)
    if layer_type is not None or layer is not None:
        entry = model.get(layer_type) if layer is None else model.layer(layer)
        if entry.spec.KIND != kind:
            which = "layer_type" if layer is None else "layer"
            raise PosencError(which, f"layer type {entry.layer_type!r} of this {model.model_type} model uses "
                              f"{entry.spec.KIND}, not {kind}; its {kind} layer types: {list(model.of_kind(kind))}")
        return entry.spec
    candidates = model.of_kind(kind)
    if len(candidates) == 1:
        return next(iter(candidates.values())).spec
    if not candidates:
        raise PosencError("hf_config", f"this {model.model_type} model uses no {kind} encoding (it uses "
                          f"{model.kinds()})")
    raise PosencError("layer_type", f"this {model.model_type} model has several {kind} layer types; "
                      f"choose one of {list(candidates)}")


@router.post("/positions", summary="Every position encoding a model uses, by layer type",
             response_model=ModelPositionsResponse, responses=error_responses(400, 406, 413, 415, 422),
             openapi_extra=request_body(ModelPositionsRequest))
async def model_positions(request: Request) -> dict:
    """The `posenc.from_hf_config` summary: per layer type its spec, layers and how attention applies it
    (with `layer`: the one layer type that layer uses)."""
    call = await read_call(request, ModelPositionsRequest)
    model = read_model(call.params.hf_config)
    summary = model.to_dict()
    if call.params.layer is not None:
        chosen = model.layer(call.params.layer).layer_type
        summary["layer_types"] = {chosen: summary["layer_types"][chosen]}
    return summary
