"""Shared-memory tables: publish a table once, read it zero-copy from any process.

    >>> from posenc.shm import TableStore, attach
    >>> store = TableStore()                       # writer: $POSENC_SHM_DIR or /dev/shm
    >>> store.publish("sin128", TableSpec(SinusoidalSpec(128), 0, 131072))
    >>> tbl = attach("sin128")                     # any other process, read-only
    >>> tbl.lookup([0, 5, 70000])                  # rows of positions 0, 5, 70000

The file format, the registry and the publication protocol are in docs/shm-format.md;
`native/include/posenc_shm.h` is a header-only C reader of the same files.
"""

from .errors import ShmError
from .listing import TableInfo, list_tables
from .reader import Table, attach
from .store import TableStore

__all__ = ["ShmError", "Table", "TableInfo", "TableStore", "attach", "list_tables"]
