"""Every library entry point, fed every spec and config fixture with each key mutated to a value of
every JSON type or an extreme number (or removed): it answers, or raises PosencError naming a field.
Never a TypeError, OverflowError, ZeroDivisionError, a numpy floating-point error or a non-finite result."""

import copy
import json
import subprocess
import sys

import numpy as np
import pytest
from mutation_support import (
    ALIBI_BIAS_ARGS,
    ALIBI_SLOPES_ARGS,
    ALIBI_SPECS,
    JSON_VALUES,
    LEARNED_SPECS,
    LIBRARY_ONLY_VALUES,
    ROPE_CALL_ARGS,
    ROPE_SPECS,
    SINUSOIDAL_ARGS,
    SINUSOIDAL_SPECS,
    T5_ARGS,
    TABLE_SPECS,
    hf_configs,
    mutated,
    mutations,
)

import posenc
from posenc.encodings import AlibiSpec, LearnedSpec, RopeSpec, SinusoidalSpec
from posenc.errors import PosencError
from posenc.tables import TableSpec

VALUES = JSON_VALUES + LIBRARY_ONLY_VALUES


def _finite(result) -> None:
    arrays = result if isinstance(result, tuple) else (result,)
    for arr in arrays:
        if isinstance(arr, np.ndarray) and arr.dtype.kind == "f" and not np.isfinite(arr).all():
            raise AssertionError("non-finite values in the result")


def _rope_uses(spec: RopeSpec):
    inv, attention = posenc.rope_inv_freq(spec, seq_len=4096)
    _finite(inv)
    if not np.isfinite(attention):
        raise AssertionError(f"attention factor {attention}")
    _finite(posenc.rope_inv_freq(spec)[0])
    _finite(posenc.rope_cos_sin([0, 1, 4000], spec))
    x = np.ones((2, 3, spec.head_dim), dtype=np.float32)
    _finite(posenc.rope_apply(x, [0, 1, 2], spec))


def _from_rope_dict(doc):
    _rope_uses(RopeSpec.from_dict(doc))


def _from_hf(doc):
    _rope_uses(RopeSpec.from_hf_config(doc))


def _models_from_hf(doc):
    for entry in posenc.from_hf_config(doc).encodings.values():
        if isinstance(entry.spec, RopeSpec):
            _rope_uses(entry.spec)


def _sinusoidal(doc):
    spec = SinusoidalSpec.from_dict(doc)
    _finite(posenc.sinusoidal([0, 1, 7], **{k: v for k, v in spec.to_dict().items() if k != "kind"}))


def _table(doc):
    spec = TableSpec.from_dict(doc)
    out = np.empty(spec.shape, dtype=spec.np_dtype)
    spec.fill(out)
    _finite(out)


def _has_one_rope(config: dict) -> bool:
    """Whether RopeSpec.from_hf_config applies (one RoPE layer type; the others take posenc.from_hf_config)."""
    specs = [entry.spec for entry in posenc.from_hf_config(config).encodings.values()]
    return sum(isinstance(spec, RopeSpec) for spec in specs) == 1


def _cases():
    """(entry point name, callable, fixture doc, required call arguments) for every fixture."""
    for name, doc in ROPE_SPECS.items():
        yield f"RopeSpec.from_dict[{name}]", _from_rope_dict, doc
    for name, doc in SINUSOIDAL_SPECS.items():
        yield f"SinusoidalSpec.from_dict[{name}]", _sinusoidal, doc
    for name, doc in ALIBI_SPECS.items():
        yield f"AlibiSpec.from_dict[{name}]", lambda d: _finite(AlibiSpec.from_dict(d).slopes), doc
    for name, doc in LEARNED_SPECS.items():
        yield f"LearnedSpec.from_dict[{name}]", LearnedSpec.from_dict, doc
    for name, doc in TABLE_SPECS.items():
        yield f"TableSpec.from_dict[{name}]", _table, doc
    for name, doc in hf_configs().items():
        if _has_one_rope(doc):
            yield f"RopeSpec.from_hf_config[{name}]", _from_hf, doc
        yield f"posenc.from_hf_config[{name}]", _models_from_hf, doc
    yield "t5_relative_position_bucket", lambda d: posenc.t5_relative_position_bucket(**d), T5_ARGS
    yield "alibi_bias", lambda d: _finite(np.nan_to_num(posenc.alibi_bias(**d), neginf=0.0)), ALIBI_BIAS_ARGS
    yield "alibi_slopes", lambda d: _finite(posenc.alibi_slopes(**d)), ALIBI_SLOPES_ARGS
    yield "sinusoidal", lambda d: _finite(posenc.sinusoidal(**d)), SINUSOIDAL_ARGS
    yield "rope_cos_sin", lambda d: _finite(posenc.rope_cos_sin(spec=ROPE_SPECS["dynamic"], **d)), ROPE_CALL_ARGS


#: Positional arguments of the call entry points: leaving one out is Python's TypeError, not a value error.
REQUIRED = ("relative_position", "n_heads", "q_len", "positions", "dim")
CASES = list(_cases())


def failures_of(fn, doc, values, required=()) -> list[str]:
    """Every mutation of `doc` for which `fn` raised anything but PosencError (or returned garbage)."""
    bad = []
    for label, candidate in mutations(doc, values, required):
        try:
            with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
                fn(candidate)
        except PosencError as exc:
            if not exc.field or not isinstance(exc.field, str):
                bad.append(f"{label}: PosencError without a field: {exc}")
        except Exception as exc:  # noqa: BLE001 - the point of the test
            bad.append(f"{label}: {type(exc).__name__}: {exc}"[:200])
    return bad


@pytest.mark.parametrize("name,fn,doc", CASES, ids=[c[0] for c in CASES])
def test_every_mutation_is_answered_or_a_posenc_error(name, fn, doc):
    required = REQUIRED if "[" not in name else ()
    bad = failures_of(fn, doc, VALUES, required)
    assert not bad, f"{len(bad)} mutations escaped as other errors:\n" + "\n".join(bad[:40])


def test_the_fixtures_themselves_are_valid():
    for name, fn, doc in CASES:
        fn(copy.deepcopy(doc))


FAMILY_READER_CHECK = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # the old reader builds tuple(range(n)): fail fast
import posenc
from posenc.errors import PosencError
bad = []
for config in json.loads(sys.argv[1]):
    try:
        posenc.from_hf_config(config)
    except PosencError:
        pass
    except Exception as exc:
        bad.append(f"num_hidden_layers={config['num_hidden_layers']}: {type(exc).__name__}")
print(json.dumps(bad))
"""


def test_family_readers_bound_their_keys():
    """In a child process with a 2 GiB address-space limit: unbounded, the old reader takes all memory."""
    configs = [mutated(doc, ("num_hidden_layers",), value) for doc in hf_configs().values()
               if "num_hidden_layers" in doc for value in (2**31, 2**53 + 1, 2**63 - 1)]
    out = subprocess.run([sys.executable, "-c", FAMILY_READER_CHECK, json.dumps(configs)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    bad = json.loads(out.stdout)
    assert not bad, bad[:10]
