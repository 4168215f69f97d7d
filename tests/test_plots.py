"""The explorer's figure data against direct computations, and `posenc plot` / `posenc audit` as commands."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

import posenc
from posenc.cli import main
from posenc.plots import render
from posenc.plots.alibi import bias_entropy
from posenc.plots.decay import decay_bound
from posenc.plots.precision import precision_data
from posenc.plots.spectrum import spectrum_data

from audit_recipes import CONFIGS, bf16_positions, config, exact, stored


@pytest.mark.parametrize("slope, context, gamma", [(0.5, 2048, 1.0), (2 ** -8, 4096, 1.0), (0.84, 100, 4.0),
                                                   (1e-9, 1000, 1.0), (3.0, 10, 1.0)])
def test_bias_entropy_closed_form_matches_the_softmax(slope, context, gamma):
    logits = -gamma * slope * np.arange(context, dtype=np.float64)
    p = np.exp(logits - logits.max())
    p /= p.sum()
    brute = -(p * np.log(np.where(p > 0, p, 1))).sum()
    assert bias_entropy(np.array([slope]), context, gamma)[0] == pytest.approx(brute, rel=1e-9, abs=1e-9)


def test_decay_bound_at_zero_distance_is_the_mean_partial_count():
    inv = posenc.rope_inv_freq(posenc.RopeSpec(64))[0]
    assert decay_bound(inv, np.array([0.0]))[0] == pytest.approx((32 + 1) / 2)


def test_spectrum_counts_and_regions():
    llama = spectrum_data(posenc.RopeSpec.from_hf_config(config("llama-3.1-8b")))
    before = 2 * math.pi / posenc.rope_inv_freq(posenc.RopeSpec(128, base=5e5))[0]
    assert llama["full_turns_before"] == int((before <= 8192).sum())
    assert llama["llama3_band"] == [2048.0, 8192.0]
    yarn = posenc.RopeSpec(128, base=1e4, scaling={"rope_type": "yarn", "factor": 4.0},
                           original_max_position_embeddings=2048)
    data = spectrum_data(yarn)
    assert data["yarn_ramp"] == [16.0, 41.0]  # FORMULAS.md: D=128, b=1e4, L=2048
    assert data["extended_context"] == 8192 and data["attention_factor"] == pytest.approx(0.1 * math.log(4) + 1)


@pytest.mark.parametrize("name", ["llama-3.1-8b", "phi-3-mini-128k"])  # phi-3: LongRoPE, length-dependent
def test_precision_data_shows_posenc_exact_and_float32_angles_not(name):
    spec = posenc.RopeSpec.from_hf_config(config(name))
    data = precision_data(spec, 1 << 20)
    assert max(data["series"]["posenc (float32 out)"]) < 1.2e-7 * 1.2
    assert data["at_max"]["float32 angles (HF)"] > 1e-3
    assert data["at_max"]["float16 cache"] < 5e-4


@pytest.mark.parametrize("kind", ["heatmap", "spectrum", "decay", "alibi", "precision"])
def test_cli_plot_writes_png_and_svg(kind, tmp_path):
    png, svg = tmp_path / f"{kind}.png", tmp_path / f"{kind}.svg"
    model = "bloom-560m" if kind == "alibi" else "qwen2-7b-yarn"
    assert main(["plot", kind, "--config", str(CONFIGS / f"{model}.json"), "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    spec = json.dumps({"kind": "alibi", "n_heads": 12} if kind == "alibi" else
                      {"kind": "rope", "head_dim": 64, "base": 1e4, "label": "small"})
    assert main(["plot", kind, "--spec", spec, "--spec", spec, "--out", str(svg)]) == 0
    assert b"<svg" in svg.read_bytes()


def test_cli_plot_bad_input(tmp_path, capsys):
    assert main(["plot", "spectrum", "--out", str(tmp_path / "x.gif")]) == 2
    assert "format" in capsys.readouterr().err
    assert main(["plot", "alibi", "--param", "gamma=-1", "--out", str(tmp_path / "x.png")]) == 2


def test_specs_side_by_side_draw_one_panel_each():
    specs = [{"kind": "rope", "head_dim": 64}, {"kind": "rope", "head_dim": 64, "scaling": {"rope_type": "linear",
                                                                                              "factor": 2.0}}]
    _, summary = render("spectrum", {"specs": specs})
    assert [p["rope_type"] for p in summary["panels"]] == ["default", "linear"]


def _save(path, arrays):
    np.save(path, np.stack([arrays["cos"], arrays["sin"]]))
    return str(path)


def test_cli_audit_exit_codes_and_json(tmp_path, capsys):
    cfg_path = tmp_path / "config.json"
    cfg = config("llama-3.1-8b", max_position_embeddings=4096)
    cfg_path.write_text(json.dumps(cfg))
    spec = posenc.RopeSpec.from_hf_config(cfg)
    good = _save(tmp_path / "good.npy", exact(spec, np.arange(4096)))
    assert main(["audit", good, "--config", str(cfg_path)]) == 0
    assert "diagnosis: CORRECT" in capsys.readouterr().out
    half = _save(tmp_path / "half.npy", stored(exact(spec, np.arange(4096)), np.float16))
    assert main(["audit", half, "--config", str(cfg_path)]) == 1
    capsys.readouterr()
    broken = _save(tmp_path / "broken.npy", bf16_positions(spec, 4096))
    assert main(["audit", broken, "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["diagnosis"]["cause"] == "bf16_positions"
    assert main(["audit", str(tmp_path / "missing.npy")]) == 2


def test_cli_audit_two_files_and_rotated(tmp_path):
    spec = posenc.RopeSpec(64, base=1e4)
    arrays = exact(spec, np.arange(2048))
    np.save(tmp_path / "cos.npy", arrays["cos"])
    np.save(tmp_path / "sin.npy", arrays["sin"])
    assert main(["audit", str(tmp_path / "cos.npy"), str(tmp_path / "sin.npy")]) == 0
    q = np.random.default_rng(0).normal(size=(4, 2048, 64)).astype(np.float32)
    np.save(tmp_path / "q.npy", q)
    np.save(tmp_path / "q_rot.npy", posenc.rope_apply(q, np.arange(2048), spec))
    assert main(["audit", "--rotated", str(tmp_path / "q.npy"), str(tmp_path / "q_rot.npy")]) == 0


def test_posenc_audit_runs_as_a_command(tmp_path):
    path = _save(tmp_path / "c.npy", exact(posenc.RopeSpec(64), np.arange(1, 1025)))
    out = subprocess.run([sys.executable, "-m", "posenc.cli", "audit", path], capture_output=True, text=True)
    assert out.returncode == 3 and "positions do not start at 0" in out.stdout


# --- Issue 25: the explorer's figures draw the chosen source, with the library's numbers -------------------------
GEMMA3_4B = config("gemma-3-4b")


def test_linear_scaling_max_position_is_the_extended_length():
    """Gemma-3 (linear x8, max_position_embeddings 131072): trained 16384, extended 131072 (not 131072 / 1M)."""
    from posenc.plots import figure

    fig = figure("spectrum", {"config": GEMMA3_4B})
    linear = [p for p in fig.summary["panels"] if p["rope_type"] == "linear"]
    assert linear and all((p["trained_context"], p["extended_context"]) == (16384, 131072) for p in linear)
    rules = {r.label: r.value for p in fig.panels for r in p.rules}
    assert rules["trained 16384"] == 16384 and rules["extended 131072"] == 131072
    assert not any(v == 1048576 for v in rules.values())


def test_precision_summary_is_the_worst_error_not_the_last_position():
    """bfloat16 positions are exact at 2^20 but ~2 off before it: the summary reports the worst and where."""
    from posenc.plots import figure

    spec = posenc.RopeSpec.from_hf_config(config("llama-3.1-8b"))
    data = precision_data(spec, 1 << 20)
    worst = data["worst"]["bfloat16 positions"]
    assert worst["error"] == max(data["series"]["bfloat16 positions"]) and worst["error"] > 1.0
    assert worst["position"] < 1 << 20 and data["at_max"]["bfloat16 positions"] < 0.1  # float32 angles only
    text = figure("precision", {"config": config("llama-3.1-8b")}).summary["panels"][0]["text"]
    assert f"bfloat16 positions {worst['error']:.1e} (at {worst['position']})" in text


def test_heatmap_draws_the_sources_rope_tables():
    from posenc.plots import figure

    fig = figure("heatmap", {"config": GEMMA3_4B}, {"positions": 64})
    specs = posenc.from_hf_config(GEMMA3_4B).of_kind("rope")
    assert len(fig.panels) == len(specs)
    for panel, (name, entry) in zip(fig.panels, specs.items()):
        cos, sin = posenc.rope_cos_sin(np.arange(64), entry.spec, dtype="float64")
        z = np.asarray(panel.heat.z)
        assert z.shape == (64, 2 * cos.shape[1]) and np.allclose(z, np.concatenate([cos, sin], axis=1), atol=1e-6)


def test_alibi_draws_the_sources_heads_and_refuses_a_source_without_alibi():
    from posenc.errors import PosencError
    from posenc.plots import figure

    bloom = config("bloom-560m")
    heads = posenc.from_hf_config(bloom).of_kind("alibi")
    (name, entry), = heads.items()
    fig = figure("alibi", {"config": bloom})
    drawn = fig.summary["variants"][name]
    assert drawn["n_heads"] == entry.spec.n_heads != 32
    assert np.allclose(drawn["slopes"], posenc.alibi_slopes(entry.spec.n_heads, variant=entry.spec.variant))
    with pytest.raises(PosencError) as info:
        figure("alibi", {"config": config("llama-3.1-8b")})
    assert info.value.field == "source" and "no alibi" in info.value.message


def test_cli_heatmap_uses_the_config(tmp_path):
    out = tmp_path / "h.json"
    assert main(["plot", "heatmap", "--config", str(CONFIGS / "llama-3.1-8b.json"), "--param", "positions=32",
                 "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    z = np.asarray(doc["data"]["panels"][0]["heat"]["z"])
    cos, sin = posenc.rope_cos_sin(np.arange(32), posenc.RopeSpec.from_hf_config(config("llama-3.1-8b")),
                                   dtype="float64")
    assert np.allclose(z, np.concatenate([cos, sin], axis=1), atol=1e-6)
    assert doc["vega"]["hconcat"][0]["layer"][0]["mark"]["type"] == "rect"


def test_unknown_param_is_an_error(tmp_path, capsys):
    assert main(["plot", "heatmap", "--param", "foo=1", "--out", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert "foo" in err and "positions" in err


def test_spec_without_a_length_says_so():
    _, summary = render("spectrum", {"spec": {"kind": "rope", "head_dim": 64}})
    text = summary["panels"][0]["text"]
    assert "?" not in text and "no max_position_embeddings" in text


def test_vega_spec_carries_the_librarys_numbers():
    spec = posenc.RopeSpec.from_hf_config(config("llama-3.1-8b"))
    drawn, _ = render("spectrum", {"config": config("llama-3.1-8b")}, fmt="vega")
    values = drawn["vega"]["hconcat"][0]["layer"][0]["data"]["values"]
    after = [v["y"] for v in values if v["series"] == "llama3"]
    assert np.allclose(after, 2 * math.pi / posenc.rope_inv_freq(spec)[0])
    assert drawn["vega"]["hconcat"][0]["layer"][0]["params"][0]["bind"] == "scales"  # zoom and pan
