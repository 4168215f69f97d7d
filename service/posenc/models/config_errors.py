"""Report a spec's validation error under the config key its value came from."""

from contextlib import contextmanager

from ..errors import PosencError


@contextmanager
def renamed(fields: dict[str, str]):
    """Inside, a PosencError about spec field `dim` is re-raised as e.g. `config.d_model`."""
    try:
        yield
    except PosencError as exc:
        raise PosencError(fields.get(exc.field, exc.field), exc.message) from None
