"""Model-family readers: a model's `config.json` -> `ModelPositions`, one reader per family.

Like transformers' one-modeling-file-per-model: each reader reads its family's own keys with
the defaults of that family's modeling code. `READERS` maps `model_type` to a reader; model
types without one go through the gate (`checked`) and the generic reader, which accepts only
the standard keys, with what the model type's transformers config class fills in
(`class_defaults`). A model type transformers does not know is read by its `architectures`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ..args import json_type
from ..encodings import RopeSpec
from ..errors import PosencError
from .positions import LayerPositions, ModelPositions

#: model_type -> reader(config: dict, strict: bool) -> ModelPositions
READERS: dict[str, Callable[[dict, bool], ModelPositions]] = {}


def reader(*model_types: str):
    """Register a family reader for these `model_type`s."""
    def register(fn):
        for name in model_types:
            READERS[name] = fn
        return fn
    return register


def from_hf_config(config, *, strict: bool = True) -> ModelPositions:
    """Every position encoding the model of this config uses: a `config.json` as a dict, a
    transformers `PretrainedConfig`, a path to a config.json, or a model directory holding one.

    A position-looking key its reader does not understand raises `PosencError` naming it
    (`strict=False` downgrades that to a warning): never a silent default. A model type that
    transformers knows, that no family reader has and that no golden checked is refused
    (`checked.gate`, whatever `strict`), as is each nested language config's. One transformers
    does not know is read as the model type of its `architectures` (Kimi-K2's
    DeepseekV3ForCausalLM: as deepseek_v3, which the answer's `notes` say) or refused, naming both.
    """
    config = config_dict(config)
    if not isinstance(config, dict):
        raise PosencError("config", f"must be a JSON object, got {json_type(config)}")
    model_type = config.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise PosencError("config.model_type", f"must be a string, got {type(model_type).__name__}")
    from . import families  # noqa: F401  (registers every reader)
    from .checked import gate, read_as

    read, note = read_as(config, "config.model_type")
    if read.get("model_type") in READERS:
        model = READERS[read["model_type"]](read, strict)
    else:
        gate(read, "config.model_type")
        model = READERS["__generic__"](read, strict)
    return noted(model, model_type, note)


def noted(model: ModelPositions, model_type, note: str | None) -> ModelPositions:
    """The answer for a config read as another model type (`checked.read_as`): under its own
    model type, the note first."""
    if note is None:
        return model
    return replace(model, model_type=model.model_type if model_type is None else model_type,
                   notes=(note, *model.notes))


def rope_spec_from_hf_config(config: dict, *, strict: bool = True) -> RopeSpec:
    """The one RoPE a HF model uses, from its `config.json` (as a dict): `RopeSpec.from_hf_config`.

    The shortcut for `posenc.from_hf_config(config)` when the model has exactly one RoPE
    layer type; a model with several (Gemma-3, ModernBERT) or none (BLOOM) raises a
    `PosencError` naming the choices: use `posenc.from_hf_config(config)[layer_type].spec`.
    It lives with the readers it calls; RopeSpec.from_hf_config imports it at call time, so
    the spec module never imports the models (which import the specs) at import."""
    model = from_hf_config(config, strict=strict)
    ropes = model.of_kind(RopeSpec.KIND)
    if len(ropes) == 1:
        return next(iter(ropes.values())).spec
    if ropes:
        raise PosencError("layer_type", f"this {model.model_type} model has several RoPE layer types "
                          f"{list(ropes)}; use posenc.from_hf_config(config)[layer_type].spec")
    raise PosencError("config", f"this {model.model_type} model uses no RoPE (it uses {model.kinds()}); "
                      "use posenc.from_hf_config(config)")


def config_dict(config):
    """A dict from what a user has: the dict itself, a PretrainedConfig (`to_dict()`), or a path to
    a config.json or to the model directory holding it."""
    if isinstance(config, (str, os.PathLike)):
        path = Path(config)
        try:  # is_dir too can fail (a name too long for a path: a JSON text passed as one)
            if path.is_dir():
                path = path / "config.json"
            return json.loads(path.read_text())
        except OSError as exc:
            raise PosencError("config", f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise PosencError("config", f"{str(path)!r} is not JSON: {exc}") from None
    if not isinstance(config, dict) and callable(getattr(config, "to_dict", None)):
        return config.to_dict()  # a transformers PretrainedConfig
    return config


__all__ = ["READERS", "LayerPositions", "ModelPositions", "config_dict", "from_hf_config", "reader",
           "rope_spec_from_hf_config"]
