"""Building the benchmarks' own small C programs (a second-process reader, the publish floors)
at bench time with whatever C compiler the machine has: they are measuring tools, not part
of the installed package, so they need a source checkout and a compiler, not `make`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADER_DIR = HERE.parents[2] / "native" / "include"


def compile_helper(source: str, exe: Path) -> str | None:
    """Compile bench/`source` into `exe` (-O2, with native/include on the path); None when done,
    else why it was skipped (no compiler, or not a source checkout)."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None or not (HEADER_DIR / "posenc_shm.h").exists():
        return "skipped: needs a C compiler and native/include/posenc_shm.h (a source checkout)"
    subprocess.run([cc, "-std=c11", "-O2", f"-I{HEADER_DIR}", str(HERE / source), "-o", str(exe)], check=True)
    return None
