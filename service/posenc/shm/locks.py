"""How long a writer waits for the registry lock, and who holds a file's lock: the holders of an
flock, as /proc/locks lists them (Linux).

Used in the error a writer raises when the registry lock stays taken: the pid (and command
name) tells an operator what to stop. Holders in another pid namespace show as pid 0 or
not at all, so the answer may be "unknown".
"""

from __future__ import annotations

import os
from pathlib import Path

PROC_LOCKS = Path("/proc/locks")
#: How long a writer waits for the registry lock before it gives up (TableStore(lock_timeout_s=)).
#: Here, in a module that imports nothing heavy, so `posenc table --help` can show it at once.
LOCK_TIMEOUT_S = 10.0


def holder_pids(fd: int, locks_text: str | None = None) -> list[int]:
    """Pids holding an flock on the file open at `fd` (waiters, marked "->", excluded)."""
    st = os.fstat(fd)
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    if locks_text is None:
        try:
            locks_text = PROC_LOCKS.read_text()
        except OSError:
            return []
    pids = []
    for line in locks_text.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 00:1b:41 0 EOF"
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == device and fields[4].isdigit():
            pid = int(fields[4])
            if pid > 0 and pid not in pids:
                pids.append(pid)
    return pids


def describe_holders(fd: int) -> str:
    """"pid 1234 (python3)", several joined by commas, or "an unknown process"."""
    described = []
    for pid in holder_pids(fd):
        try:
            command = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            command = "?"
        described.append(f"pid {pid} ({command})" if pid != os.getpid() else f"pid {pid} (this process)")
    return ", ".join(described) or "an unknown process"
