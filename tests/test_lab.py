"""`posenc lab`: the smoke size run as a user runs it (a fresh interpreter, the CLI), then checked:
rerun determinism, the results file's configuration, that every scheme's signal is the one posenc
serves, and only the effects robust at this size (training works, the training length beats
chance, structural facts such as dynamic NTK leaving the training length alone)."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import posenc  # noqa: E402
from posenc.cli import main  # noqa: E402
from posenc.lab import results  # noqa: E402
from posenc.lab.budgets import BUDGETS  # noqa: E402
from posenc.lab.models import apply_rotary  # noqa: E402
from posenc.lab.progress import Progress  # noqa: E402
from posenc.lab.run import run_lab  # noqa: E402
from posenc.lab.schemes import SCHEMES  # noqa: E402
from posenc.lab.signals import Geometry, causal_mask, signals  # noqa: E402
from posenc.lab.tasks import CopyTask, MarkovSource  # noqa: E402
from posenc.plots import render_lab  # noqa: E402

SMOKE = BUDGETS["smoke"]
#: What the smoke run may take here, its own wall time (seconds); about a minute on two idle cores is the aim.
SMOKE_SECONDS = 150


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """`posenc lab --budget smoke` in a fresh interpreter with its own hash seed: (document, path, seconds)."""
    path = tmp_path_factory.mktemp("lab") / "smoke.json"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "posenc.cli", "lab", "--budget", "smoke", "--out", str(path)],
                          capture_output=True, text=True, timeout=600, env=os.environ | {"PYTHONHASHSEED": "random"})
    assert done.returncode == 0, done.stderr
    assert "posenc lab [" in done.stderr and "100%" in done.stderr  # the progress line
    return results.read(path), path, time.monotonic() - started, done.stdout


def evaluations(doc: dict) -> dict[tuple[str, str], list[dict]]:
    return {(task, scheme): points for task, scheme, points in results.rows(doc)}


def test_smoke_runs_every_scheme_and_task_in_time(smoke):
    doc, _, seconds, stdout = smoke
    assert set(evaluations(doc)) == {(task, scheme) for task in SMOKE.tasks for scheme in SCHEMES}
    assert doc["timing_seconds"]["total"] < SMOKE_SECONDS, doc["timing_seconds"]
    for task in SMOKE.tasks:  # the summary table names every scheme
        assert f"{task}: " in stdout
    assert all(scheme in stdout for scheme in SCHEMES)


def test_a_rerun_reproduces_the_numbers_exactly(smoke):
    """A rerun in this interpreter (another hash seed, other torch state before it) of a subset:
    every seed is derived from names, never from the order of the runs, so the subset's rows and
    configuration are those of the full run, to the bit."""
    doc, _, _, _ = smoke
    torch.manual_seed(12345)  # the caller's RNG state must not matter
    chosen = ["rope_yarn", "alibi"]
    rerun = json.loads(results.dumps(run_lab("smoke", schemes=chosen, tasks=["copy"], seed=0)))
    first = evaluations(doc)
    assert evaluations(rerun) == {key: first[key] for key in first if key[0] == "copy" and key[1] in chosen}
    full_runs = {(run["task"], run["trained_as"]): run["training"] for run in doc["results"]}
    for run in rerun["results"]:
        assert run["training"] == full_runs[(run["task"], run["trained_as"])]
    copy_config = doc["configuration"]["tasks"]["copy"]
    rerun_config = rerun["configuration"]["tasks"]["copy"]
    assert rerun_config["schemes"] == {name: copy_config["schemes"][name] for name in chosen}
    assert {k: v for k, v in rerun_config.items() if k != "schemes"} == \
        {k: v for k, v in copy_config.items() if k != "schemes"}


def test_jobs_give_the_serial_runs_numbers(smoke):
    """`--jobs 2`: the trained models in two spawned processes, the document's runs and configuration those
    of the serial run, in its order, to the bit."""
    doc, _, _, _ = smoke
    chosen = ["alibi", "nope"]
    parallel = json.loads(results.dumps(run_lab("smoke", schemes=chosen, seed=0, jobs=2, progress=True)))
    serial = [run for run in doc["results"] if run["trained_as"] in chosen]
    assert [(run["task"], run["trained_as"]) for run in parallel["results"]] == \
        [(run["task"], run["trained_as"]) for run in serial]
    for ours, theirs in zip(parallel["results"], serial):
        assert ours["training"] == theirs["training"]
        assert ours["evaluations"] == {name: theirs["evaluations"][name] for name in ours["evaluations"]}
    assert parallel["timing_seconds"]["jobs"] == 2


def test_lab_restores_the_callers_torch_settings():
    before = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    run_lab("smoke", schemes=["nope"], tasks=["lm"])
    assert (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()) == before
    assert torch.equal(torch.rand(3), expected)


def test_results_file_holds_the_full_configuration(smoke):
    doc, _, _, _ = smoke
    assert doc["format"] == results.FORMAT
    config = doc["configuration"]
    assert config["seed"] == 0
    assert config["budget"] == json.loads(json.dumps(SMOKE.to_dict()))
    environment = doc["environment"]
    assert environment["posenc"] == posenc.__version__ and environment["torch"] == torch.__version__
    assert environment["numpy"] == np.__version__ and environment["torch_threads"] == SMOKE.threads
    for key in ("python", "platform", "machine", "cpu", "cpu_count", "torch_cpu_capability", "posenc_commit"):
        assert key in environment
    for task, plan in SMOKE.tasks.items():
        entry = config["tasks"][task]
        assert entry["plan"]["train_len"] == plan.train_len and entry["plan"]["eval_lengths"] == list(plan.eval_lengths)
        assert entry["geometry"]["extension"] == max(plan.eval_lengths) / plan.train_len
        assert entry["task"]["vocab"] == plan.params["vocab"]
        for name, scheme in SCHEMES.items():
            described = entry["schemes"][name]
            assert described["trained_as"] == scheme.trained_as
            assert ("rope" in described["eval"]) == scheme.rotary and ("alibi" in described["eval"]) == scheme.alibi
            if scheme.alibi:
                assert described["eval"]["alibi_slopes"] == posenc.alibi_slopes(SMOKE.model.n_heads).tolist()
            if scheme.scaling:
                assert described["train"]["rope"]["scaling"] == {"rope_type": "default"}
                assert described["eval"]["rope"]["scaling"]["rope_type"] == scheme.scaling
            if scheme.scaling in ("linear", "ntk", "yarn"):  # set for each evaluated length
                by_length = described["eval_rope_by_length"]
                assert [by_length[str(n)]["scaling"]["factor"] for n in plan.eval_lengths] == \
                    [max(1.0, n / plan.train_len) for n in plan.eval_lengths]
    for run in doc["results"]:
        plan = SMOKE.tasks[run["task"]]
        assert run["training"]["steps"] == plan.steps and len(run["training"]["loss_curve"]) == 10
        for points in run["evaluations"].values():
            assert [p["length"] for p in points] == list(plan.eval_lengths)
            metric = {"lm": "perplexity", "copy": "accuracy"}[run["task"]]
            for p in points:
                assert p[metric] is not None and math.isfinite(p["attention_entropy"])
                assert len(p["attention_entropy_by_layer"]) == SMOKE.model.n_layers


# --- the signals are posenc's ----------------------------------------------------------------------------

GEOMETRY = Geometry(d_model=32, n_heads=4, train_len=16, max_len=128, rope_base=10000.0)


def _expected_rope(scaling: str | None, length: int) -> posenc.RopeSpec:
    """The evaluation spec posenc.lab.signals promises for each scaling at `length` positions, built here
    independently: a static scaling set for that length (factor length / 16, at least 1), dynamic NTK set
    once for the longest length (factor 128 / 16)."""
    head_dim, factor = GEOMETRY.head_dim, max(1.0, length / 16)
    return {None: posenc.RopeSpec(head_dim),
            "linear": posenc.RopeSpec(head_dim, scaling={"rope_type": "linear", "factor": factor}),
            "ntk": posenc.RopeSpec(head_dim, scaling={"rope_type": "ntk", "factor": factor}),
            "dynamic": posenc.RopeSpec(head_dim, scaling={"rope_type": "dynamic", "factor": 8.0},
                                       max_position_embeddings=16),
            "yarn": posenc.RopeSpec(head_dim, scaling={"rope_type": "yarn", "factor": factor},
                                    original_max_position_embeddings=16)}[scaling]


@pytest.mark.parametrize("name", list(SCHEMES))
@pytest.mark.parametrize("length", [16, 64, 128])
def test_each_schemes_signal_is_the_one_posenc_serves(name, length):
    scheme = SCHEMES[name]
    positions = np.arange(length)
    for phase in ("train", "eval"):
        signal = signals(scheme, GEOMETRY, length, phase)
        if scheme.absolute == "sinusoidal":
            assert np.array_equal(signal.absolute.numpy(), posenc.sinusoidal(positions, GEOMETRY.d_model))
        else:
            assert signal.absolute is None
        if scheme.rotary:
            spec = _expected_rope(scheme.scaling, length) if phase == "eval" else posenc.RopeSpec(GEOMETRY.head_dim)
            cos, sin = posenc.rope_cos_sin(positions, spec, arrangement="cat")
            assert np.array_equal(signal.cos.numpy(), cos) and np.array_equal(signal.sin.numpy(), sin)
        else:
            assert signal.cos is None and signal.sin is None
        if scheme.alibi:
            slopes = posenc.alibi_slopes(GEOMETRY.n_heads)
            distance = positions[:, None] - positions[None, :]
            expected = np.where(distance >= 0, -slopes[:, None, None] * distance, -np.inf).astype(np.float32)
            assert np.array_equal(signal.bias.numpy(), expected)
        else:
            assert torch.equal(signal.bias, causal_mask(length))


def test_rope_alibi_is_posencs_rope_alibi():
    spec = posenc.RopeAlibiSpec(rope=posenc.RopeSpec(GEOMETRY.head_dim), n_heads=GEOMETRY.n_heads)
    both = posenc.rope_alibi(np.arange(40), spec)
    signal = signals(SCHEMES["rope_alibi"], GEOMETRY, 40, "eval")
    n_freq = GEOMETRY.head_dim // 2
    assert np.array_equal(signal.cos.numpy()[:, :n_freq], both.cos)
    assert np.array_equal(signal.sin.numpy()[:, n_freq:], both.sin)
    assert np.array_equal(signal.bias.numpy(), both.bias)


@pytest.mark.parametrize("scaling", [None, "yarn", "dynamic"])
def test_the_models_rotation_is_posencs_rope_apply(scaling):
    """The attention's rotation with the scheme's cos/sin rotates as posenc.rope_apply (layout "half")."""
    length = 100
    spec = _expected_rope(scaling, length)
    x = np.random.default_rng(3).standard_normal((2, 4, length, GEOMETRY.head_dim))
    cos, sin = (torch.from_numpy(t) for t in posenc.rope_cos_sin(np.arange(length), spec, dtype="float64",
                                                                    arrangement="cat"))
    rotated = apply_rotary(torch.from_numpy(x), cos, sin).numpy()
    np.testing.assert_allclose(rotated, posenc.rope_apply(x, np.arange(length), spec, layout="half"),
                               rtol=0, atol=1e-12)


# --- the tasks ------------------------------------------------------------------------------------------

def test_markov_source_floor_is_its_own_probability():
    source = MarkovSource(vocab=5, order=2, concentration=0.5, seed=1)
    batch = source.batch(np.random.default_rng(0), 3, 50)
    assert np.array_equal(batch.inputs[:, 1:], batch.targets[:, :-1])
    first = batch.targets[0]
    for t in range(2, 49):  # target t is token t+1 of the sequence; its context the two before it
        context = batch.inputs[0, t - 1] * 5 + batch.inputs[0, t]
        assert batch.source_nll[0, t] == pytest.approx(-math.log(source.transitions[context, first[t]]))
    assert np.allclose(batch.source_nll[:, 0], math.log(5))  # the second token is still uniform


def test_copy_task_scores_exactly_the_copy():
    task = CopyTask(vocab=7)
    batch = task.batch(np.random.default_rng(0), 2, 10)
    assert batch.inputs[0, 5] == task.separator and batch.scored[0].tolist() == [False] * 5 + [True] * 5
    assert np.array_equal(batch.targets[:, 5:], batch.inputs[:, :5])
    with pytest.raises(posenc.PosencError, match="even length"):
        task.batch(np.random.default_rng(0), 1, 9)


# --- what the smoke size shows -------------------------------------------------------------------------

def test_training_works_and_the_training_length_beats_chance(smoke):
    doc, _, _, _ = smoke
    for run in doc["results"]:
        assert run["training"]["loss_last"] < run["training"]["loss_first"] - 0.05, run["task"]
    vocab = {task: plan.params["vocab"] for task, plan in SMOKE.tasks.items()}
    for (task, scheme), points in evaluations(doc).items():
        if SCHEMES[scheme].trained_as != scheme:
            continue  # a test-time scaling is RoPE's model (test_scalings_leave_the_training_length_alone)
        at_train = points[0]
        if task == "lm":
            assert at_train["perplexity"] < 0.9 * vocab[task], scheme
        else:
            assert at_train["accuracy"] > 1.5 / vocab[task], scheme


def test_no_model_beats_the_source(smoke):
    doc, _, _, _ = smoke
    for (task, scheme), points in evaluations(doc).items():
        if task == "lm":
            assert all(p["perplexity"] > p["source_perplexity"] for p in points), scheme


def test_scalings_leave_the_training_length_alone(smoke):
    """At the training length every test-time scaling is plain RoPE: a static one is set for that length
    (factor 1), dynamic NTK changes nothing up to max_position_embeddings; past it, each changes the model."""
    doc, _, _, _ = smoke
    rows = evaluations(doc)
    for task in SMOKE.tasks:
        for scaling in ("rope_linear", "rope_ntk", "rope_dynamic", "rope_yarn"):
            assert rows[(task, scaling)][0] == rows[(task, "rope")][0], scaling
            assert rows[(task, scaling)][-1] != rows[(task, "rope")][-1], scaling


def test_attention_entropy_grows_with_length_and_alibi_bounds_it(smoke):
    """Without positions attention spreads over the growing prefix; ALiBi's bias keeps it nearer:
    both follow from the softmax, whatever the training did."""
    doc, _, _, _ = smoke
    rows = evaluations(doc)
    for task in SMOKE.tasks:
        nope = [p["attention_entropy"] for p in rows[(task, "nope")]]
        alibi = [p["attention_entropy"] for p in rows[(task, "alibi")]]
        assert nope == sorted(nope)
        assert alibi[-1] - alibi[0] < nope[-1] - nope[0]
        assert all(p["attention_entropy"] <= p["uniform_attention_entropy"] + 1e-9 for p in rows[(task, "nope")])


# --- the command line and the figure ---------------------------------------------------------------------

def test_cli_refuses_unknown_names_before_training(tmp_path, capsys):
    assert main(["lab", "--schemes", "rope,xpos", "--out", str(tmp_path / "r.json")]) == 2
    assert "schemes: unknown ['xpos']" in capsys.readouterr().err
    assert main(["lab", "--tasks", "lm,reverse", "--out", str(tmp_path / "r.json")]) == 2
    assert main(["lab", "--out", str(tmp_path / "missing" / "r.json")]) == 2
    assert "out: cannot write" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_without_torch_the_error_names_the_extra():
    code = ("import sys; sys.modules['torch'] = None\n"
            "from posenc.cli import main\n"
            "sys.exit(main(['lab', '--out', 'never.json']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "posenc[torch]" in done.stderr and "torch" in done.stderr


def test_plot_lab_draws_the_results(smoke, tmp_path):
    doc, path, _, _ = smoke
    drawn, summary = render_lab(doc, "vega")
    panels = drawn["data"]["panels"]
    assert [p["title"] for p in panels] == ["lm: perplexity vs length", "lm: attention entropy vs length",
                                            "copy: token accuracy vs length", "copy: attention entropy vs length"]
    lm_metric = {s["name"]: s["y"] for s in panels[0]["series"]}
    assert lm_metric["rope"] == [p["perplexity"] for p in evaluations(doc)[("lm", "rope")]]
    assert "source (floor)" in lm_metric and summary["budget"] == "smoke"
    for suffix in ("svg", "png"):
        out = tmp_path / f"lab.{suffix}"
        assert main(["plot", "lab", "--results", str(path), "--out", str(out)]) == 0
        assert out.stat().st_size > 10_000
    csv = tmp_path / "lab.csv"  # the explorer's CSV export of the Lab view, the same bytes
    assert main(["plot", "lab", "--results", str(path), "--out", str(csv)]) == 0
    assert csv.read_bytes() == render_lab(doc, "csv")[0]
    not_results = tmp_path / "other.json"
    not_results.write_text('{"format": "something else"}')
    assert main(["plot", "lab", "--results", str(not_results), "--out", str(tmp_path / "x.svg")]) == 2
    assert main(["plot", "lab", "--out", str(tmp_path / "x.svg")]) == 2
    assert main(["plot", "alibi", "--results", str(path), "--out", str(tmp_path / "x.svg")]) == 2


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_one_line_on_a_terminal_and_a_line_per_stage_in_a_log():
    log, terminal = io.StringIO(), _Terminal()
    for stream in (log, terminal):
        bar = Progress(10, stream=stream, interval=0)
        bar.update("lm / rope: training", 4, "step 1/2")
        bar.update("lm / rope: training", 4, "step 2/2")
        bar.update("lm / rope: evaluating", 2, "length 64")
        bar.close()
    assert log.getvalue().count("\n") == 3 and "\r" not in log.getvalue()  # two stages and the end
    assert " 40% " in log.getvalue() and "100% " in log.getvalue().splitlines()[-1]
    assert terminal.getvalue().count("\n") == 1 and terminal.getvalue().count("\r") == 4
    assert "step 2/2" in terminal.getvalue()
