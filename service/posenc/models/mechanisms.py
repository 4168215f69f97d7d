"""The mechanisms a config uses to say which layers apply which RoPE, read wherever they appear.

Per layer: `layer_types` (attention types apply positions; linear / conv / mamba / recurrent /
cross-attention layers have none), `no_rope_layers` (1 = RoPE, 0 = NoPE, Llama-4 / SmolLM3),
`layer_rope_theta` (a base per layer, 0 = NoPE, Granite-SWA), and the NoPE rules that live
in a family's modeling code (`Modeling.nope`). Per head: `qk_rope_head_dim` (MLA: the rotary
part of each head), `head_dim`, `kv_channels`, else hidden // heads; the rotary slice from
`partial_rotary_factor`, `rotary_dim`, `rotary_pct` or `rope_pct`.
"""

from __future__ import annotations

from ..errors import PosencError
from .fields import MAX_LAYERS, ConfigView, factor_for, head_dim_from
from .modeling import Modeling

#: Layer types whose attention takes positions (unless a NoPE rule says otherwise).
ATTENTION_TYPES = frozenset({"full_attention", "sliding_attention", "chunked_attention", "attention",
                             "global_attention", "local_attention", "hybrid", "hybrid_sliding", "full", "sliding",
                             "indexed_attention", "reference_sliding_attention"})
#: Layer types that mix tokens without positions.
POSITIONLESS_TYPES = frozenset({"linear_attention", "conv", "mamba", "mamba2", "recurrent", "ssm",
                                "cross_attention", "short_conv", "gated_deltanet", "moe", "mlp"})
SCALED, UNSCALED = "scaled", "unscaled"  # the layer types `rope_scaling_layers` makes
LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers")


def num_layers(view: ConfigView) -> tuple[int, str]:
    """The layer count; 0 when the config gives none (the encodings are then listed without layers)."""
    key = view.first_key(*LAYER_KEYS) or LAYER_KEYS[0]
    if not view.has(key):  # a config that saves only its per-layer list (Nemotron-H's layers_block_type)
        for listed in ("layer_types", "layers_block_type"):
            if isinstance(view.raw.get(listed), list):
                return len(view.raw[listed]), view.field(listed)
    count = view.int(key, 0, minimum=1, maximum=MAX_LAYERS)
    raw = view.raw.get("layer_types")
    if _sub_layers(raw) and len(raw) == count:  # Dory's config.json counts the sub-layers too
        count //= 2
    return count, view.field(key)


def _sub_layers(raw) -> bool:
    """Whether `layer_types` lists sub-layers (Dory's config.json: each decoder layer's attention
    type, then "mlp"), so that a decoder layer's type is every other entry."""
    return isinstance(raw, list) and len(raw) >= 2 and len(raw) % 2 == 0 and all(k == "mlp" for k in raw[1::2]) \
        and "mlp" not in raw[::2]


def layer_types(view: ConfigView, layers: int, modeling: Modeling) -> list[str | None]:
    """Per layer, the name of the RoPE it uses (a layer type, or "default"), or None for no positions."""
    names: list[str | None] = ["default"] * layers
    raw = view.raw.get("layer_types")
    if _sub_layers(raw) and len(raw) == 2 * layers:
        raw = raw[::2]
    if raw is not None:
        if not isinstance(raw, list) or len(raw) != layers:
            raise PosencError(view.field("layer_types"), f"must be a list with one entry per layer ({layers})")
        for i, kind in enumerate(raw):
            if not isinstance(kind, str):
                raise PosencError(view.field("layer_types"), f"entry {i} must be a string, got {kind!r}")
            applies = attends(kind, modeling)
            if applies is None:
                raise PosencError(view.field("layer_types"), f"entry {i}: layer type {kind!r} is not one posenc "
                                  f"knows to apply positions or not (known: {sorted(ATTENTION_TYPES | POSITIONLESS_TYPES)})")
            names[i] = kind if applies else None
    for i in _positionless_indices(view, layers, modeling):
        names[i] = None
    scaled = view.raw.get("rope_scaling_layers")
    if scaled is not None:  # Molmo2: the rope dict's scaling on these layers, plain RoPE on the others
        if not isinstance(scaled, list) or not all(isinstance(i, int) for i in scaled):
            raise PosencError(view.field("rope_scaling_layers"), "must be a list of layer indices")
        names = [None if name is None else SCALED if i in scaled else UNSCALED for i, name in enumerate(names)]
    flags = view.raw.get("no_rope_layers") or _interval_flags(view, layers, modeling)
    if flags is not None:
        if not isinstance(flags, list) or len(flags) != layers or any(f not in (0, 1) for f in flags):
            raise PosencError(view.field("no_rope_layers"), f"must be a list of {layers} flags (1: RoPE, 0: NoPE)")
        names = [name if flag else None for name, flag in zip(names, flags)]
    thetas = view.raw.get("layer_rope_theta")
    if thetas is not None:
        if not isinstance(thetas, list) or len(thetas) != layers:
            raise PosencError(view.field("layer_rope_theta"), f"must be a list of {layers} bases (0: NoPE)")
        names = [None if not theta else theta_group(theta) if name else None
                 for name, theta in zip(names, thetas)]
    if modeling.nope is not None:
        names = [None if name is not None and modeling.nope(view, name) else name for name in names]
    return names


def attends(kind: str, modeling: Modeling) -> bool | None:
    """Whether a layer of this kind attends with positions: True, False (linear / conv / mamba /
    recurrent / cross attention) or None (a name posenc does not know)."""
    if modeling.attention_kinds is not None:
        return kind in modeling.attention_kinds
    return True if kind in ATTENTION_TYPES else False if kind in POSITIONLESS_TYPES else None


def _positionless_indices(view: ConfigView, layers: int, modeling: Modeling) -> set[int]:
    """Layers other keys mark as mixing tokens without positions: `cross_attention_layers` (Mllama:
    their indices), `block_types` (RecurrentGemma: a pattern repeated over the layers),
    `layers_block_type` (one kind per layer), `attn_layer_indices` (hybrids: every other layer is mamba;
    null: every layer is)."""
    out: set[int] = set()
    cross = view.raw.get("cross_attention_layers")
    if cross is not None:
        if not isinstance(cross, list) or not all(isinstance(i, int) and 0 <= i < layers for i in cross):
            raise PosencError(view.field("cross_attention_layers"), f"must be a list of layer indices < {layers}")
        out |= set(cross)
    for key, repeated in (("block_types", True), ("layers_block_type", False)):
        kinds = view.raw.get(key)
        if kinds is None:
            continue
        if not isinstance(kinds, list) or not kinds or (not repeated and len(kinds) != layers):
            raise PosencError(view.field(key), f"must be a list of layer kinds{'' if repeated else f' ({layers})'}")
        for i in range(layers):
            applies = attends(kinds[i % len(kinds)], modeling)
            if applies is False:
                out.add(i)
            elif applies is None:
                raise PosencError(view.field(key), f"layer kind {kinds[i % len(kinds)]!r} is not one posenc knows to apply "
                                  "positions or not")
    indices = view.raw.get("attn_layer_indices")
    if indices is None and "attn_layer_indices" in view.raw:  # Bamba: null lists no attention layer
        out |= set(range(layers))
    elif indices is not None:
        if not isinstance(indices, list) or not all(isinstance(i, int) and 0 <= i < layers for i in indices):
            raise PosencError(view.field("attn_layer_indices"), f"must be a list of layer indices < {layers}")
        out |= set(range(layers)) - set(indices)
    return out


def _interval_flags(view: ConfigView, layers: int, modeling: Modeling) -> list[int] | None:
    """Llama-4 / SmolLM3 without `no_rope_layers`: every `no_rope_layer_interval`-th layer is NoPE."""
    if not view.has("no_rope_layer_interval") and modeling.nope_interval is None:
        return None
    interval = view.int("no_rope_layer_interval", modeling.nope_interval)
    return [int((i + 1) % interval != 0) for i in range(layers)]


def theta_group(theta) -> str:
    """The layer-type name of the layers whose `layer_rope_theta` is this base."""
    return f"rope_theta_{theta:.0f}"


def head_dim(view: ConfigView, modeling: Modeling) -> tuple[int, str]:
    """The width of the vectors the apply function rotates, and the key it came from."""
    if modeling.head is not None:
        return modeling.head(view)
    for key in ("qk_rope_head_dim", "head_dim", "kv_channels"):
        if view.has(key) and key not in modeling.ignored_head_keys:
            return view.int(key), view.field(key)
    hidden_key = view.first_key("hidden_size", "d_model", "n_embd")
    heads_key = view.first_key("num_attention_heads", "n_head", "n_heads")
    if hidden_key is None or heads_key is None:
        raise PosencError(view.field("head_dim"), "config has neither head_dim nor hidden_size and "
                          "num_attention_heads")
    return head_dim_from(view, view.int(hidden_key), view.int(heads_key), heads_key), view.field(heads_key)


def partial_factor(view: ConfigView, head: int, modeling: Modeling) -> tuple[float, str] | None:
    """The top-level partial rotary factor (a rope dict's own wins later), None when none is given."""
    if view.has("partial_rotary_factor"):
        return view.float("partial_rotary_factor", exclusive_minimum=0.0, maximum=1.0), \
            view.field("partial_rotary_factor")
    if view.has("rotary_dim") and "rotary_dim" not in modeling.ignored_keys:
        return factor_for(view.int("rotary_dim"), head, view.field("rotary_dim")), view.field("rotary_dim")
    for key in ("rotary_pct", "rope_pct"):
        if view.has(key):
            return view.float(key, exclusive_minimum=0.0, maximum=1.0), view.field(key)
    if modeling.default_prf is not None:
        return modeling.default_prf, view.field("partial_rotary_factor")
    return None


def layout(view: ConfigView, modeling: Modeling) -> str:
    """The rotation's pairing: the family's, or what `rope_interleave` says (the MLA families:
    true de-interleaves q and k before `rotate_half`, which gives the scores of interleaved pairs)."""
    if view.has("rope_interleave"):
        return "interleaved" if view.bool("rope_interleave", True) else "half"
    return modeling.layout
