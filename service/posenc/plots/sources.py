"""What a figure is drawn for: one spec, several specs side by side, or every layer type of a
pasted config.json. Each figure takes the encodings of its kind from the list, and says so when
the source has none (a figure never silently draws a default in place of the chosen source)."""

from __future__ import annotations

import re

from ..encodings import AlibiSpec, RopeSpec, SinusoidalSpec
from ..errors import PosencError
from ..models import from_hf_config

SPEC_TYPES = {"rope": RopeSpec, "sinusoidal": SinusoidalSpec, "alibi": AlibiSpec}
MAX_SPECS = 6


def label(text) -> str:
    """A legend label from user input: printable, short."""
    return re.sub(r"[^\w .,:+()=/-]", "_", str(text))[:48] or "spec"


def spec_from_dict(doc, field: str):
    if not isinstance(doc, dict):
        raise PosencError(field, f"must be a spec object, got {type(doc).__name__}")
    kind = doc.get("kind")
    if kind not in SPEC_TYPES:
        raise PosencError(f"{field}.kind", f"must be one of {sorted(SPEC_TYPES)}, got {kind!r}")
    body = {k: v for k, v in doc.items() if k not in ("kind", "label")}
    try:
        return SPEC_TYPES[kind].from_dict(body)
    except PosencError as exc:
        raise PosencError(f"{field}.{exc.field}", exc.message) from None


def encodings_of(doc: dict) -> list[tuple[str, object]]:
    """[(label, spec)] from {"spec": {...}}, {"specs": [{...}, ...]} or {"config": {...}} (at most one;
    none: [] and each figure draws its default). A spec may carry a "label" for its legend."""
    given = [k for k in ("spec", "specs", "config") if doc.get(k) is not None]
    unknown = sorted(set(doc) - {"spec", "specs", "config"})
    if unknown:
        raise PosencError(f"source.{unknown[0]}", "is not a source: give one of spec, specs, config (or table)")
    if len(given) > 1:
        raise PosencError(given[-1], f"give one of spec, specs, config (got {', '.join(given)})")
    if not given:
        return []
    key = given[0]
    if key == "spec":
        spec = spec_from_dict(doc["spec"], "spec")
        return [(label(doc["spec"].get("label") or spec.KIND), spec)]
    if key == "specs":
        items = doc["specs"]
        if not isinstance(items, list) or not 1 <= len(items) <= MAX_SPECS:
            raise PosencError("specs", f"must be a list of 1 to {MAX_SPECS} spec objects")
        out = []
        for i, item in enumerate(items):
            spec = spec_from_dict(item, f"specs.{i}")
            out.append((label(item.get("label") or f"{spec.KIND} {i + 1}"), spec))
        return out
    try:
        model = from_hf_config(doc["config"])
    except PosencError as exc:
        raise PosencError(exc.field if exc.field.startswith("config") else f"config.{exc.field}", exc.message) \
            from None
    if not model.encodings:
        raise PosencError("config", model.no_positions())
    return [(label(name), entry.spec) for name, entry in model.encodings.items()]


def of_kind(encodings, kind: str):
    return [(name, spec) for name, spec in encodings if getattr(spec, "KIND", None) == kind]


def drawable(encodings, kinds: tuple[str, ...], figure: str):
    """The source's encodings of `kinds`, or a PosencError saying the source has none for this figure."""
    found = [(name, spec) for name, spec in encodings if getattr(spec, "KIND", None) in kinds]
    if not found:
        has = ", ".join(sorted({getattr(s, "KIND", type(s).__name__) for _, s in encodings})) or "nothing"
        raise PosencError("source", f"has no {' or '.join(kinds)} encoding to draw in the {figure} view "
                          f"(it has {has})")
    return found


def rope_specs(encodings, figure: str):
    """The RoPE encodings to draw: the source's (an error when it has none); plain RoPE at head_dim 128 without
    a source."""
    return drawable(encodings, ("rope",), figure) if encodings else [("default", RopeSpec(128))]
