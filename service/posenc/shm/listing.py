"""What is in a shm directory: one `TableInfo` per segment file (`posenc table ls`)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from ..tables import serves
from .errors import ShmError
from .format import BUILDING, HEADER_SIZE, READY, unpack_header
from .paths import resolve_root, segment_files
from .registry import RegistryView

#: `state` of a READY segment the registry does not name: replaced or orphaned, reclaimable.
STALE = "STALE"
#: `state` of a file named like a segment whose header cannot be read.
INVALID = "INVALID"


@dataclass(frozen=True)
class TableInfo:
    """One segment. Only state "READY" (the registry's current generation) is attachable;
    "BUILDING" is being written, "STALE" is a superseded or orphaned READY segment and
    "INVALID" a file whose header is unreadable."""

    name: str
    segment: str
    kind: str
    spec: dict
    shape: tuple[int, int]
    dtype: str
    nbytes: int
    generation: int
    state: str
    created: float
    writer_pid: int
    serves: str = ""  # which sequence lengths its rows are right for (posenc.tables.serves)
    #: a named computed encoding: `shape` is the positions it serves x the row width, `dtype` its
    #: default output dtype (it computes every dtype), `nbytes` its spec block's
    computed: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def read_info(path: Path, name: str, generation: int, current: dict[str, int]) -> TableInfo:
    """Describe one segment file; `current` is the registry's {name: generation}."""
    with open(path, "rb") as f:
        return _describe(f.fileno(), path, name, generation, current)


def describe_fd(fd: int, path: Path, name: str, generation: int) -> TableInfo:
    """Describe the segment open at `fd` as the current generation of `name` (a writer, right
    before its flip: from the fd, because once flipped the path may already be replaced)."""
    return _describe(fd, path, name, generation, {name: generation})


def _describe(fd: int, path: Path, name: str, generation: int, current: dict[str, int]) -> TableInfo:
    try:
        header = unpack_header(os.pread(fd, HEADER_SIZE, 0), str(path))
        spec = json.loads(os.pread(fd, header.spec_len, HEADER_SIZE))
        kind = spec["encoding"]["kind"]
    except (ShmError, ValueError, TypeError, KeyError):
        return TableInfo(name, path.name, "", {}, (0, 0), "", os.fstat(fd).st_size, generation, INVALID, 0.0, 0)
    if header.state == READY:
        state = "READY" if current.get(name) == generation else STALE
    else:
        state = "BUILDING" if header.state == BUILDING else INVALID
    computed = spec.get("computed") is True
    dtype = spec.get("dtype", "float32") if computed else header.dtype
    return TableInfo(name, path.name, kind, spec, (header.rows, header.width), dtype, header.data_nbytes,
                     generation, state, header.created_ns / 1e9, header.writer_pid, serves(spec), computed)


def list_tables(root=None) -> list[TableInfo]:
    """Every segment in the shm directory (default $POSENC_SHM_DIR or /dev/shm), by name."""
    root = resolve_root(root)
    registry = RegistryView.open(root)
    current = {} if registry is None else registry.entries()
    if registry is not None:
        registry.close()
    infos = []
    for name, generation, path in segment_files(root):
        try:
            infos.append(read_info(path, name, generation, current))
        except OSError:
            continue  # unlinked while we listed, or not readable by us
    return infos
