"""Shared-memory tables: publish a table once, read it zero-copy from any process.

    >>> from posenc.shm import TableStore, attach
    >>> store = TableStore()                       # writer: $POSENC_SHM_DIR or /dev/shm
    >>> store.publish("sin128", TableSpec(SinusoidalSpec(128), 0, 131072))
    >>> tbl = attach("sin128")                     # any other process, read-only
    >>> tbl.lookup([0, 5, 70000])                  # rows of positions 0, 5, 70000

The file format, the registry and the publication protocol are in docs/shm-format.md;
`native/include/posenc_shm.h` is a header-only C reader of the same files.

The names import on first use (`posenc._lazy`): the readers and writers need numpy and the native
binding (numba without the native core), while `posenc table --help` only needs `posenc.shm.locks`.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # the names as type checkers and IDEs see them; at run time __getattr__ imports them
    from .errors import ShmError
    from .listing import TableInfo, list_tables
    from .reader import Table, attach
    from .store import TableStore

__all__ = ["ShmError", "Table", "TableInfo", "TableStore", "attach", "list_tables"]
__getattr__, __dir__ = lazy_exports(__name__, {
    "ShmError": "errors", "Table": "reader", "TableInfo": "listing", "TableStore": "store",
    "attach": "reader", "list_tables": "listing",
})
