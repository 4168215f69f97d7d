"""The explorer's Lab view in a real browser (the Chromium, server and page of tests/test_explore_browser.py):
the documented run shipped with posenc draws as the page opens, with nothing pressed; hover shows values;
PNG/SVG/CSV/JSON export (the CSV the service's bytes); a results file dropped on B draws next to A, the
address recording only which kinds of source are chosen; a file that is not a results file is one error in its
slot, A staying drawn. No console errors but Chromium's note on the one 422, no request off the service;
screenshots to build/test-artifacts/explore/."""

from __future__ import annotations

import json
from urllib.parse import quote, unquote

import pytest
from posenc.lab import results as lab_results
from posenc.plots import render_lab
from test_explore_browser import CHROMIUM, FIT, TIMEOUT_MS, Browser, context, server  # noqa: F401 (fixtures)
from test_http_audit import lm_rope_and_alibi

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium not installed (make browser)")
LAB = "#lab"
#: The documented run's panels, as its figure titles them.
TITLES = ["lm: perplexity vs length", "lm: attention entropy vs length", "copy: token accuracy vs length",
          "copy: attention entropy vs length"]


def lab_state(browser: Browser, slot: str) -> str | None:
    return browser.page.get_attribute(f"{LAB} .slot[data-slot={slot}]", "data-state")


def open_drawn(browser: Browser) -> None:
    """The page opened and its Lab view drawn: nothing pressed, no other view drawn."""
    browser.open()
    browser.page.wait_for_selector(f"{LAB}[data-state=drawn]", timeout=TIMEOUT_MS)
    assert browser.page.get_attribute("body", "data-state") is None  # Draw never pressed


#: Where Vega drew each series point of a slot's figure (page coordinates) and its numbers: the points of the
#: lines are small (the pointer finds them within a few pixels), so the hover test goes to one rather than search.
POINTS = """slot => {
  const view = slot.vegaView, canvas = slot.querySelector('canvas').getBoundingClientRect(), found = [];
  const walk = (mark, dx, dy) => (mark.items || []).forEach((item) => {
    if (mark.marktype === 'symbol' && item.datum && item.datum.series !== undefined)
      found.push({x: canvas.left + dx + item.x, y: canvas.top + dy + item.y, series: item.datum.series,
                  length: item.datum.x, value: item.datum.y});
    const [x, y] = [dx + (item.x || 0), dy + (item.y || 0)];
    if (mark.marktype === 'group') (item.items || []).forEach((m) => walk(m, x, y));
  });
  walk(view.scenegraph().root, view.origin()[0] + view.padding().left, view.origin()[1] + view.padding().top);
  return found;
}"""


def hover_values(browser: Browser, slot: str) -> tuple[dict, dict]:
    """A series point of the slot's figure (one no other lies near) and the tooltip the pointer shows on it."""
    browser.page.locator(f"{LAB} .slot[data-slot={slot}] canvas").scroll_into_view_if_needed()  # below the fold
    points = browser.page.locator(f"{LAB} .slot[data-slot={slot}]").evaluate(POINTS)
    point = next(p for p in points
                 if all(abs(p["x"] - q["x"]) + abs(p["y"] - q["y"]) > 16 for q in points if q is not p))
    browser.page.mouse.move(point["x"], point["y"])
    browser.page.locator("#vg-tooltip-element.visible").wait_for(timeout=TIMEOUT_MS)
    cells = [line.strip() for line in browser.page.inner_text("#vg-tooltip-element").split("\n") if line.strip()]
    return point, dict(zip(cells[::2], cells[1::2]))  # its table: name, value, name, value, ...


def test_the_documented_run_draws_on_load_and_exports(server, context, tmp_path):
    browser = Browser(context, server.url)
    open_drawn(browser)
    assert lab_state(browser, "a") == "drawn" and browser.page.locator(f"{LAB} .slot").count() == 1
    assert browser.page.inner_text(f"{LAB} .slot-name") == "A: the documented run"
    assert "budget documented" in browser.page.inner_text(f"{LAB} .summary")
    figure = browser.page.evaluate(f"document.querySelector('{LAB} .slot').figure.data")
    assert [p["title"] for p in figure["panels"]] == TITLES
    assert browser.page.evaluate(f"document.querySelector('{LAB} canvas').width") > 900
    point, shown = hover_values(browser, "a")  # the series, its length and value under the pointer
    metric = next(key for key in shown if key not in ("series", "evaluated length"))
    assert shown["series"] == point["series"] and shown["evaluated length"] == str(point["length"]), (point, shown)
    assert float(shown[metric]) == pytest.approx(point["value"], rel=1e-4), (point, shown)
    browser.shot("lab", LAB)
    exported = {"png": lambda data: data[:8] == b"\x89PNG\r\n\x1a\n", "svg": lambda data: b"<svg" in data[:400],
                "csv": lambda data: data == render_lab(lab_results.documented(), "csv")[0],  # the service's bytes
                "json": lambda data: [p["title"] for p in json.loads(data)["panels"]] == TITLES}
    for what, check in exported.items():
        with browser.page.expect_download() as info:
            browser.page.click(f"{LAB} .slot[data-slot=a] button[data-export={what}]")
        path = tmp_path / info.value.suggested_filename
        info.value.save_as(path)
        assert check(path.read_bytes()), what
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lab-a.csv", "lab-a.json", "lab-a.png", "lab-a.svg"]
    with browser.page.expect_download() as info:  # the page offers the documented file itself
        browser.page.click(f"{LAB} a[download]")
    info.value.save_as(tmp_path / "documented.json")
    assert (tmp_path / "documented.json").read_bytes() == lab_results.DOCUMENTED.read_bytes()
    browser.assert_clean()


DROP = """([name, text]) => { const dt = new DataTransfer();
  dt.items.add(new File([text], name, {type: 'application/json'})); return dt; }"""


def test_a_results_file_beside_the_documented_run_and_bad_files(server, context, tmp_path):
    browser = Browser(context, server.url)
    open_drawn(browser)
    doc = lm_rope_and_alibi()
    drop = browser.page.evaluate_handle(DROP, ["lm.json", json.dumps(doc)])
    browser.page.dispatch_event(f"{LAB} .lab-source[data-slot=b]", "drop", {"dataTransfer": drop})
    browser.page.wait_for_selector(f"{LAB} .slot[data-slot=b][data-state=drawn]", timeout=TIMEOUT_MS)
    browser.page.wait_for_selector(f"{LAB}[data-state=drawn]", timeout=TIMEOUT_MS)
    assert browser.page.is_checked("input[name=lab-b][value=file]")
    assert browser.page.inner_text(f"{LAB} .slot[data-slot=b] .slot-name") == "B: lm.json"
    figure = browser.page.evaluate(f"document.querySelector('{LAB} .slot[data-slot=b]').figure.data")
    assert {s["name"] for s in figure["panels"][0]["series"]} == {"rope", "alibi", "source (floor)"}
    boxes = browser.page.evaluate(FIT, LAB)
    assert [b["slot"] for b in boxes] == ["a", "b"] and boxes[0]["chart"][1] <= boxes[1]["chart"][0], boxes
    for b in boxes:  # side by side, each figure within its own box
        assert b["chart"][0] - 0.5 <= b["figure"][0] and b["figure"][1] <= b["chart"][1] + 0.5, b
    browser.shot("lab-side-by-side", LAB)
    hash_ = unquote(browser.page.url.split("#", 1)[1])
    assert json.loads(hash_)["lab"] == {"a": "documented", "b": "file"} and "perplexity" not in hash_
    # Files that are not results files: one error in B's slot, naming the file; A stays drawn.
    (tmp_path / "other.json").write_text('{"format": "something else"}')
    (tmp_path / "broken.json").write_text("{not json")
    for name, says in (("other.json", "other.json: results: is not a posenc lab results file"),
                       ("broken.json", "broken.json: is not valid JSON")):
        browser.page.set_input_files(f"{LAB} .lab-source[data-slot=b] .lab-file", str(tmp_path / name))
        browser.page.wait_for_selector(f"{LAB}[data-state=error]", timeout=TIMEOUT_MS)
        assert browser.page.inner_text(f"{LAB} .slot[data-slot=b] .error").startswith(says)
        assert browser.page.locator(f"{LAB} .slot[data-slot=b] canvas").count() == 0
        assert lab_state(browser, "a") == "drawn"
        assert browser.page.locator(f"{LAB} .slot[data-slot=a] canvas").count() == 1
        browser.page.click(f"{LAB} input[name=lab-b][value=none]")  # back to A alone
        browser.page.wait_for_selector(f"{LAB}[data-state=drawn]", timeout=TIMEOUT_MS)
    assert browser.page.locator(f"{LAB} .slot").count() == 1
    assert browser.page.evaluate("[...document.querySelectorAll('.error')].filter(e => e.textContent).length") == 0
    # Chromium's note on the 422 of other.json (broken.json never left the page)
    assert len(browser.console_errors) == 1, browser.console_errors
    assert "status of 422" in browser.console_errors[0]
    browser.console_errors.clear()
    browser.assert_clean()


def test_a_link_opens_the_lab_sources_it_names(server, context):
    """A link records which kinds of source the Lab view draws, never a file: opened, it waits for the files."""
    state = {"lab": {"a": "file", "b": "file"}}
    browser = Browser(context, server.url)
    browser.page.goto(f"{server.url}/explore#{quote(json.dumps(state))}")
    browser.page.wait_for_selector(f"{LAB}[data-state=empty]", timeout=TIMEOUT_MS)
    assert browser.page.is_checked("input[name=lab-a][value=file]") and browser.page.is_checked(
        "input[name=lab-b][value=file]")
    notes = browser.page.locator(f"{LAB} .slot .note").all_inner_texts()
    assert notes == ["choose or drop a results file (posenc lab --out results.json)"] * 2, notes
    assert browser.page.locator(f"{LAB} canvas").count() == 0
    browser.page.wait_for_selector("body[data-state=drawn]", timeout=TIMEOUT_MS)  # the other views, from the link
    assert json.loads(unquote(browser.page.url.split("#", 1)[1]))["lab"] == state["lab"]
    assert not [u for u in browser.requests if "/figures/lab" in u]  # nothing to ask the service for
    browser.assert_clean(nothing_to_draw=1)  # ALiBi of the default table
