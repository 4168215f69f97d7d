"""The reader for model types without a family reader: standard RoPE keys only (for now the
pre-existing `encodings.hf_config` reading; the family readers replace it model by model)."""

from __future__ import annotations

from ..encodings import RopeSpec
from ..encodings.hf_config import rope_spec_kwargs
from . import reader
from .positions import LayerPositions, ModelPositions


@reader("__generic__")
def read_generic(config: dict, strict: bool) -> ModelPositions:
    kwargs = rope_spec_kwargs(config)
    spec = RopeSpec(**kwargs)
    layers = config.get("num_hidden_layers")
    indices = tuple(range(layers)) if isinstance(layers, int) and not isinstance(layers, bool) and layers > 0 else ()
    entry = LayerPositions("default", spec, indices, apply=spec.layout)
    return ModelPositions(str(config.get("model_type")), "__generic__", {"default": entry})
