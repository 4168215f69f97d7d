"""Typed reads of `config.json` fields, each error naming the field (`config.rotary_dim`).

A config is untrusted JSON: any key may hold any JSON value (string, list, object, bool,
null, 0, -1, 1e308). Readers never index or convert a raw value themselves; they ask a
`ConfigView`, which either returns a clean Python value or raises `PosencError` with the
dotted path of the key (`config.text_config.rope_parameters.factor`).
"""

from __future__ import annotations

import math

from ..args import as_float, as_int, json_type
from ..errors import PosencError

#: Layer counts beyond this are not a model, they are a memory bomb (the index lists are materialised).
MAX_LAYERS = 10_000
#: Sizes and lengths beyond 2**53 are not exact in float64 and no model has them.
MAX_INT = 2**53


class ConfigView:
    """One JSON object of a config (the top level, a `text_config`, a rope dict) and its path."""

    def __init__(self, raw, path: str = "config"):
        if not isinstance(raw, dict):
            raise PosencError(path, f"must be a JSON object, got {json_type(raw)}")
        self.raw = raw
        self.path = path

    def field(self, key: str) -> str:
        return f"{self.path}.{key}"

    def has(self, key: str) -> bool:
        """Present and not null (transformers treats an explicit null as absent)."""
        return self.raw.get(key) is not None

    def first_key(self, *keys: str) -> str | None:
        """The first of `keys` that is present and not null."""
        return next((key for key in keys if self.has(key)), None)

    def int(self, key: str, default=None, *, minimum: int = 1, maximum: int = MAX_INT):
        if not self.has(key):
            return default
        return as_int(self.raw[key], self.field(key), minimum=minimum, maximum=maximum)

    def float(self, key: str, default=None, *, exclusive_minimum: float | None = None,
              maximum: float | None = None):
        if not self.has(key):
            return default
        return as_float(self.raw[key], self.field(key), exclusive_minimum=exclusive_minimum, maximum=maximum)

    def bool(self, key: str, default: bool) -> bool:
        return self._typed(key, default, bool, "true or false")

    def str(self, key: str, default=None):
        return self._typed(key, default, str, "a string")

    def _typed(self, key: str, default, kind: type, what: str):
        """raw[key] when it is of exactly this JSON type, `default` when absent or null."""
        if not self.has(key):
            return default
        value = self.raw[key]
        if not isinstance(value, kind):
            raise PosencError(self.field(key), f"must be {what}, got {value!r}")
        return value

    def obj(self, key: str) -> ConfigView | None:
        """A nested JSON object as a view (None when absent or null)."""
        if not self.has(key):
            return None
        return ConfigView(self.raw[key], self.field(key))

    def str_list(self, key: str, length: int, allowed) -> tuple[str, ...] | None:
        """A list of `length` strings from `allowed` (a model's `layer_types`)."""
        if not self.has(key):
            return None
        value = self.raw[key]
        if not isinstance(value, list):
            raise PosencError(self.field(key), f"must be a list, got {type(value).__name__}")
        if len(value) != length:
            raise PosencError(self.field(key), f"must have one entry per layer ({length}), got {len(value)}")
        for i, item in enumerate(value):
            if item not in allowed or not isinstance(item, str):
                raise PosencError(self.field(key), f"entry {i} must be one of {sorted(allowed)}, got {item!r}")
        return tuple(value)

    def layers(self, key: str, default: int) -> int:
        return self.int(key, default, minimum=1, maximum=MAX_LAYERS)


def head_dim_from(view: ConfigView, hidden: int, heads: int, heads_key: str) -> int:
    """hidden // heads, the way the modeling code splits the hidden size into heads."""
    if hidden % heads:
        raise PosencError(view.field(heads_key), f"hidden size {hidden} is not a multiple of {heads} heads")
    return hidden // heads


def factor_for(rotary_dim: int, head_dim: int, field: str) -> float:
    """The partial_rotary_factor f with int(head_dim * f) == rotary_dim exactly (GPT-J's rotary_dim)."""
    if not 1 <= rotary_dim <= head_dim:
        raise PosencError(field, f"must be in [1, head_dim={head_dim}], got {rotary_dim}")
    factor = rotary_dim / head_dim
    while int(head_dim * factor) < rotary_dim:  # rotary_dim/head_dim may round down a hair
        factor = math.nextafter(factor, 2.0)
    return factor
