"""Example app for the sidecar layout: read encodings straight from the posenc sidecar's shared-memory
tables (zero copy, no request), and follow the sidecar when it republishes a table.

Env: POSENC_SHM_DIR (set in the pod), POSENC_TABLE (default sin128), EXAMPLE_ROUNDS (0 = run forever),
EXAMPLE_INTERVAL_S (default 30).
"""

import itertools
import os
import time

import numpy as np
from posenc.shm import attach


def main() -> None:
    name = os.environ.get("POSENC_TABLE", "sin128")
    rounds = int(os.environ.get("EXAMPLE_ROUNDS", "0"))
    interval_s = float(os.environ.get("EXAMPLE_INTERVAL_S", "30"))
    rng = np.random.default_rng()
    table = attach(name)  # published before this container started: the sidecar's startupProbe waits for it
    table.lookup([table.start])  # untimed: without the native build, numba compiles the gather here
    for done in itertools.count(1):
        positions = rng.integers(table.start, table.stop, size=1024)
        started = time.perf_counter()
        rows = table.lookup(positions)
        elapsed_us = (time.perf_counter() - started) * 1e6
        print(f"{name} generation {table.generation}: {rows.shape[0]} rows x {rows.shape[1]} {rows.dtype} "
              f"in {elapsed_us:.0f} us", flush=True)
        if done == rounds:
            break
        time.sleep(interval_s)
        latest = attach(name, verify=False)  # cheap: maps the current generation, checks its header
        if latest.generation == table.generation:
            latest.close()
        else:
            table.close()
            table = latest


if __name__ == "__main__":
    main()
