"""`posenc audit`: tell a team whether its RoPE cos/sin cache is right, and if not, why.

    >>> report = posenc.audit.audit_bytes(open("cache.safetensors", "rb").read(), config=config_json)
    >>> report["diagnosis"]["cause"], report["diagnosis"]["fix"]

The input is a cache (cos and sin, any of the layouts frameworks use) or q before and after the
team's rotation; the optional config.json says what the model needs. See `engine` for the steps
and `findings.CAUSES` for every cause it can name.
"""

from __future__ import annotations

from ..errors import PosencError
from .engine import AuditResult, audit_cache
from .findings import CAUSES, Finding
from .inputs import read_arrays, to_cache
from .observe import Cache
from .report import to_dict, to_text


def audit_arrays(arrays: dict, config: dict | None = None, *, start: int = 0, layer_type: str | None = None) -> dict:
    """The audit report (a dict) of named arrays (see `inputs` for the names and shapes understood)."""
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise PosencError("start", f"must be a non-negative integer, got {start!r}")
    return to_dict(audit_cache(to_cache(arrays, start), config, layer_type=layer_type))


def audit_bytes(*files: bytes, names: tuple[str, str] = ("cos", "sin"), config: dict | None = None,
                start: int = 0, layer_type: str | None = None) -> dict:
    """The report for one file (.npy/.npz/.safetensors bytes), or two files of one array each,
    named `names` in order: ("cos", "sin"), or ("q", "q_rot") for q before and after rotation."""
    if len(files) == 1:
        return audit_arrays(read_arrays(files[0]), config, start=start, layer_type=layer_type)
    if len(files) != 2:
        raise PosencError("file", f"give one file or two (cos and sin, or q and q_rot), got {len(files)}")
    arrays = {}
    for name, data in zip(names, files):
        found = read_arrays(data, name)
        if len(found) != 1:
            raise PosencError(name, f"must hold one array when two files are given, holds {sorted(found)}")
        arrays[name] = next(iter(found.values()))
    return audit_arrays(arrays, config, start=start, layer_type=layer_type)


__all__ = ["CAUSES", "AuditResult", "Cache", "Finding", "audit_arrays", "audit_bytes", "audit_cache", "read_arrays",
           "to_cache", "to_dict", "to_text"]
