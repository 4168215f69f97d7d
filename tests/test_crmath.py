"""posenc.crmath and native/include/posenc_crmath.h: correctly rounded pow, exp and log, the same
numbers in Python (fast and exact paths), in C (fast and accurate paths, and through the CPython
binding), in the numba kernels and in mpmath rounded once (tests/crmath_oracle.py), on random,
frequency-grid and adversarial inputs."""

from __future__ import annotations

import importlib.util
import math
import random
import subprocess

import numpy as np
import posenc
import pytest
from conftest import HERE, compile_c_test
from crmath_oracle import cr_exp, cr_log, cr_pow
from posenc import crmath
from posenc.crmath import _exact, _fast

F32 = lambda v: float(np.float32(v))


def h(value: str) -> float:
    return float.fromhex(value)


#: pow's known worst cases in double (CORE-MATH's pow.wc: 102 to 153 identical bits after the round bit).
POW_WORST = [(h("0x1.ffffffffffffcp-1"), h("0x1.fffffffffffffp-2")),
             (h("0x1.ffffffffffffcp-1"), h("-0x1.ffffffffffffdp-2")),
             (h("0x1.ffffffffffffp-1"), h("-0x1.ffffffffffff6p-3")),
             (h("0x1.ffffffffffff8p-1"), h("-0x1.ffffffffffffbp-3"))]
#: Exact midpoints between two doubles (3^34 and (2^27 - 1)^2 have 54 bits): ties, to even. glibc's pow
#: rounds the first three up.
POW_MIDPOINTS = [(9.0, 17.0), (81.0, 8.5), (3.0**32, 17 / 16), (float(2**27 - 1), 2.0), (7.0, 19.0)]
#: Subnormal results, overflow, huge exponents near 1, exact results.
POW_EDGES = [(2.0, -1074.0), (2.0, -1074.5), (0.5, 1060.2), (10.0, -310.0), (3.0, -678.3), (2.0, 1024.0),
             (2.0, 1023.99999999), (1 + 2**-52, 2.0**60), (1 - 2**-53, -(2.0**62)), (1e300, 1.02),
             (2.0**-1074, 0.5), (1e-300, -1.02), (3.0, 0.5), (16.0, 0.25), (10000.0, 0.5), (10000.0, 0.25)]
#: Hard cases of exp and log (CORE-MATH's exp.wc and log.wc, from Lefevre's searches: 45 to 64 identical bits).
EXP_WORST = [h(v) for v in ("0x1.0122ef37212ebp-1", "0x1.00d48a707b93ep-1", "0x1.0036671ff87efp-1",
                            "0x1.0303c5638675fp-1", "0x1.fedc746ddf8fap-1", "0x1.008eb56314daap+0",
                            "0x1.0138c96e1a075p+0", "0x1.1ccc04043b516p+0", "0x1.3159707fc0465p+0")]
LOG_WORST = [h(v) for v in ("0x1.a6ae5142326b5p+0", "0x1.a6ba95b1520f9p+0", "0x1.1e852e6951306p+1",
                            "0x1.000976581ce4ep+1", "0x1.24dea21900258p+1", "0x1.39e3e05fe5f35p+3",
                            "0x1.a455a70c31d8p+13", "0x1.8992bd496d364p+25", "0x1.a6004162f2b8cp+45")]
#: powf's hard cases (CORE-MATH's powf.wc, 44 to 51 identical bits) and float32 logs near a power of two.
POWF_WORST = [(h("0x1.ac63p+120"), h("0x1.0019e2p+0")), (h("0x1.767d72p-31"), h("0x1.002808p+0")),
              (h("0x1.aa25fp-122"), h("0x1.04d8e4p+0")), (h("0x1.49b684p-69"), h("0x1.1509f6p+0")),
              (h("0x1.9a1p-20"), h("0x1.ep+0")), (h("0x1.7632cp-45"), h("-0x1.5f9314p-23"))]
LOGF_HARD = [h(v) for v in ("0x1.827a74p-7", "0x1.2f1fd6p+3", "0x1.bacb4ap+25", "0x1.b121a6p+76", "0x1.6351d8p+95",
                            "0x1.969ce2p-93", "0x1.969cecp-93")]


def frequency_grid() -> list[tuple[float, float]]:
    """RoPE / sinusoidal exponents: 2i/d for the bases models use, d up to 8192 (a sample of each d)."""
    grid = []
    for base in (10000.0, 500000.0, 5e6, 1e6, 1e4 * 3, 2.0):
        for d in (64, 128, 1000, 8192):
            step = max(1, d // 96)
            grid += [(base, i / d) for i in range(0, d, 2 * step)]
    return grid


def random_cases(n: int, seed: int) -> list[tuple[float, float]]:
    rng = random.Random(seed)
    return [(math.exp(rng.uniform(-40, 40)) if k % 2 else rng.uniform(0.25, 4.0), rng.uniform(-25, 25))
            for k in range(n)]


# --- Python against mpmath ------------------------------------------------------------------------

def test_the_issue_value_is_the_correctly_rounded_one():
    """glibc's non-FMA pow gives ...b76p+9 (qemu -cpu Westmere, GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA)."""
    assert crmath.pow(500000.0, 0.484375).hex() == "0x1.2002bc41a7b77p+9" == cr_pow(500000.0, 0.484375).hex()
    inv, _ = posenc.RopeSpec(128, base=500000.0).inv_freq()
    assert inv[31] == 1.0 / h("0x1.2002bc41a7b77p+9")


@pytest.mark.parametrize("cases", ["grid", "random", "adversarial"])
def test_pow_is_mpmath_rounded_once(cases):
    xs = {"grid": frequency_grid(), "random": random_cases(3000, 1),
          "adversarial": POW_WORST + POW_MIDPOINTS + POW_EDGES}[cases]
    for x, y in xs:
        assert crmath.pow_value(x, y) == cr_pow(x, y), (x.hex(), y.hex())


def test_exp_and_log_are_mpmath_rounded_once():
    rng = random.Random(2)
    for x in [rng.uniform(-745, 709) for _ in range(1500)] + [rng.uniform(-1, 1) * 2.0**-rng.randint(0, 60)
                                                             for _ in range(300)] + EXP_WORST + [-745.0, 709.78]:
        assert crmath.exp_value(x) == cr_exp(x), x.hex()
    for x in ([math.exp(rng.uniform(-700, 700)) for _ in range(1500)]
              + [1 + rng.uniform(-1, 1) * 2.0**-rng.randint(1, 52) for _ in range(300)]
              + LOG_WORST + [2.0**-1074, 1.7976931348623157e308, 1 + 2**-52, 1 - 2**-53]):
        assert crmath.log_value(x) == cr_log(x), x.hex()


def test_float32_pow_and_log_are_rounded_once():
    rng = random.Random(3)
    for x, y in [(F32(math.exp(rng.uniform(-20, 20))), F32(rng.uniform(-8, 8))) for _ in range(1500)] + POWF_WORST:
        assert crmath.powf(x, y) == cr_pow(x, y, 24), (x.hex(), y.hex())
    for x in [F32(math.exp(rng.uniform(-80, 80))) for _ in range(1500)] + LOGF_HARD:
        assert crmath.logf(x) == cr_log(x, 24), x.hex()


def test_the_exact_path_alone_is_mpmath_rounded_once():
    """The decimal fallback, as if the fast path had failed everywhere (it runs once in ~2^25 calls)."""
    cases = random_cases(60, 4) + POW_WORST + POW_MIDPOINTS + POW_EDGES[:6] + frequency_grid()[::40]
    for x, y in cases:
        assert _exact.pow_exact(x, y) == cr_pow(x, y), (x.hex(), y.hex())
    for x, y in POWF_WORST + [(F32(x), F32(y)) for x, y in random_cases(30, 5)]:
        assert _exact.pow_exact(x, y, 24) == cr_pow(x, y, 24), (x.hex(), y.hex())
    for x in EXP_WORST + [-744.9, -710.1, 0.0, 1e-300]:
        assert _exact.exp_exact(x) == cr_exp(x)
    for x in LOG_WORST + LOGF_HARD + [2.0**-1074, 1 + 2**-52]:
        assert _exact.log_exact(x) == cr_log(x) and _exact.log_exact(x, 24) == cr_log(x, 24)


def test_midpoints_round_to_even_and_only_exact_powers_are_midpoints():
    for x, y in POW_MIDPOINTS:
        value = crmath.pow_value(x, y)
        assert int(math.frexp(value)[0] * 2**53) % 2 == 0  # the even neighbour
        assert _fast.pow_fast(x, y, 53)[1] is False  # a midpoint is never proven by the fast path
    midpoint = _exact.Fraction(3**34)
    assert _exact.is_power(9.0, 17.0, midpoint, 53) and _exact.is_power(3.0**32, 17 / 16, midpoint, 53)
    assert not _exact.is_power(9.0, 17.0, midpoint + 4, 53)  # the next midpoint up
    assert not _exact.is_power(3.0**32, -17 / 16, 1 / midpoint, 53)  # negative exponents never give one


def test_fast_path_error_bounds_hold_with_margin():
    """The bounds the rounding test uses (LOG_ERR 2^-80, EXP_ERR 2^-90) against mpmath: the largest
    error measured here is at least 2^4 below each."""
    import mpmath

    rng = random.Random(6)
    worst_log = worst_exp = 0.0
    with mpmath.workprec(300):
        for k in range(3000):
            x = math.exp(rng.uniform(-700, 700)) if k % 3 else 1 + rng.uniform(-2**-7, 2**-7) * 2.0**-rng.randint(0, 40)
            hi, lo = _fast.log_dd(x)
            true = mpmath.log(mpmath.mpf(x))
            worst_log = max(worst_log, float(abs((mpmath.mpf(hi) + lo - true) / true)))
            z = rng.uniform(-700, 700) if k % 2 else rng.uniform(-1, 1)
            hi, lo, q = _fast.exp_dd(z, 0.0)
            true = mpmath.exp(mpmath.mpf(z))
            worst_exp = max(worst_exp, float(abs((mpmath.ldexp(mpmath.mpf(hi) + lo, q) - true) / true)))
    assert worst_log < _fast.LOG_ERR / 16 and worst_exp < _fast.EXP_ERR / 16, \
        (math.log2(worst_log), math.log2(worst_exp))


def test_special_values_follow_math():
    for x, y in [(0.0, 2.0), (0.0, 3.0), (math.inf, 2.0), (math.inf, -2.0), (-math.inf, 3.0),
                 (2.0, math.inf), (0.5, math.inf), (2.0, -math.inf), (1.0, math.nan), (math.nan, 0.0),
                 (-8.0, 3.0), (-2.0, -3.0), (-2.0, 2.0), (-0.5, 1e300), (5.0, 0.0)]:
        got, want = crmath.pow(x, y), math.pow(x, y)
        assert got == want or (math.isnan(got) and math.isnan(want)), (x, y)
    assert crmath.pow(-3.0, 5.0) == -cr_pow(3.0, 5.0)
    for bad in [(-8.0, 1 / 3), (0.0, -1.0)]:
        with pytest.raises(ValueError):
            crmath.pow(*bad)
    with pytest.raises(OverflowError):
        crmath.pow(10.0, 400.0)
    with pytest.raises(OverflowError):
        crmath.exp(710.0)
    with pytest.raises(ValueError):
        crmath.log(0.0)
    assert crmath.exp(-math.inf) == 0.0 and crmath.log(math.inf) == math.inf and crmath.log(1.0) == 0.0
    assert crmath.pow_each(10.0, [400.0, 1.0]).tolist() == [math.inf, 10.0]  # arrays: inf, as numpy


# --- C: the header's fast and accurate paths ---------------------------------------------------------

@pytest.fixture(scope="module")
def c_crmath(tmp_path_factory):
    exe = compile_c_test(tmp_path_factory, "crmath_check.c", "-lm")

    def run(lines: list[str]) -> list[float]:
        out = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True,
                             check=True, timeout=600).stdout.split()
        assert len(out) == len(lines)
        return [float.fromhex(v) for v in out]
    run.exe = exe
    return run


def test_c_gives_the_python_and_mpmath_numbers(c_crmath):
    """Every public function and the accurate path alone ("!": Ziv's loop in fixed point), on the
    same inputs: equal to posenc.crmath and to mpmath rounded once."""
    rng = random.Random(7)
    pows = ([(500000.0, 0.484375)] + frequency_grid()[::3] + random_cases(1500, 8) + POW_WORST + POW_MIDPOINTS
            + POW_EDGES)
    exps = [rng.uniform(-745, 709) for _ in range(600)] + EXP_WORST
    logs = [math.exp(rng.uniform(-700, 700)) for _ in range(600)] + LOG_WORST + [2.0**-1074, 1 - 2**-53]
    powfs = [(F32(x), F32(y)) for x, y in random_cases(600, 9)] + POWF_WORST
    logfs = [F32(math.exp(rng.uniform(-80, 80))) for _ in range(600)] + LOGF_HARD
    cases = ([("pow", x, y, crmath.pow_value(x, y)) for x, y in pows]
             + [("exp", x, 0.0, crmath.exp_value(x)) for x in exps]
             + [("log", x, 0.0, crmath.log_value(x)) for x in logs]
             + [("powf", x, y, crmath.powf(x, y)) for x, y in powfs]
             + [("logf", x, 0.0, crmath.logf(x)) for x in logfs])
    hard = POW_WORST + POW_MIDPOINTS + POW_EDGES  # subnormal results, overflow, |y| near 2^62 among them
    accurate = [(op + "!", x, y, want) for op, x, y, want in cases[::7] + [c for c in cases if c[1:3] in hard]
                + [("exp", x, 0.0, crmath.exp_value(x)) for x in (-745.1, -709.5, -708.0, 709.7)]]
    cases += accurate
    got = c_crmath([f"{op} {x.hex()} {y.hex()}" for op, x, y, _ in cases])
    bad = [(op, x.hex(), y.hex(), g, want) for (op, x, y, want), g in zip(cases, got) if g != want]
    assert not bad, bad[:5]
    oracle = {"pow": cr_pow, "exp": cr_exp, "log": cr_log, "powf": lambda x, y: cr_pow(x, y, 24),
              "logf": lambda x: cr_log(x, 24)}
    for op, x, y, want in cases[::5]:
        name = op.rstrip("!")
        assert want == (oracle[name](x, y) if name.startswith("pow") else oracle[name](x)), (op, x.hex(), y.hex())


def test_c_special_values_follow_c99(c_crmath):
    cases = [(0.0, -1.0, math.inf), (-0.0, -1.0, -math.inf), (-0.0, 2.0, 0.0), (-math.inf, 3.0, -math.inf),
             (-math.inf, -3.0, -0.0), (2.0, math.inf, math.inf), (0.5, math.inf, 0.0), (-1.0, math.inf, 1.0),
             (1.0, math.nan, 1.0), (math.nan, 0.0, 1.0), (-8.0, 3.0, -512.0), (-2.0, 0.5, math.nan)]
    got = c_crmath([f"pow {x.hex()} {y.hex()}" for x, y, _ in cases])
    for (x, y, want), g in zip(cases, got):
        assert (math.isnan(g) and math.isnan(want)) or (g == want and math.copysign(1, g) == math.copysign(1, want))
    log_zero, log_negative, exp_minus_inf = c_crmath(["log 0x0p+0 0", "log -0x1p+0 0", "exp -inf 0"])
    assert log_zero == -math.inf and math.isnan(log_negative) and exp_minus_inf == 0.0


def test_every_float32_log_is_decided_by_the_fast_path(c_crmath):
    """A sample (every 4099th float32; `crmath_check sweep 1` runs all 2^31, 2.5 min: log_d within
    2^-44.01 of the double-double log and 0 undecided, docs/platforms.md): T5's float32 logs never
    need the accurate path, and the plain-double first try keeps well inside LOG_D_ERR."""
    out = subprocess.run([str(c_crmath.exe), "sweep", "4099"], capture_output=True, text=True, check=True).stdout
    report = dict(line.split() for line in out.splitlines())
    assert float(report["log_d"]) < math.log2(_fast.LOG_D_ERR) - 3 and report["undecided"] == "0"


# --- the binding, numba and the tables ---------------------------------------------------------------

def test_binding_arrays_give_the_python_numbers():
    from posenc.native import BINDING

    if BINDING is None:
        pytest.skip("the native binding is not built: pow_each runs the Python code only")
    exps = np.array([y for _, y in frequency_grid()] + [y for _, y in random_cases(500, 10)] + [400.0, -1e4])
    for base in (10000.0, 500000.0, 2.0, 0.9371):
        out = np.empty_like(exps)
        BINDING.cr_pow_each(base, exps, out)
        assert out.tolist() == [crmath.pow_value(base, e) for e in exps.tolist()]
    out = np.empty_like(exps)
    BINDING.cr_exp_each(exps * 7.3, out)
    assert out.tolist() == [crmath.exp_value(v) for v in (exps * 7.3).tolist()]


def test_numba_kernels_give_the_python_numbers():
    from posenc.kernels import crmath as nb_crmath

    for x, y in random_cases(400, 11) + POW_MIDPOINTS + POW_WORST:
        lh, ll = nb_crmath.cr_log_dd(x)
        assert nb_crmath.cr_pow_from_log(lh, ll, x, y) == crmath.pow_value(x, y)
    lh, ll = nb_crmath.cr_log_dd(0.7)
    assert nb_crmath.cr_pow_from_log(lh, ll, 0.7, math.inf) == 0.0  # a non-finite power: math.pow's value
    assert nb_crmath.cr_pow_from_log(lh, ll, 0.7, -math.inf) == math.inf
    for x in [F32(v) for v, _ in random_cases(400, 12)] + LOGF_HARD:
        assert nb_crmath.cr_logf(x) == crmath.logf(x) and nb_crmath.cr_log(x) == crmath.log_value(x)


def test_tables_are_the_generators_output():
    spec = importlib.util.spec_from_file_location("gen_crmath_tables", HERE.parent / "native" / "tools"
                                                  / "gen_crmath_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.PYTHON_PATH.read_text() == module.python_source()
    assert module.C_PATH.read_text() == module.c_header()


def test_frequencies_do_not_depend_on_numpy_or_libm():
    """numpy's float64 power/exp run SVML on AVX-512 CPUs, glibc's pow differs with and without FMA
    (and misrounds 3 of 4096 Vaswani exponents at d = 8192 even with it): specs take crmath's."""
    d = 8192
    assert posenc.SinusoidalSpec(d).freqs.tolist() == [1.0 / cr_pow(10000.0, 2.0 * i / d) for i in range(d // 2)]
    log_inc = cr_log(10000.0) / (d // 2 - 1)
    t2t = posenc.SinusoidalSpec(d, layout="t2t").freqs.tolist()
    assert t2t[::97] == [cr_exp(i * -log_inc) for i in range(d // 2)][::97]
