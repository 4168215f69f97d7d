"""The explorer's figure data against direct computations, and `posenc plot` / `posenc audit` as commands."""

from __future__ import annotations

import csv
import importlib
import io
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
    assert data["yarn_ramp"] == [16.0, 41.0]  # docs/formulas.md: D=128, b=1e4, L=2048
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
    assert main(["plot", kind, "--model-config", str(CONFIGS / f"{model}.json"), "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    spec = json.dumps({"kind": "alibi", "n_heads": 12} if kind == "alibi" else
                      {"kind": "rope", "head_dim": 64, "base": 1e4, "label": "small"})
    assert main(["plot", kind, "--spec", spec, "--spec", spec, "--out", str(svg)]) == 0
    assert b"<svg" in svg.read_bytes()


def test_cli_plot_bad_input(tmp_path, capsys):
    assert main(["plot", "spectrum", "--out", str(tmp_path / "x.gif")]) == 2
    assert "--out: must end in one of .png, .svg, .json, .csv, got '.gif'" in capsys.readouterr().err
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
    assert main(["audit", good, "--model-config", str(cfg_path)]) == 0
    assert "diagnosis: CORRECT" in capsys.readouterr().out
    half = _save(tmp_path / "half.npy", stored(exact(spec, np.arange(4096)), np.float16))
    assert main(["audit", half, "--model-config", str(cfg_path)]) == 1
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
    assert main(["plot", "heatmap", "--model-config", str(CONFIGS / "llama-3.1-8b.json"), "--param", "positions=32",
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


# --- Issue 39: what a researcher comparing scalings trips on ----------------------------------------------------
YARN = {"kind": "rope", "head_dim": 128, "base": 5e5, "label": "yarn", "scaling": {"rope_type": "yarn", "factor": 4.0},
        "original_max_position_embeddings": 8192}
LLAMA3 = {"kind": "rope", "head_dim": 128, "base": 5e5, "label": "llama3", "original_max_position_embeddings": 8192,
          "scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}}
PLAIN = {"kind": "rope", "head_dim": 128, "base": 5e5, "label": "plain", "max_position_embeddings": 8192}
VARIANTS = [PLAIN, YARN, LLAMA3]


def test_cli_plot_help_names_every_out_suffix(capsys):
    """The --out help is built from the suffixes `posenc plot` writes (before the fix it promised .json while
    the code looked for a "json" format, and the explorer's CSV had no suffix at all)."""
    from posenc.cli.plot import OUT_SUFFIXES

    with pytest.raises(SystemExit):
        main(["plot", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for suffix, (_, words) in OUT_SUFFIXES.items():
        assert f"{suffix} {words}" in text
    assert set(OUT_SUFFIXES) == {".png", ".svg", ".json", ".csv"}


def test_cli_plot_writes_every_out_suffix(tmp_path):
    spec = json.dumps(YARN)
    written = {}
    for suffix in (".png", ".svg", ".json", ".csv", ".CSV"):
        out = tmp_path / f"spectrum{suffix}"
        assert main(["plot", "spectrum", "--spec", spec, "--out", str(out)]) == 0
        written[suffix] = out.read_bytes()
    assert written[".png"][:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in written[".svg"][:400]
    doc = json.loads(written[".json"])
    assert doc["vega"]["hconcat"] and doc["data"]["panels"][0]["title"] == "yarn: yarn ×4 (orig 8192), base 500000, d=128"
    csv, _ = render("spectrum", {"specs": [YARN]}, fmt="csv")  # the explorer's CSV export (see test_explore_browser)
    assert written[".csv"] == written[".CSV"] == csv


def csv_rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_csv_rows_are_the_figures_points():
    from posenc.plots import figure

    fig = figure("heatmap", {"specs": [YARN]}, {"positions": 4})
    drawn, _ = render("heatmap", {"specs": [YARN]}, {"positions": 4}, "csv")
    rows = csv_rows(drawn.decode())
    z = np.asarray(fig.panels[0].heat.z)
    assert len(rows) == z.size and {r["panel"] for r in rows} == {fig.panels[0].title}
    assert all(float(r["value"]) == z[int(r["y"]), int(r["x"])] for r in rows)  # every cell, all five columns
    spectrum = figure("spectrum", {"specs": [YARN]})
    rows = csv_rows(spectrum.to_csv())
    (panel,) = spectrum.panels
    for series in panel.series:
        assert [float(r["y"]) for r in rows if r["series"] == series.name] == series.y  # round-trip floats
    assert [(r["series"], r["y"]) for r in rows if r["x"] == "" and r["y"]] == [("trained 8192", "8192"),
                                                                                 ("extended 32768", "32768")]


@pytest.mark.parametrize("spec, title", [
    (PLAIN, "plain: no scaling, base 500000, d=128"),
    (YARN, "yarn: yarn ×4 (orig 8192), base 500000, d=128"),
    (LLAMA3, "llama3: llama3 ×8 (orig 8192), base 500000, d=128"),
    ({"kind": "rope", "head_dim": 64, "base": 1e4, "max_position_embeddings": 131072,
      "scaling": {"rope_type": "linear", "factor": 8.0}}, "rope 1: linear ×8 (orig 16384), base 10000, d=64"),
])
def test_spectrum_titles_and_csv_name_the_scaling(spec, title):
    """Before: "rope 1: base 500000, d=128" for every variant, so panels and CSV rows could not be told apart."""
    from posenc.plots import figure

    fig = figure("spectrum", {"specs": [spec]})
    assert fig.panels[0].title == title and fig.summary["panels"][0]["text"].startswith(title + "; ")
    assert {row["panel"] for row in csv_rows(fig.to_csv())} == {title}


def test_decay_summary_is_each_variants_own_bound():
    """Before: every variant printed the unscaled bound, the same line for all."""
    from posenc.plots import figure

    summary = figure("decay", {"specs": VARIANTS}, {"max_distance": 65536}).summary["panels"]
    r = np.unique(np.geomspace(1, 65536, 320).round())
    for entry, doc in zip(summary, VARIANTS):
        spec = posenc.RopeSpec.from_dict({k: v for k, v in doc.items() if k not in ("kind", "label")})
        extended = 32768 if doc is YARN else 65536 if doc is LLAMA3 else None
        own = decay_bound(spec.inv_freq(extended if spec.length_dependent else None)[0], r)
        assert entry["bound_at_max"] == pytest.approx(own[-1], rel=1e-12)
        assert f"{own[-1]:.2f} at 65536" in entry["text"]
    assert len({e["text"].split(": ", 1)[1] for e in summary}) == 3
    assert summary[0]["bound_at_max"] == summary[1]["bound_at_max_unscaled"] != summary[1]["bound_at_max"]


@pytest.mark.parametrize("kind", ["spectrum", "decay"])
def test_overlay_draws_every_variant_on_one_axis(kind):
    from posenc.plots import figure

    apart = figure(kind, {"specs": VARIANTS})
    fig = figure(kind, {"specs": VARIANTS}, {"overlay": True})
    (panel,) = fig.panels
    assert panel.title.endswith("every variant on one axis, base 500000, d=128")
    names = [s.name for s in panel.series]
    # plain is its own unscaled reference: no second "unscaled" series for the same base and dimension
    assert names == ["plain: no scaling", "yarn: yarn ×4 (orig 8192)", "llama3: llama3 ×8 (orig 8192)"]
    scaled = {p.title.split(":")[0]: p.series[-1] for p in apart.panels}
    for series, label in zip(panel.series, ("plain", "yarn", "llama3")):
        if kind == "spectrum":  # the same numbers as side by side (decay: on the longest variant's distances)
            assert series.y == scaled[label].y
    assert [r.label for r in panel.rules] == ["trained 8192", "extended 32768 (yarn)", "extended 65536 (llama3)"]
    assert fig.summary["panels"] == figure(kind, {"specs": VARIANTS}, {"overlay": True}).summary["panels"]
    spec = render(kind, {"specs": VARIANTS}, {"overlay": True}, "vega")[0]["vega"]
    (layer,) = [l for l in spec["hconcat"][0]["layer"] if "color" in l.get("encoding", {})]
    assert layer["encoding"]["color"]["sort"] == names and layer["encoding"]["color"]["legend"]  # a legend
    assert b"<svg" in render(kind, {"specs": VARIANTS}, {"overlay": True})[0][:400]


def test_overlay_names_base_and_dim_per_variant_when_they_differ():
    from posenc.plots import figure

    other = {"kind": "rope", "head_dim": 64, "base": 1e4, "label": "small", "max_position_embeddings": 4096}
    (panel,) = figure("spectrum", {"specs": [YARN, other]}, {"overlay": True}).panels
    assert panel.title == "every variant on one axis"
    assert [s.name for s in panel.series] == ["unscaled, base 500000, d=128", "yarn: yarn ×4 (orig 8192), base 500000, "
                                              "d=128", "small: no scaling, base 10000, d=64"]


def test_cli_overlay(tmp_path, capsys):
    out = tmp_path / "decay.csv"
    assert main(["plot", "decay", "--overlay", *[a for v in VARIANTS for a in ("--spec", json.dumps(v))],
                 "--out", str(out)]) == 0
    assert {row["panel"] for row in csv_rows(out.read_text())} == {
        "every variant on one axis, base 500000, d=128"}
    capsys.readouterr()
    assert main(["plot", "heatmap", "--overlay", "--out", str(tmp_path / "h.png")]) == 2
    assert "--overlay: draws the variants of spectrum and decay on one axis, not of heatmap" in capsys.readouterr().err
    from posenc.cli.plot import OVERLAY_FIGURES
    from posenc.plots import FIGURES

    takes = {f for f in FIGURES if "overlay" in importlib.import_module(f"posenc.plots.{f}").PARAMS}
    assert takes == set(OVERLAY_FIGURES)


@pytest.mark.parametrize("rows, step, words", [(2 * 64, 2, "one position in 2 drawn"),
                                               (3 * 64, 3, "one position in 3 drawn"),
                                               (11 * 64, 11, "one position in 11 drawn")])
def test_heatmap_title_says_which_positions_are_drawn(rows, step, words):
    """Before: "every 2th position"."""
    from posenc.plots.model import Heat, Panel
    from posenc.plots.vega import panel_spec

    panel = Panel("t", "column", "position", heat=Heat([[0.0] * 256 for _ in range(rows)]))
    spec = panel_spec(panel)
    assert spec["title"]["text"] == f"t ({words}; the export has all)"
    assert spec["layer"][0]["encoding"]["y"]["bin"]["step"] == step
