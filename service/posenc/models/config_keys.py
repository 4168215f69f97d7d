"""Config keys as the non-RoPE family readers need them: transformers' attribute_map aliases,
and spec errors reported under the key a value came from."""

from contextlib import contextmanager

from ..errors import PosencError
from ..limits import LIMITS
from .fields import ConfigView


def aliased_int(view: ConfigView, keys: tuple[str, ...], default: int, *, minimum: int = 1,
                maximum: int = LIMITS.max_abs_position) -> int:
    """The first present of a config class's own key and its attribute_map aliases
    (`n_head` / `num_attention_heads`), errors naming the key that was read."""
    return view.int(view.first_key(*keys) or keys[0], default, minimum=minimum, maximum=maximum)


def padding_idx(view: ConfigView, family: str) -> int:
    """`pad_token_id` (default 1) for models that count positions from padding_idx + 1 (an
    explicit null would make the reference add 1 to None)."""
    if "pad_token_id" in view.raw and view.raw["pad_token_id"] is None:
        raise PosencError(view.field("pad_token_id"), f"is null: {family} counts positions from pad_token_id + 1")
    return view.int("pad_token_id", 1, minimum=0, maximum=LIMITS.max_abs_position - 1)


@contextmanager
def renamed(fields: dict[str, str]):
    """Inside, a PosencError about spec field `dim` is re-raised as e.g. `config.d_model`."""
    try:
        yield
    except PosencError as exc:
        raise PosencError(fields.get(exc.field, exc.field), exc.message) from None
