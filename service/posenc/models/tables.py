"""A model's encodings as shared-memory tables: one `TableSpec` per layer type whose rows can be
computed (RoPE, ALiBi, sinusoidal), and why the others cannot be (T5 buckets are a function of
relative position, not a row per position; learned tables live in the checkpoint)."""

from __future__ import annotations

from ..errors import PosencError
from ..tables import TableSpec
from .positions import ModelPositions

#: Kinds whose rows `TableSpec.fill` computes from the spec alone.
COMPUTABLE = ("rope", "alibi", "sinusoidal")
WHY_NOT = {
    "t5": "T5 relative-position buckets depend on key - query, not on one position: no table "
          "(compute them with POST /v1/t5/buckets or posenc.t5_relative_position_bucket)",
    "learned": "a learned table's values are in the checkpoint: posenc table build model.safetensors "
               "--model-config config.json",
}
#: Where configs keep the context length, in the order transformers' families use them.
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "n_ctx",
                "max_source_positions")


def config_size(config: dict, keys: tuple[str, ...]) -> int | None:
    """The first positive integer among `keys` in a config (a multimodal config's text_config
    first), if it gives one: a size read for display and table bounds, not validated."""
    for scope in (config.get("text_config"), config):
        if isinstance(scope, dict):
            for key in keys:
                value = scope.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    return value
    return None


def context_length(config: dict) -> int | None:
    """The model's context length from its config, if any."""
    return config_size(config, CONTEXT_KEYS)


def layer_tables(model: ModelPositions, *, context: int | None, start: int = 0, stop: int | None = None,
                 dtype: str = "float32", seq_len: float | None = None
                 ) -> tuple[dict[str, TableSpec], dict[str, str]]:
    """({table key: table}, {layer_type: why it has none}). A key is the layer type, with
    ".short" / ".long" for LongRoPE's two tables. Rows are positions start..stop-1; `stop`
    defaults to the lengths the model serves (`serving_tables`), else `context`. `seq_len`
    applies to the RoPE tables only."""
    tables: dict[str, TableSpec] = {}
    skipped: dict[str, str] = {}
    for layer_type, entry in model.encodings.items():
        kind = entry.spec.KIND
        if kind not in COMPUTABLE:
            skipped[layer_type] = WHY_NOT.get(kind, f"posenc has no table for {kind} encodings")
            continue
        try:
            if kind == "rope":
                for suffix, (end, length) in serving_tables(entry.spec, stop, seq_len).items():
                    tables[layer_type + suffix] = TableSpec(entry.spec, start, end, dtype, length)
                continue
            end = stop if stop is not None else context
            if end is None:
                skipped[layer_type] = "the config has no context length: give the positions (START:STOP)"
                continue
            tables[layer_type] = TableSpec(entry.spec, start, end, dtype)
        except PosencError as exc:
            raise type(exc)(exc.field, f"layer type {layer_type!r}: {exc.message}") from None
    return tables, skipped


def serving_tables(spec, stop: int | None, seq_len: float | None) -> dict[str, tuple[int, float | None]]:
    """{key suffix: (stop, seq_len)}: the rows a RoPE model computes at each length it serves.

    * LongRoPE: short factors for sequences up to original_max_position_embeddings, long
      factors (for every position of the sequence) beyond: two tables, ".short" and ".long";
    * YaRN: the extended context, factor * original_max_position_embeddings (Qwen2.5: 4 x 32768),
      when that is beyond max_position_embeddings;
    * dynamic NTK: frequencies depend on the sequence length; without `seq_len`, the initial
      ones (right up to max_position_embeddings); with it, that length's, rows 0..seq_len-1.
    """
    longest = spec.max_position_embeddings
    if spec.rope_type == "longrope" and seq_len is None:
        original = spec.original_max_position_embeddings or longest
        if longest is None or longest <= original:
            return {"": (stop or original, float(original))}
        return {".short": (min(stop or original, original), float(original)),
                ".long": (stop or longest, float(longest))}
    if spec.rope_type == "yarn" and spec.original_max_position_embeddings:
        longest = max(longest or 0, int(spec.scaling_params["factor"] * spec.original_max_position_embeddings))
    if spec.rope_type == "dynamic" and seq_len is not None:
        longest = int(seq_len)
    end = stop if stop is not None else longest
    if end is None:
        raise PosencError("positions", "the config has no context length: give the positions (START:STOP)")
    return {"": (end, seq_len)}
