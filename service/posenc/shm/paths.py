"""Where tables live: the shm directory, table-name rules and segment file names.

One file per table generation, `posenc.<name>.<generation>`, plus the registry file
`posenc-registry`, all directly in the shm directory (default /dev/shm, env POSENC_SHM_DIR).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import ShmError

DEFAULT_ROOT = "/dev/shm"
ROOT_ENV = "POSENC_SHM_DIR"
REGISTRY_FILE = "posenc-registry"
NAME_MAX = 64
#: Generations are 1..2**63-1 (they fit an int64 as well as the u64 fields): a larger number in
#: a file name is not a segment of ours, so a planted name cannot push the counter past 64 bits.
MAX_GENERATION = (1 << 63) - 1

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_SEGMENT = re.compile(r"posenc\.(?P<name>[A-Za-z0-9_.-]{1,64})\.(?P<generation>[1-9][0-9]{0,19})")


def resolve_root(root: str | os.PathLike | None) -> Path:
    """The shm directory: `root`, else $POSENC_SHM_DIR, else /dev/shm."""
    return Path(root if root is not None else os.environ.get(ROOT_ENV) or DEFAULT_ROOT)


def check_name(name) -> str:
    """A table name: 1..64 of [A-Za-z0-9_.-], not "." or "..", no "..", no "/"."""
    if not isinstance(name, str):
        raise ShmError("name", f"must be a string, got {type(name).__name__}")
    if "/" in name or ".." in name or name == ".":
        raise ShmError("name", f"{name!r} must not contain '/' or '..'")
    if not _NAME.fullmatch(name):
        raise ShmError("name", f"{name!r} must be 1..{NAME_MAX} characters of [A-Za-z0-9_.-]")
    return name


def segment_file(name: str, generation: int) -> str:
    return f"posenc.{name}.{generation}"


def parse_segment_file(filename: str) -> tuple[str, int] | None:
    """(name, generation) for a segment file name, None for anything else in the directory
    (including a generation above MAX_GENERATION: such a file is foreign and left alone)."""
    match = _SEGMENT.fullmatch(filename)
    if match is None or ".." in match["name"] or int(match["generation"]) > MAX_GENERATION:
        return None
    return match["name"], int(match["generation"])


def segment_files(root: Path) -> list[tuple[str, int, Path]]:
    """Every segment file in `root` as (name, generation, path), sorted; [] if root is missing."""
    try:
        entries = os.listdir(root)
    except FileNotFoundError:
        return []
    found = []
    for filename in entries:
        parsed = parse_segment_file(filename)
        if parsed is not None:
            found.append((*parsed, root / filename))
    return sorted(found)
