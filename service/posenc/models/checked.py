"""The gate of `from_hf_config`: a model type transformers knows is answered only where a golden
has checked it.

Where no family reader has a model type, the generic reader reads mechanisms wherever a config
uses them, which is right only when the model applies them the way those keys say: a vision
tower's 2-D rotary, a codec's, or a hybrid's layer pattern read as a Llama layout would be
silently wrong. checked.json (written by tests/golden/generate_models.py from the goldens) lists
every model type of the transformers release the goldens were taken from, and for each whether
a golden checked it (`golden`: judged / family / wrapper, or nonrotary: a non-rotary model type
the non-rotary truth golden found answered exactly) or not (`unchecked`), and what the
generator saw of it: its kinds of positions, its inputs when they are not text, why it could not
be built. An unchecked one is refused, saying so (`why`).

A model type transformers does not know (a custom or remote-code model: Kimi-K2's `kimi_k2`) is
not in the record. It is read by its `architectures` (`read_as`): the record maps every model
class of transformers' auto mappings to the model type whose config class builds it, and a config
naming one (Kimi-K2's `DeepseekV3ForCausalLM`) is read as that model type, gate and all, with a
note saying so; one naming none is refused, naming its model type and architectures. Nothing
unknown reaches the generic reader, whose reading is right only for the families whose goldens
checked it. A config that names neither a model type nor architectures describes a RoPE by its
keys, not a model, and is read as such.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from ..errors import PosencError

RECORD = Path(__file__).with_name("checked.json")


@cache
def record() -> dict:
    """checked.json, read once on the first config that needs it (`import posenc` stays light)."""
    return json.loads(RECORD.read_text())


def gate(config: dict, field: str) -> None:
    """Raise `PosencError(field)` (the config's `model_type` field) when transformers knows this
    config's model type and no golden checked it, or when it is a wrapper (a model type without
    positions of its own) and the config nests no language config. Call it only for model types
    without a family reader (those are hand-verified)."""
    from .generic import NESTED

    model_type = config.get("model_type")
    entry = record()["model_types"].get(model_type) if isinstance(model_type, str) else None
    if entry is None:
        return
    version = record()["transformers"]
    if entry["golden"] == "unchecked":
        raise PosencError(field, f"posenc has not checked model type {model_type!r} against transformers {version}: "
                          f"it is {why(entry)}; posenc will not guess its positions")
    if entry["golden"] == "wrapper" and not any(isinstance(config.get(key), dict) for key in NESTED):
        raise PosencError(field, f"model type {model_type!r} has no positions of its own in transformers {version}: "
                          f"posenc reads its language config ({', '.join(NESTED)}), which this config lacks")


def read_as(config: dict, field: str) -> tuple[dict, str | None]:
    """(the config to read, a note) for a config whose model type transformers does not know: the
    same config under the model type of the first of its `architectures` transformers has, and the
    note saying so; a PosencError(field) naming both when it has none. A known model type, or a
    config naming neither, is read as it is (no note)."""
    from . import READERS

    model_type, names = config.get("model_type"), config.get("architectures")
    if model_type in READERS or model_type in record()["model_types"] or (model_type is None and names is None):
        return config, None
    version, classes = record()["transformers"], record()["architectures"]
    listed = names if isinstance(names, list) else [names] if names is not None else []
    found = next(((name, classes[name]) for name in listed if isinstance(name, str) and name in classes), None)
    what = f"model type {model_type!r}" if model_type is not None else "a config without a model_type"
    if found is None:
        raise PosencError(field, f"{what} is not one transformers {version} knows, and its architectures "
                          f"({', '.join(map(repr, listed)) or 'none given'}) name no transformers model class: "
                          "posenc reads a model only as a family whose goldens checked it, and will not guess "
                          "which this is (give the model_type of the transformers family whose modeling code "
                          "it runs)")
    name, known = found
    return {**config, "model_type": known}, (
        f"{what} is not one transformers {version} knows: read as {known!r}, the model type whose modeling code "
        f"defines its architecture {name}")


def positionless(model_type) -> bool:
    """Whether transformers' model of this type applies no positions in any layer, as a golden saw:
    its modeling code has no position module and its built model's output did not change with the
    position ids (tests/golden/generate_models.py `run_positionless`)."""
    entry = record()["model_types"].get(model_type) if isinstance(model_type, str) else None
    return entry is not None and entry["golden"] == "judged" and not entry["positions"]


def why(entry: dict) -> str:
    """Why no golden checked a model type, naming its kind of positions: "an image encoder, whose
    positions index image patches, not text tokens (its modeling file has rotary positions); the
    truth generator could not build it from its default config (TypeError: ...)"."""
    kinds = " and ".join(entry["positions"])
    inputs = entry.get("inputs")
    if inputs:
        units = "image patches" if {"image", "video"} & set(inputs) else "audio frames" if "audio" in inputs else \
            f"{'/'.join(inputs)} steps"
        article = "an" if inputs[0][0] in "aeiou" else "a"
        subject = (f"{article} {'/'.join(inputs)} encoder, whose positions index {units}, not text tokens "
                   f"(its modeling file has {kinds} positions)")
    elif kinds:
        subject = f"a model with {kinds} positions"
    else:
        subject = ("a model whose modeling code has none of the position modules the truth generator looks for "
                   "(rotary, ALiBi, relative attention bias, sinusoidal, learned)")
    if entry.get("config_error"):
        return f"{subject}; its config class cannot be built with its defaults ({entry['config_error']})"
    if entry.get("failure"):
        return f"{subject}; the truth generator could not build it from its default config ({entry['failure']})"
    if "rotary" in entry["positions"]:
        return (f"{subject}; the truth generator does not enumerate it (it enumerates model types whose own "
                "modeling file defines a *RotaryEmbedding class)")
    if kinds:
        return f"{subject}; no golden covers them"
    return f"{subject}, so nothing says which positions it uses"
