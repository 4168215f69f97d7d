"""Regenerate hard_cases_f32.json: the float32 sin/cos table elements nearest a rounding boundary.

For each spec below and a sample of its frequency indices, every integer position 0..2^24-1 is
scanned by tests/sincos_oracle.py's longdouble oracle (the exact angle, x87 sinl/cosl, angle
addition; mpmath where that is not sure), and the elements whose exact value amp * sin(p w)
(or cos) lies nearest a float32 midpoint are kept: the HARD_ULP nearest in float32 ulps (what
decides a relative-error fast path) and the HARD_AMP nearest in absolute distance over amp
among values of at least 2^-16 amp (what decides an absolute-error fast path, such as a float64
kernel with angle addition, rounded to float32). Each kept element's correctly rounded float32 and
distance are mpmath's (200 bits and more until the rounding is decided), not the scan's.
tests/test_correct_rounding.py holds every path to them.

    python tests/golden/hard_cases_f32.py      # ~1 minute on one x86-64 core

Needs numpy's longdouble with a 64-bit (x87) or 113-bit (quad) significand, as on Linux x86-64;
elsewhere (arm64 macOS, Windows: longdouble is a double) it stops and says so: an mpmath-only scan
of 2^24 positions per column would take days. Needs posenc only for the specs' frequencies and
attention factors (their float64 values are written into the JSON, and the tests check the specs
still give them).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

import sincos_oracle as oracle

OUT = HERE / "hard_cases_f32.json"
STOP = 2**24
#: (kind, constructor arguments): Vaswani's sinusoidal table, Llama-3's RoPE base, and a YaRN RoPE
#: (attention factor 0.1 ln 4 + 1, so amp != 1)
SPECS = {
    "sinusoidal-d128": ("sinusoidal", {"dim": 128}),
    "rope-d128-base500000": ("rope", {"head_dim": 128, "base": 500000.0}),
    "yarn-d128-factor4": ("rope", {"head_dim": 128, "base": 10000.0,
                                   "scaling": {"rope_type": "yarn", "factor": 4.0,
                                               "original_max_position_embeddings": 4096}}),
}
#: frequency indices: 0 is w = 1 (the highest frequency), 63 the lowest of d = 128
INDICES = (0, 1, 7, 31, 63)
HARD_ULP = 200
HARD_AMP = 100
#: values below SMALL * amp are left out of the absolute ranking: there every gap is tiny (sin 0 = 0
#: exactly, the first positions of low frequencies), and the ulp ranking holds their hard cases
SMALL = 2.0**-16


def spec_frequencies(kind: str, args: dict) -> tuple[np.ndarray, float]:
    """(frequencies, amplitude) of a spec as posenc defines them."""
    from posenc.encodings import RopeSpec, SinusoidalSpec

    if kind == "sinusoidal":
        spec = SinusoidalSpec(**args)
        return np.asarray(spec.freqs), spec.amplitude
    return RopeSpec(**args).inv_freq()


class Nearest:
    """The `size` smallest keys seen, with their (position, index, which) labels."""

    def __init__(self, size: int):
        self.size = size
        self.keys = np.empty(0)
        self.labels: list[tuple[int, int, str]] = []

    def offer(self, keys: np.ndarray, start: int, index: int, which: str) -> None:
        take = np.argpartition(keys, self.size)[: self.size] if keys.size > self.size else np.arange(keys.size)
        merged = np.concatenate([self.keys, keys[take]])
        labels = self.labels + [(start + int(k), index, which) for k in take]
        keep = np.argsort(merged, kind="stable")[: self.size]
        self.keys, self.labels = merged[keep], [labels[k] for k in keep]


def scan_spec(name: str, freqs: np.ndarray, amp: float) -> tuple[Nearest, Nearest, int]:
    """Scan the sampled columns of one spec: (nearest in ulps, nearest over amp, elements mpmath decided)."""
    by_ulp, by_amp, resolved = Nearest(HARD_ULP), Nearest(HARD_AMP), 0
    for index in INDICES:
        began = time.perf_counter()
        for chunk in oracle.scan_column(float(freqs[index]), amp, STOP):
            resolved += chunk.resolved
            for which in oracle.WHICH:
                by_ulp.offer(chunk.dist_ulp[which], chunk.start, index, which)
                small = np.abs(chunk.values[which]) < SMALL * abs(amp)
                by_amp.offer(np.where(small, np.inf, chunk.dist_amp[which]), chunk.start, index, which)
        print(f"  {name} i={index} w={float(freqs[index])!r}: {STOP} positions in "
              f"{time.perf_counter() - began:.1f} s, nearest {by_ulp.keys[0]:.3g} ulp", flush=True)
    return by_ulp, by_amp, resolved


def hard_case(p: int, index: int, which: str, w: float, amp: float, ranking: str) -> dict:
    """One element, its rounding and distance from mpmath (checked at twice the precision)."""
    value = oracle.correctly_rounded(float(p), w, amp, which, "float32")
    again, dist_ulp, dist_abs = oracle.midpoint_distance(oracle.exact_value(float(p), w, amp, which), "float32")
    assert value == again
    return {"p": p, "i": index, "which": which, "f32": f"0x{int(oracle.bits(value, 'float32')):08x}",
            "value": float(np.float32(value)).hex(), "dist_ulp": dist_ulp, "dist_amp": dist_abs / abs(amp),
            "ranking": ranking}


def _json_text(golden: dict) -> str:
    """The JSON with one line per hard case (readable diffs when it is regenerated)."""
    blocks, specs = {}, []
    for k, spec in enumerate(golden["specs"]):
        blocks[f'"@cases{k}@"'] = "[\n" + ",\n".join("    " + json.dumps(case) for case in spec["cases"]) + "\n   ]"
        specs.append({**spec, "cases": f"@cases{k}@"})
    text = json.dumps({**golden, "specs": specs}, indent=1)
    for placeholder, block in blocks.items():
        text = text.replace(placeholder, block)
    return text + "\n"


def main() -> None:
    if not oracle.LONGDOUBLE_OK:
        sys.exit(f"numpy's longdouble has {oracle.LONGDOUBLE_BITS} significand bits here: the scan needs 64 (x87) "
                 "or 113; run this on Linux x86-64")
    error = oracle.longdouble_error()
    print(f"longdouble oracle: worst error {error:.2f} * 2^-64 on random samples (margin {oracle.MARGIN * 2**64:.0f})")
    assert error * 2.0**-64 < oracle.MARGIN / 16
    specs = []
    for name, (kind, args) in SPECS.items():
        freqs, amp = spec_frequencies(kind, args)
        by_ulp, by_amp, resolved = scan_spec(name, freqs, amp)
        seen, cases = set(), []
        for ranking, nearest in (("ulp", by_ulp), ("amp", by_amp)):
            for p, index, which in nearest.labels:
                if (p, index, which) not in seen:
                    seen.add((p, index, which))
                    cases.append(hard_case(p, index, which, float(freqs[index]), amp, ranking))
        specs.append({"name": name, "kind": kind, "args": args, "amplitude": float(amp).hex(),
                      "freqs": {str(i): float(freqs[i]).hex() for i in INDICES},
                      "elements_scanned": STOP * len(INDICES) * 2, "decided_by_mpmath": resolved, "cases": cases})
        print(f"{name}: {len(cases)} hard cases, {resolved} elements decided by mpmath", flush=True)
    OUT.write_text(_json_text({
        "about": "float32 sin/cos elements amp*sin(p*w), amp*cos(p*w) (p, w, amp exact) nearest a float32 rounding "
                 "boundary over integer positions 0..2^24-1, per spec and sampled frequency index i; f32 is the "
                 "correctly rounded value's bits (mpmath), dist_ulp its distance to the boundary in float32 ulps, "
                 "dist_amp the same absolute over amp. Written by tests/golden/hard_cases_f32.py.",
        "positions": [0, STOP - 1], "specs": specs}))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
