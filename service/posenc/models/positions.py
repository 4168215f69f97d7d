"""`ModelPositions`: every position encoding one model uses, keyed by the layer type that uses it.

A model is one or more *layer types* (Gemma-3: `sliding_attention` and `full_attention`;
ModernBERT: `local` and `global`; most models: one, `default`). Each layer type has one
validated encoding spec (RoPE, ALiBi, T5 buckets, sinusoidal, or a learned table that lives
in the checkpoint), the indices of the layers that use it, and how attention applies it.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from types import MappingProxyType

from ..errors import PosencError


@dataclass(frozen=True)
class LayerPositions:
    """The encoding one layer type uses.

    `spec` is a RopeSpec, AlibiSpec, SinusoidalSpec, T5BucketSpec or LearnedSpec.
    `layers` are the decoder/encoder layer indices that use it (empty = not per layer, e.g. an
    embedding added once at the input). `apply` says how attention uses it: for RoPE the
    rotation layout ("half" pairs x_i with x_{i+d/2}, "interleaved" pairs x_2i with x_2i+1);
    "bias" (ALiBi, T5), "add" (sinusoidal or learned rows added to the embeddings).
    """

    layer_type: str
    spec: object
    layers: tuple[int, ...] = ()
    apply: str = "half"
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"layer_type": self.layer_type, "kind": self.spec.KIND, "spec": self.spec.to_dict(),
                "layers": list(self.layers), "apply": self.apply, "notes": list(self.notes)}


@dataclass(frozen=True)
class ModelPositions:
    """What `posenc.from_hf_config` returns: the model's encodings by layer type."""

    model_type: str
    reader: str  # the family reader that produced it (its registry key)
    encodings: MappingProxyType = field(repr=False)  # {layer_type: LayerPositions}
    #: other names a layer type answers to in get() (ModernBERT's legacy "global" / "local")
    aliases: MappingProxyType = field(default_factory=dict, repr=False)
    #: the layers that apply no positions (NoPE attention, linear / conv / mamba / recurrent layers);
    #: every layer of a model without positions (Jamba, a Granite-4 hybrid without RoPE), whose
    #: `encodings` are then empty
    without: tuple[int, ...] = ()
    #: what the reading took that a user should know: a model type read through its architecture
    #: (Kimi-K2 as DeepSeek-V3), a value where the config's forms or transformers disagree and which
    #: one posenc took and why (DBRX's base, MiniMax's rotary_dim)
    notes: tuple[str, ...] = ()

    def __post_init__(self):
        if not self.encodings and not self.without:
            raise PosencError("config", f"model type {self.model_type!r} uses no position encoding posenc knows")
        object.__setattr__(self, "encodings", MappingProxyType(dict(self.encodings)))
        object.__setattr__(self, "aliases", MappingProxyType(dict(self.aliases)))

    @classmethod
    def single(cls, model_type: str, reader: str, spec, layers: int, *, apply: str | None = None,
               notes: tuple[str, ...] = ()) -> ModelPositions:
        """A model whose every layer (0..layers-1) uses one encoding, under layer type "default"."""
        entry = LayerPositions("default", spec, tuple(range(layers)), apply or spec.layout, notes)
        return cls(model_type, reader, {"default": entry})

    @classmethod
    def none(cls, model_type: str, reader: str, layers: int) -> ModelPositions:
        """A model none of whose `layers` applies positions: its answer is that it has none."""
        return cls(model_type, reader, {}, without=tuple(range(layers)))

    @property
    def layer_types(self) -> tuple[str, ...]:
        return tuple(self.encodings)

    def __getitem__(self, layer_type: str) -> LayerPositions:
        return self.get(layer_type)

    def get(self, layer_type: str | None = None, *, field_name: str = "layer_type") -> LayerPositions:
        """The entry for `layer_type`; with None, the only one (a PosencError naming the choices if several)."""
        if not self.encodings:
            raise PosencError(field_name, self.no_positions())
        if layer_type is None:
            if len(self.encodings) == 1:
                return next(iter(self.encodings.values()))
            raise PosencError(field_name, f"this {self.model_type} model has several layer types; "
                              f"choose one of {list(self.encodings)}")
        if isinstance(layer_type, str):
            layer_type = self.aliases.get(layer_type, layer_type)
        if not isinstance(layer_type, str) or layer_type not in self.encodings:
            raise PosencError(field_name, f"unknown layer type {layer_type!r} for this {self.model_type} "
                              f"model; choose one of {list(self.encodings)}")
        return self.encodings[layer_type]

    def layer(self, index: int, *, field_name: str = "layer") -> LayerPositions:
        """The entry layer `index` uses (Gemma-3's layer 5: its `full_attention`), as `get` is by layer
        type. A PosencError naming the layers that have positions when layer `index` uses none: a NoPE
        layer, an index no layer type lists, or a model whose encoding is added once at the input."""
        try:
            index = operator.index(index)
        except TypeError:
            raise PosencError(field_name, f"must be a layer index (an integer), got {index!r}") from None
        if not self.encodings:
            raise PosencError(field_name, self.no_positions())
        for entry in self.encodings.values():
            if index in entry.layers:
                return entry
        known = sorted({i for entry in self.encodings.values() for i in entry.layers})
        if not known:
            raise PosencError(field_name, f"this {self.model_type} model's encodings are not per layer (added once "
                              f"at the input); choose a layer type: {list(self.encodings)}")
        if index in self.without:
            raise PosencError(field_name, f"layer {index} of this {self.model_type} model applies no positions "
                              f"(NoPE); layers with positions: {layer_runs(known)}")
        raise PosencError(field_name, f"no layer type of this {self.model_type} model lists layer {index}: it "
                          f"applies no positions, or there is no such layer (layers with positions: "
                          f"{layer_runs(known)})")

    def of_kind(self, kind: str) -> dict[str, LayerPositions]:
        return {name: entry for name, entry in self.encodings.items() if entry.spec.KIND == kind}

    def kinds(self) -> str:
        """What the model uses, for a message: "rope, learned" or "no positions in any layer"."""
        return ", ".join(sorted({e.spec.KIND for e in self.encodings.values()})) or "no positions in any layer"

    def no_positions(self) -> str:
        """The message for a request that needs an encoding from a model that has none."""
        return (f"this {self.model_type} model applies no positions: none of its {len(self.without)} layers "
                "uses a position encoding, so there is nothing to compute for it")

    def to_dict(self) -> dict:
        return {"model_type": self.model_type, "reader": self.reader,
                "layer_types": {name: entry.to_dict() for name, entry in self.encodings.items()},
                "layers_without_positions": list(self.without), "notes": list(self.notes)}


def layer_runs(layers) -> str:
    """Sorted layer indices as runs, as people write them: 0-4, 6-10, 12."""
    runs: list[list[int]] = []
    for i in sorted(layers):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)
