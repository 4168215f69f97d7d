"""Which tables the workers created over HTTP, so `posenc serve` can remove them when it stops.

Each worker appends `name generation` lines to a file in the service's run directory
(O_APPEND: whole lines from concurrent workers never interleave). At exit the parent
removes every listed table whose current generation is still the one a worker made;
anything replaced since (e.g. by `posenc table build`) is left alone.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...shm import TableStore, list_tables

LEDGER_FILE = "created-tables"


def record_created_table(run_dir: str | os.PathLike, name: str, generation: int) -> None:
    fd = os.open(Path(run_dir) / LEDGER_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, f"{name} {generation}\n".encode())
    finally:
        os.close(fd)


def cleanup_created_tables(run_dir: str | os.PathLike, root: str) -> list[str]:
    """Remove the tables the ledger lists that still hold the listed generation; their names."""
    try:
        lines = (Path(run_dir) / LEDGER_FILE).read_text().splitlines()
    except FileNotFoundError:
        return []
    created = {(name, int(generation)) for name, generation in (line.split() for line in lines)}
    current = {info.name: info.generation for info in list_tables(root) if info.state == "READY"}
    doomed = sorted(name for name, generation in created if current.get(name) == generation)
    if doomed:
        store = TableStore(root)
        try:
            for name in doomed:
                store.remove(name)
        finally:
            store.close()
    return doomed
