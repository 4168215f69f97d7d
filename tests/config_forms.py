"""A config's forms (the config.json dict, transformers' config object built from it, and that
object's `to_dict()`) and what posenc.from_hf_config answers for each, compared as what the
model computes: per layer, the encoding's kind, spec and how attention applies it, and the
layers without positions (layer-type names and notes left out: a nested rope dict names its
layer types where a flat one says "default", the same positions either way).

Needs transformers (the tests that use it skip without it)."""

from __future__ import annotations

import copy
import json
import warnings

import posenc
from posenc.models.checked import read_as

#: keys a config.json carries that no config class takes as a keyword (its model type is the class's own)
NOT_KEYWORDS = ("model_type", "transformers_version")


def answer(config) -> tuple:
    """("refused", field, message) or ("answered", {layer: (kind, spec, apply)}, layers without positions)."""
    try:
        model = posenc.from_hf_config(config)
    except posenc.PosencError as exc:
        return ("refused", exc.field, exc.message)
    per_layer = {}
    for entry in model.encodings.values():
        for layer in entry.layers or (entry.layer_type,):  # an entry applied once at the input: by its name
            per_layer[layer] = (entry.spec.KIND, json.dumps(entry.spec.to_dict(), sort_keys=True), entry.apply)
    return ("answered", per_layer, tuple(model.without))


def config_object(raw: dict):
    """transformers' config object built from a config.json dict, as from_pretrained builds it: the
    class of its model type (of its architecture's, for a model type transformers does not know)."""
    from transformers import CONFIG_MAPPING

    known, _ = read_as(raw, "config.model_type")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CONFIG_MAPPING[known["model_type"]](**{k: v for k, v in copy.deepcopy(raw).items()
                                                        if k not in NOT_KEYWORDS})


def plain(config_dict: dict) -> dict:
    """A to_dict() as JSON gives it back (torch dtypes and other objects as their strings)."""
    return json.loads(json.dumps(config_dict, default=str))


def derivation_refused(result: tuple) -> bool:
    """Whether an answer is the refusal of a config leaving out a key its config class derives in a
    way posenc does not mirror (class_defaults): the one refusal a config.json may get where the
    to_dict() form, which carries the key, is answered."""
    return result[0] == "refused" and "posenc does not mirror" in result[2]
