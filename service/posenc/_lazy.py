"""Package attributes that import their module on first use (PEP 562 module `__getattr__`).

Importing numpy, numba and ml_dtypes costs seconds, and a package that imports its public
names eagerly makes everyone pay it: `posenc --help`, a worker that only needs
`posenc.errors`. A package built with `lazy_exports` says where each name lives instead;
the first lookup imports that module and stores the value in the package, so every later
lookup is an ordinary attribute read.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType


def lazy_exports(package: str, sources: dict[str, str], submodules: tuple[str, ...] = ()):
    """(`__getattr__`, `__dir__`) for the package named `package`.

    `sources` maps each public name to the submodule that defines it; the package's literal
    `__all__` (a literal so that static readers, such as the API reference's mkdocstrings,
    see the exports) must name exactly these, which is checked here at import.
    `submodules` are the submodules the package's eager import bound as attributes as a side
    effect, which callers came to rely on (`import posenc; posenc.kernels.threads()`): they
    stay reachable and listed. `dir()` lists what a plain module listed: its dunders, the
    public names, and the submodules (listed or already imported), not this machinery.
    """
    namespace = sys.modules[package].__dict__
    if sorted(namespace.get("__all__", ())) != sorted(sources):
        raise ImportError(f"{package}.__all__ and its lazy sources disagree: "
                          f"{sorted(set(namespace.get('__all__', ())) ^ set(sources))}")

    def __getattr__(name: str):
        if name in sources:
            value = getattr(importlib.import_module(f"{package}.{sources[name]}"), name)
        elif name in submodules:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        bound = {name for name, value in namespace.items()
                 if isinstance(value, ModuleType) and not name.startswith("_")
                 or name.startswith("__") and name not in ("__getattr__", "__dir__")}
        return sorted(bound | set(sources) | set(submodules))

    return __getattr__, __dir__
