"""Every float32 bit pattern through libposenc's JSON printer and through orjson: the texts must be equal.

Offline, not part of `make test` (2^32 numbers: about 10 minutes on two cores of the machine the
docs/benchmarks.md names). Run from a worktree after `make install`:

    nice .venv/bin/python native/tools/json_f32_exhaustive.py [--workers 2] [--chunk-bits 24]

Every writer of the library this CPU runs ("avx512", "scalar": posenc_json_f32_by) is checked in
the same pass (--writers to choose). The 2^32 patterns go in chunks of 2^chunk-bits consecutive
patterns, each printed as one 1-D array by orjson and by each writer; a chunk whose texts differ is
split at its commas and every differing number is reported (writer, bits, orjson's text, ours).
Prints the longest number seen (the bound responses.JSON_CHARS relies on) and exits 1 on any
difference.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import orjson


def check_chunk(args: tuple[int, int, tuple[str, ...]]) -> tuple[int, int, list[str]]:
    """(chunk index, longest number, differences) for bit patterns start .. start + 2^bits."""
    from posenc.native.json_text import json_f32_by

    index, bits, writers = args
    patterns = np.arange(index << bits, (index + 1) << bits, dtype=np.uint64).astype(np.uint32)
    values = patterns.view(np.float32)
    theirs = orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY)
    numbers = theirs[1:-1].split(b",")
    longest, differences = max(map(len, numbers)), []
    for writer in writers:
        ours = json_f32_by(writer, values)
        if ours == theirs:
            continue
        mine = ours[1:-1].split(b",")
        if len(mine) != len(numbers):
            differences.append(f"{writer}, chunk {index}: {len(mine)} numbers, orjson {len(numbers)}")
            continue
        differences += [f"{writer} 0x{int(patterns[i]):08x}: orjson {numbers[i].decode()} ours {mine[i].decode()}"
                        for i in range(len(numbers)) if mine[i] != numbers[i]]
    return index, longest, differences


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--chunk-bits", type=int, default=24)
    parser.add_argument("--chunks", type=int, default=None, help="check only the first N chunks (a quick run)")
    parser.add_argument("--writers", default=None, help="comma-separated writers (default: all this CPU runs)")
    options = parser.parse_args(argv)
    from posenc import native
    from posenc.native.json_text import WRITERS, available, json_f32_by

    if not available():
        print(f"libposenc's posenc_json_f32 is not loaded ({native.STATUS})", file=sys.stderr)
        return 2
    writers = tuple(options.writers.split(",")) if options.writers else tuple(
        name for name in WRITERS if json_f32_by(name, np.zeros(1, np.float32)) is not None)
    total = 1 << (32 - options.chunk_bits)
    chunks = [(i, options.chunk_bits, writers) for i in range(total if options.chunks is None else options.chunks)]
    started, longest, differences, done = time.monotonic(), 0, [], 0
    print(f"writers {', '.join(writers)} (kernel path {native.STATUS}), orjson {orjson.__version__}, "
          f"{len(chunks)} chunks of 2^{options.chunk_bits}, {options.workers} workers", flush=True)
    with ProcessPoolExecutor(options.workers) as pool:
        for index, chunk_longest, chunk_differences in pool.map(check_chunk, chunks):
            done += 1
            longest = max(longest, chunk_longest)
            differences += chunk_differences
            for line in chunk_differences[:20]:
                print(line, flush=True)
            if done % 16 == 0 or done == len(chunks):
                print(f"{done}/{len(chunks)} chunks, {len(differences)} differences, "
                      f"{time.monotonic() - started:.0f} s", flush=True)
    checked = len(chunks) << options.chunk_bits
    print(f"{checked} bit patterns, writers {', '.join(writers)}: {len(differences)} differ from orjson; "
          f"longest number {longest} characters; {time.monotonic() - started:.0f} s")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
