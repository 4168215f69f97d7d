"""The explorer in a real browser: headless Debian Chromium (driven over the DevTools protocol by
Playwright, never a downloaded browser) against a real `posenc serve` on 127.0.0.1. Every view
loads with real data for the Llama-3.1 table `make run` serves and for pasted Qwen2-YaRN, Gemma-3 and Phi-3
configs; the audit runs on a dropped file; bad input shows a clear error. No console errors, no
request to anything but the service; screenshots go to build/test-artifacts/explore/."""

from __future__ import annotations

import io
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

import posenc
from posenc.config import DEFAULT_TOML
from posenc.http.runtime.launch import ServerProcess

from audit_recipes import GEMMA3, bf16_positions, config

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent.parent / "build" / "test-artifacts" / "explore"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
VIEWS = ("heatmap", "spectrum", "decay", "alibi", "precision")
CONFIGS = {"qwen2-yarn": config("qwen2-7b-yarn"), "gemma-3": GEMMA3, "phi-3": config("phi-3-mini-128k")}
TIMEOUT_MS = 30_000

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium not installed (make browser)")


def server_config() -> str:
    """What `make run` serves (the embedded default: sin128, the Llama-3.1-8B table, alibi-32h), binary port off."""
    assert "binary_port = 8001" in DEFAULT_TOML
    return DEFAULT_TOML.replace("binary_port = 8001", "binary_port = 0")


@pytest.fixture(scope="module")
def server():
    shm_dir = tempfile.mkdtemp(prefix="posenc-explore-test-", dir="/dev/shm")
    process = ServerProcess(server_config(), env={"POSENC_SHM_DIR": shm_dir, "POSENC_WORKERS": "1"}).start()
    yield process
    assert process.stop() == 0, process.log()
    shutil.rmtree(shm_dir, ignore_errors=True)


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

    def assert_clean(self):
        assert self.console_errors == []
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


def figure_panels(browser: Browser, view: str) -> int:
    return int(browser.page.evaluate(
        f"document.querySelector('.view[data-figure={view}] .summary').textContent.split('\\n').length"))


def test_every_view_for_the_llama_table(server, context):
    browser = Browser(context, server.url)
    browser.open()
    assert browser.page.input_value("#table") == "llama3.1-8b"
    browser.draw()
    assert browser.view_states() == {v: "drawn" for v in VIEWS}
    spectrum = browser.page.inner_text(".view[data-figure=spectrum] .summary")
    assert "llama3" in spectrum and "within 8192" in spectrum
    assert "below 1 nat" in browser.page.inner_text(".view[data-figure=alibi] .summary")
    for view in VIEWS:  # every figure arrived as an SVG image that the browser decoded
        width = browser.page.evaluate(f"document.querySelector('.view[data-figure={view}] img').naturalWidth")
        assert width > 100, view
    browser.shot("llama-table")
    browser.shot("spectrum-llama", ".view[data-figure=spectrum]")
    browser.shot("precision-llama", ".view[data-figure=precision]")
    browser.shot("alibi", ".view[data-figure=alibi]")
    browser.assert_clean()


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_view_for_a_pasted_config(server, context, name):
    browser = Browser(context, server.url)
    browser.open()
    browser.page.check("input[name=source][value=config]")
    browser.page.fill("#config", json.dumps(CONFIGS[name], indent=1))
    browser.draw()
    assert browser.view_states() == {v: "drawn" for v in VIEWS}
    rope_layer_types = len(posenc.from_hf_config(CONFIGS[name]).of_kind("rope"))
    assert figure_panels(browser, "spectrum") == rope_layer_types  # one panel per layer type
    browser.shot(f"config-{name}")
    browser.shot(f"spectrum-{name}", ".view[data-figure=spectrum]")
    browser.assert_clean()


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
    browser.page.fill("#config", json.dumps(llama))
    browser.page.set_input_files("#audit-file", str(path))
    browser.page.wait_for_selector("body[data-audit=done]", timeout=TIMEOUT_MS)
    report = browser.page.inner_text("#audit-report")
    assert report.startswith("BROKEN: positions rounded to bfloat16") and "fix:" in report
    assert browser.page.evaluate("document.querySelector('#audit-figure').naturalWidth") > 100
    browser.shot("audit", "#audit")
    browser.assert_clean()


def test_bad_input_shows_clear_errors(server, context, tmp_path):
    browser = Browser(context, server.url)
    browser.open()
    browser.page.check("input[name=source][value=config]")
    browser.page.fill("#config", "{not json")
    browser.page.click("#draw")
    assert "not valid JSON" in browser.page.inner_text("#source-error")
    browser.page.fill("#config", json.dumps({"model_type": "llama", "rope_theta": -5}))
    browser.draw()
    assert browser.view_states() == {v: "error" for v in VIEWS}
    message = browser.page.inner_text(".view[data-figure=spectrum] .error")
    assert "config.rope_theta" in message and "must be > 1" in message
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"\x93NUMPY this is not an array")
    browser.page.set_input_files("#audit-file", str(bad))
    browser.page.wait_for_selector("body[data-audit=error]", timeout=TIMEOUT_MS)
    assert "not a valid .npy" in browser.page.inner_text("#audit-error")
    browser.shot("errors")
    # The only console lines are Chromium's notes on the 4xx answers themselves.
    assert all("status of 4" in line for line in browser.console_errors), browser.console_errors
    browser.console_errors.clear()
    browser.assert_clean()


def test_posenc_explore_prints_the_page(server, capsys):
    from posenc.cli import main
    from posenc.http.runtime.launch import free_port

    assert main(["explore", "--url", server.url, "--no-browser"]) == 0
    assert capsys.readouterr().out.strip() == f"{server.url}/explore"
    assert main(["explore", "--url", f"http://127.0.0.1:{free_port()}", "--no-browser"]) == 1
