"""The explorer in a real browser: headless Debian Chromium (driven over the DevTools protocol by
Playwright, never a downloaded browser) against a real `posenc serve` on 127.0.0.1. Every view
draws (Vega, vendored) the chosen source for the Llama-3.1 table `make run` serves and for pasted Qwen2-YaRN,
Gemma-3 and Phi-3 configs, two sources side by side, the state in the URL; parameters redraw their view;
figures export as PNG/SVG/CSV/JSON; the audit runs on a dropped file; bad input shows one clear error;
the share link documented in docs/explorer.md opens its state (variants overlaid) and round-trips.
No console errors, no request to anything but the service; screenshots go to build/test-artifacts/explore/."""

from __future__ import annotations

import io
import json
import shutil
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest

import posenc
from posenc.config import DEFAULT_TOML
from serve_support import served

from audit_recipes import GEMMA3, bf16_positions, config
from test_explore_share_link import DOC_ORIGIN, documented_link

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent.parent / "build" / "test-artifacts" / "explore"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
VIEWS = ("heatmap", "spectrum", "decay", "alibi", "precision")
CONFIGS = {"qwen2-yarn": config("qwen2-7b-yarn"), "gemma-3": GEMMA3, "phi-3": config("phi-3-mini-128k")}
GEMMA3_4B = config("gemma-3-4b")  # linear x8: trained 16384, extended 131072
TIMEOUT_MS = 90_000

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium not installed (make browser)")


def server_config() -> str:
    """What `make run` serves (the embedded default: sin128, the Llama-3.1-8B table, alibi-32h), binary port off."""
    assert "binary_port = 8001" in DEFAULT_TOML
    return DEFAULT_TOML.replace("binary_port = 8001", "binary_port = 0")


@pytest.fixture(scope="module")
def server():
    with served(lambda shm_dir: server_config(), env={"POSENC_WORKERS": "1"}, prefix="posenc-explore-test-",
                clean_exit=True) as process:
        yield process


class Browser:
    """One page with every console message and request recorded."""

    def __init__(self, context, origin: str):
        self.page = context.new_page()
        self.origin = origin
        self.console_errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.console_errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.console_errors.append(f"pageerror: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))

    def open(self):
        self.page.goto(f"{self.origin}/explore")
        self.page.wait_for_selector("body[data-ready=yes]", timeout=TIMEOUT_MS)

    def draw(self):
        self.page.click("#draw")
        self.page.wait_for_selector("body[data-state=drawn]", timeout=TIMEOUT_MS)

    def view_states(self) -> dict:
        return {v: self.page.get_attribute(f".view[data-figure={v}]", "data-state") for v in VIEWS}

    def shot(self, name: str, selector: str | None = None):
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        target = self.page.locator(selector) if selector else self.page
        kwargs = {} if selector else {"full_page": True}
        target.screenshot(path=str(ARTIFACTS / f"{name}.png"), **kwargs)

    def assert_clean(self, nothing_to_draw: int = 0):
        """No console error but Chromium's note on each 422 a view answered "nothing to draw" with."""
        assert self.console_errors == ["Failed to load resource: the server responded with a status of 422 "
                                       "(Unprocessable Entity)"] * nothing_to_draw, self.console_errors
        foreign = [u for u in self.requests if not (u.startswith(self.origin + "/") or u.startswith("data:"))]
        assert foreign == [], foreign
        assert self.requests, "the page made no request at all"


@pytest.fixture(scope="module")
def context():
    with playwright_api.sync_playwright() as p:
        profile = tempfile.mkdtemp(prefix="posenc-chromium-")
        ctx = p.chromium.launch_persistent_context(profile, executable_path=str(CHROMIUM), headless=True, args=FLAGS,
                                                   viewport={"width": 1400, "height": 900})
        yield ctx
        ctx.close()
        shutil.rmtree(profile, ignore_errors=True)


def slot_states(browser: Browser, view: str) -> list[str]:
    return browser.page.evaluate(
        f"[...document.querySelectorAll('.view[data-figure={view}] .slot')].map(e => e.dataset.state)")


def summary(browser: Browser, view: str, slot: str = "a") -> str:
    return browser.page.inner_text(f".view[data-figure={view}] .slot[data-slot={slot}] .summary")


def canvas_width(browser: Browser, view: str, slot: str = "a") -> int:
    return int(browser.page.evaluate(
        f"(document.querySelector('.view[data-figure={view}] .slot[data-slot={slot}] canvas') || {{width: 0}}).width"))


def test_every_view_for_the_llama_table(server, context):
    browser = Browser(context, server.url)
    browser.open()
    assert browser.page.input_value(".source[data-slot=a] .table") == "llama3.1-8b"
    browser.draw()
    states = browser.view_states()
    assert states == {**{v: "drawn" for v in VIEWS}, "alibi": "empty"}, states
    assert "llama3" in summary(browser, "spectrum") and "within the trained 8192" in summary(browser, "spectrum")
    # The ALiBi view draws the chosen source or says it has nothing to draw (never 32 default heads).
    assert "nothing to draw" in browser.page.inner_text(".view[data-figure=alibi] .note")
    # The heatmap is the table's own RoPE, not a base-10000 sinusoid.
    assert "RoPE [cos | sin], llama3 ×8 (orig 8192), base 500000" in summary(browser, "heatmap")
    for view in ("heatmap", "spectrum", "decay", "precision"):  # drawn by Vega on a wide canvas
        assert canvas_width(browser, view) > 900, view
    browser.shot("llama-table")
    browser.shot("spectrum-llama", ".view[data-figure=spectrum]")
    browser.shot("precision-llama", ".view[data-figure=precision]")
    browser.assert_clean(nothing_to_draw=1)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_view_for_a_pasted_config(server, context, name):
    browser = Browser(context, server.url)
    browser.open()
    browser.page.check("input[name=source-a][value=config]")
    browser.page.fill(".source[data-slot=a] .config", json.dumps(CONFIGS[name], indent=1))
    browser.draw()
    states = browser.view_states()
    assert {v: states[v] for v in VIEWS if v != "alibi"} == {v: "drawn" for v in VIEWS if v != "alibi"}, states
    rope_layer_types = len(posenc.from_hf_config(CONFIGS[name]).of_kind("rope"))
    assert len(summary(browser, "spectrum").split("\n")) == rope_layer_types  # one panel per layer type
    if name == "gemma-3":
        assert "?" not in summary(browser, "spectrum")
    browser.shot(f"config-{name}")
    browser.shot(f"spectrum-{name}", ".view[data-figure=spectrum]")
    browser.assert_clean(nothing_to_draw=1)


def test_two_sources_side_by_side_and_state_in_the_url(server, context):
    browser = Browser(context, server.url)
    browser.open()
    browser.page.check("input[name=source-a][value=config]")
    browser.page.fill(".source[data-slot=a] .config", json.dumps(CONFIGS["qwen2-yarn"]))
    browser.page.fill(".source[data-slot=b] .config", json.dumps(GEMMA3_4B))
    browser.page.check("input[name=source-b][value=config]")  # a change draws at once
    browser.page.wait_for_selector("body[data-state=drawn]", timeout=TIMEOUT_MS)
    browser.page.locator(".view[data-figure=spectrum] .slot[data-slot=b] canvas").wait_for(timeout=TIMEOUT_MS)
    assert slot_states(browser, "spectrum") == ["drawn", "drawn"]
    assert "within the trained 16384" in summary(browser, "spectrum", "b")  # Gemma-3 linear x8
    browser.shot("side-by-side")
    browser.shot("spectrum-side-by-side", ".view[data-figure=spectrum]")
    url = browser.page.url
    assert "#" in url
    other = Browser(context, server.url)
    other.page.goto(url)  # the shared link draws the same page
    other.page.wait_for_selector("body[data-state=drawn]", timeout=TIMEOUT_MS)
    assert other.page.input_value(".source[data-slot=b] .config") == json.dumps(GEMMA3_4B)
    assert summary(other, "spectrum", "b") == summary(browser, "spectrum", "b")
    browser.assert_clean(nothing_to_draw=2)  # ALiBi, for A and B
    other.assert_clean(nothing_to_draw=2)


def test_parameters_redraw_their_view_and_figures_export(server, context, tmp_path):
    browser = Browser(context, server.url)
    browser.open()
    browser.draw()
    before = summary(browser, "precision")
    browser.page.fill(".view[data-figure=precision] input[name=max_position]", "65536")
    browser.page.locator(".view[data-figure=precision] .summary", has_text="1..65536").wait_for(timeout=TIMEOUT_MS)
    assert summary(browser, "precision") != before
    slot = ".view[data-figure=precision] .slot[data-slot=a]"
    for what in ("png", "svg", "csv", "json"):
        with browser.page.expect_download() as info:
            browser.page.click(f"{slot} button[data-export={what}]")
        path = tmp_path / info.value.suggested_filename
        info.value.save_as(path)
        data = path.read_bytes()
        assert {"png": data[:8] == b"\x89PNG\r\n\x1a\n", "svg": b"<svg" in data[:400],
                "csv": data.startswith(b"panel,series,x,y"), "json": b'"panels"' in data}[what], what
    doc = json.loads((tmp_path / "precision-a.json").read_text())
    worst = doc["summary"]["panels"][0]["worst_error"]["float32 angles (HF)"]
    ys = [y for s in doc["panels"][0]["series"] if s["name"] == "float32 angles (HF)" for y in s["y"]]
    assert worst["error"] == max(ys)  # the export is the library's numbers behind the figure
    # Hovering a figure shows the values under the pointer.
    box = browser.page.locator(f"{slot} canvas").bounding_box()
    shown = False
    for fx in (0.2, 0.35, 0.5, 0.65, 0.8):  # along the float16 cache's flat line, then anywhere
        for fy in [i / 40 for i in range(8, 34)]:
            browser.page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * fy)
            if browser.page.locator("#vg-tooltip-element.visible").count():
                shown = True
                break
        if shown:
            break
    assert shown and "position" in browser.page.inner_text("#vg-tooltip-element")
    browser.shot("precision-hover", ".view[data-figure=precision]")
    browser.assert_clean(nothing_to_draw=1)


def test_audit_a_dropped_file(server, context, tmp_path):
    n = 4096
    llama = config("llama-3.1-8b", max_position_embeddings=n)
    cache = bf16_positions(posenc.RopeSpec.from_hf_config(llama), n)
    path = tmp_path / "cache.npy"
    buf = io.BytesIO()
    np.save(buf, np.stack([cache["cos"], cache["sin"]]))
    path.write_bytes(buf.getvalue())
    browser = Browser(context, server.url)
    browser.open()
    browser.page.check("input[name=source-a][value=config]")
    browser.page.fill(".source[data-slot=a] .config", json.dumps(llama))
    browser.page.set_input_files("#audit-file", str(path))
    browser.page.wait_for_selector("body[data-audit=done]", timeout=TIMEOUT_MS)
    report = browser.page.inner_text("#audit-report")
    assert report.startswith("BROKEN: positions rounded to bfloat16") and "fix:" in report
    assert "4096 rows checked" in report
    assert browser.page.evaluate("document.querySelector('#audit-view canvas').width") > 300
    browser.shot("audit", "#audit")
    # The audited cache can be compared with the config in every view.
    browser.page.check("input[name=source-b][value=audited]")
    browser.page.wait_for_selector("body[data-state=drawn]", timeout=TIMEOUT_MS)
    browser.page.locator(".view[data-figure=spectrum] .slot[data-slot=b] canvas").wait_for(timeout=TIMEOUT_MS)
    assert "audited cache" in summary(browser, "spectrum", "b")
    # A second, bad file: the previous report and figure go, the error shows.
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"\x93NUMPY this is not an array")
    browser.page.set_input_files("#audit-file", str(bad))
    browser.page.wait_for_selector("body[data-audit=error]", timeout=TIMEOUT_MS)
    assert browser.page.inner_text("#audit-report") == "" and browser.page.locator("#audit-view canvas").count() == 0
    assert "not a valid .npy" in browser.page.inner_text("#audit-error")
    assert all("status of 4" in line for line in browser.console_errors), browser.console_errors
    browser.console_errors.clear()
    browser.assert_clean()


def test_bad_input_shows_one_clear_error(server, context):
    browser = Browser(context, server.url)
    browser.open()
    browser.page.check("input[name=source-a][value=config]")
    browser.page.fill(".source[data-slot=a] .config", "{not json")
    browser.page.click("#draw")
    assert "not valid JSON" in browser.page.inner_text("#source-error")
    browser.page.fill(".source[data-slot=a] .config", json.dumps({"model_type": "llama", "rope_theta": -5}))
    browser.draw()
    message = browser.page.inner_text("#source-error")
    assert "config.rope_theta" in message and "must be > 1" in message
    assert browser.view_states() == {v: "error" for v in VIEWS}
    shown = browser.page.evaluate("[...document.querySelectorAll('.error')].filter(e => e.textContent.includes("
                                  "'rope_theta')).length")
    assert shown == 1  # once, not in every panel
    assert len(browser.console_errors) == 1 and "status of 4" in browser.console_errors[0]  # one request
    browser.shot("errors")
    browser.console_errors.clear()
    browser.assert_clean()


def test_posenc_explore_prints_the_page(server, capsys):
    from posenc.cli import main
    from posenc.http.runtime.launch import free_port

    assert main(["explore", "--url", server.url, "--no-browser"]) == 0
    assert capsys.readouterr().out.strip() == f"{server.url}/explore"
    assert main(["explore", "--url", f"http://127.0.0.1:{free_port()}", "--no-browser"]) == 1


FIT = """view => [...document.querySelectorAll(`${view} .slot[data-state=drawn]`)].map(slot => {
  const chart = slot.querySelector('.chart').getBoundingClientRect();
  const figure = slot.querySelector('.chart canvas').getBoundingClientRect();
  return {slot: slot.dataset.slot, chart: [chart.left, chart.right], figure: [figure.left, figure.right]};
})"""


def test_every_panel_fits_its_box(server, context):
    """Gemma-3's two layer types are two panels (a heatmap's each with its colour legend) in A, next to a
    Qwen2-YaRN config in B: every figure's drawing lies within its slot's box (bounding boxes, to the pixel),
    the second panel too."""
    browser = Browser(context, server.url)
    browser.open()
    browser.page.check("input[name=source-a][value=config]")
    browser.page.fill(".source[data-slot=a] .config", json.dumps(GEMMA3))
    browser.draw()
    browser.page.fill(".source[data-slot=b] .config", json.dumps(CONFIGS["qwen2-yarn"]))
    browser.page.check("input[name=source-b][value=config]")
    browser.page.wait_for_selector("body[data-state=drawn]", timeout=TIMEOUT_MS)
    browser.page.locator(".view[data-figure=precision] .slot[data-slot=b] canvas").wait_for(timeout=TIMEOUT_MS)
    for view in ("heatmap", "spectrum", "decay", "precision"):
        boxes = browser.page.evaluate(FIT, f".view[data-figure={view}]")
        assert [b["slot"] for b in boxes] == ["a", "b"], (view, boxes)
        for b in boxes:
            assert b["chart"][0] - 0.5 <= b["figure"][0] and b["figure"][1] <= b["chart"][1] + 0.5, (view, b)
    browser.shot("panels-fit", ".view[data-figure=heatmap]")
    browser.assert_clean(nothing_to_draw=3)  # ALiBi: A's first drawing, then A's and B's


def canvases(browser: Browser) -> int:
    return browser.page.locator(".view[data-figure] canvas").count()


def test_a_source_error_leaves_no_figure(server, context):
    """Figures of the last good source go when the source turns bad, whether Draw, a source change or a
    parameter's redraw finds it out: never an error above the previous source's figures."""
    browser = Browser(context, server.url)
    browser.open()
    browser.draw()
    assert canvases(browser) == 4
    browser.page.fill(".source[data-slot=a] .config", "{not json")
    browser.page.check("input[name=source-a][value=config]")  # a change draws at once: the JSON is refused
    assert "not valid JSON" in browser.page.inner_text("#source-error")
    assert canvases(browser) == 0 and browser.view_states() == {v: "error" for v in VIEWS}
    browser.shot("error-no-figure")
    browser.page.fill(".source[data-slot=a] .config", json.dumps(config("llama-3.1-8b")))
    browser.draw()
    assert canvases(browser) == 4 and browser.page.inner_text("#source-error") == ""
    # The service refuses the config: a parameter's redraw of one view clears every view.
    browser.page.fill(".source[data-slot=a] .config", json.dumps({"model_type": "llama", "rope_theta": -5}))
    browser.page.fill(".view[data-figure=heatmap] input[name=positions]", "128")
    browser.page.wait_for_selector(".view[data-figure=spectrum] canvas", state="detached", timeout=TIMEOUT_MS)
    assert canvases(browser) == 0 and "rope_theta" in browser.page.inner_text("#source-error")
    # Chromium's notes on the 422s: ALiBi's "nothing to draw" of each drawing, and the refused config, once.
    assert len(browser.console_errors) == 3 and all("status of 422" in e for e in browser.console_errors)
    browser.console_errors.clear()
    browser.assert_clean()


def figure_titles(browser: Browser, view: str, slot: str = "a") -> list[str]:
    return browser.page.evaluate(f"document.querySelector('.view[data-figure={view}] .slot[data-slot={slot}]')"
                                 ".figure.data.panels.map(p => p.title)")


def test_the_documented_share_link_round_trips_and_overlays(server, context, tmp_path):
    """Opening docs/explorer.md's example link draws its state (two scalings overlaid in the spectrum and decay
    views, titles naming the scaling; the Pick panel's question answered) and the page writes the same link back;
    the CSV export is the service's (the same bytes as `posenc plot --out x.csv`); unticking the overlay redraws the
    variants side by side."""
    from posenc.pick import pick
    from posenc.plots import render

    link = documented_link().replace(DOC_ORIGIN, server.url)
    state = json.loads(unquote(link.split("#", 1)[1]))
    browser = Browser(context, server.url)
    browser.page.goto(link)
    browser.page.wait_for_selector("body[data-state=drawn]", timeout=TIMEOUT_MS)
    assert browser.page.url == link  # round trip: the page's own state, written back, is the documented link
    assert browser.page.input_value(".source[data-slot=a] .specs") == state["a"]["value"]
    browser.page.wait_for_selector("#pick[data-state=answered]", timeout=TIMEOUT_MS)
    asked = {k: v for k, v in state["pick"].items() if k != "use_config"}
    assert browser.page.inner_text("#pick .pick-summary") == pick(**asked).summary  # YaRN, factor 4
    specs = json.loads(state["a"]["value"])
    for view in ("spectrum", "decay"):
        assert browser.page.is_checked(f".view[data-figure={view}] input[name=overlay]")
        (title,) = figure_titles(browser, view)  # one panel: every variant on one axis
        assert title.endswith("every variant on one axis, base 500000, d=128"), title
        assert browser.page.locator(f".view[data-figure={view}] .slot[data-slot=a] canvas").count() == 1
    names = browser.page.evaluate("document.querySelector('.view[data-figure=spectrum] .slot').figure.data"
                                  ".panels[0].series.map(s => s.name)")
    assert names == ["unscaled", "yarn: yarn ×4 (orig 8192)", "llama3: llama3 ×8 (orig 8192)"], names
    lines = summary(browser, "decay").split("\n")
    assert [line.split(":")[0] for line in lines] == ["yarn, yarn ×4 (orig 8192)", "llama3, llama3 ×8 (orig 8192)"]
    assert lines[0].split(": ", 1)[1] != lines[1].split(": ", 1)[1]  # each variant's own bound
    browser.shot("spectrum-overlay", ".view[data-figure=spectrum]")
    with browser.page.expect_download() as info:
        browser.page.click(".view[data-figure=spectrum] .slot[data-slot=a] button[data-export=csv]")
    path = tmp_path / info.value.suggested_filename
    info.value.save_as(path)
    assert path.read_bytes() == render("spectrum", {"specs": specs}, {"overlay": True}, "csv")[0]
    browser.page.uncheck(".view[data-figure=spectrum] input[name=overlay]")  # redraws that view, side by side
    deadline = time.monotonic() + TIMEOUT_MS / 1000  # polled from here: wait_for_function evals, which the CSP refuses
    while browser.page.evaluate("document.querySelector('.view[data-figure=spectrum] .slot').figure?.data"
                                ".panels.length") != 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert figure_titles(browser, "spectrum") == ["yarn: yarn ×4 (orig 8192), base 500000, d=128",
                                                  "llama3: llama3 ×8 (orig 8192), base 500000, d=128"]
    assert json.loads(unquote(browser.page.url.split("#", 1)[1]))["p"]["spectrum"] == {"overlay": False}
    browser.assert_clean(nothing_to_draw=1)  # ALiBi
