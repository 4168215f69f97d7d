"""The explorer's Pick panel in a real browser (the Chromium, server and page of tests/test_explore_browser.py):
a new-model question and a pasted checkpoint answered as posenc.pick answers them (the summary, every reason
with its evidence: lab citations as the CLI prints them, sources linking to their SOURCES url, the config.json
patch); a refused question is one error naming the field and breaks nothing else; the share link reopens the
form and answers it. No console errors but Chromium's note on each 422, no request off the service; a
screenshots to build/test-artifacts/explore/pick*.png."""

from __future__ import annotations

import json
from urllib.parse import unquote

import pytest
from audit_recipes import config
from posenc.lab import results
from posenc.pick import pick
from posenc.pick.evidence import describe_point
from posenc.pick.sources import SOURCES
from test_explore_browser import CHROMIUM, TIMEOUT_MS, Browser, context, server  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium not installed (make browser)")
PICK = "#pick"
FORM = f"{PICK} .pick-form"
NOTE_422 = "Failed to load resource: the server responded with a status of 422 (Unprocessable Entity)"

#: What the panel shows, read from the page: the summary, parameters, patch and every reason's evidence items.
SHOWN = """box => {
  const items = (list) => [...box.querySelectorAll(`${list} > li`)].map((li) => ({
    text: li.firstChild.textContent,
    evidence: [...li.querySelectorAll('.evidence > li')].map((e) => {
      const a = e.querySelector('a'), cite = e.querySelector('.cite');
      return {kind: e.dataset.kind, text: e.textContent, cite: cite && cite.textContent,
              link: a && {href: a.getAttribute('href'), target: a.target, rel: a.rel, text: a.textContent}};
    })}));
  return {summary: box.querySelector('.pick-summary').textContent,
          parameters: Object.fromEntries([...box.querySelectorAll('.pick-parameters tr')].map(
            (tr) => [tr.cells[0].textContent, tr.cells[1].textContent])),
          patch: box.querySelector('.pick-patch').hidden ? null : box.querySelector('#pick-patch').textContent,
          reasons: items('.pick-reasons'), notes: items('.pick-notes ol')};
}"""


def fill(browser: Browser, **fields) -> None:
    """Sets the Pick form's fields by name (True/False ticks a box, text a select's choice, numbers typed)."""
    for name, value in fields.items():
        selector = f"{FORM} [name={name}]"
        if isinstance(value, bool):
            browser.page.set_checked(selector, value)
        elif name in ("goal", "training_budget", "latency"):
            browser.page.select_option(selector, value)
        else:
            browser.page.fill(selector, str(value))


def ask(browser: Browser, **fields) -> str:
    """Fills the form, presses Pick and waits for the answer or the error: the panel's state."""
    fill(browser, **fields)
    browser.page.click("#pick-ask")
    browser.page.wait_for_selector(f"{PICK}[data-state=answered], {PICK}[data-state=error]", timeout=TIMEOUT_MS)
    return browser.page.get_attribute(PICK, "data-state")


def shown(browser: Browser) -> dict:
    return browser.page.locator("#pick-answer").evaluate(SHOWN)


def assert_shows(page: dict, answer) -> None:
    """The page's answer is the library's: the summary, each reason's text and every piece of its evidence."""
    assert page["summary"] == answer.summary
    assert set(page["parameters"]) == set(answer.parameters)
    for drawn, reasons in ((page["reasons"], answer.reasons), (page["notes"], answer.notes)):
        assert [r["text"] for r in drawn] == [r.text for r in reasons]
        for drawn_reason, reason in zip(drawn, reasons):
            assert len(drawn_reason["evidence"]) == len(reason.evidence), reason.text
            for item, evidence in zip(drawn_reason["evidence"], reason.evidence):
                assert item["kind"] == evidence["kind"]
                if evidence["kind"] == "lab":  # the CLI's line
                    assert item["cite"] == f"{evidence['file']} {evidence['path']}: {describe_point(evidence)}"
                elif evidence["kind"] == "source":
                    assert item["link"] == {"href": SOURCES[evidence["id"]].url, "target": "_blank",
                                            "rel": "noopener noreferrer", "text": evidence["title"]}, item
                    assert item["text"].endswith(f", {evidence['where']}")
                else:
                    assert f"{evidence['key']} = {evidence['value']}" in item["text"]


def hash_state(browser: Browser) -> dict:
    return json.loads(unquote(browser.page.url.split("#", 1)[1]))


def test_a_new_model_question_is_answered_with_its_evidence_and_the_link_reopens_it(server, context):
    browser = Browser(context, server.url)
    browser.open()
    assert ask(browser, target_context=8192, extrapolate=True, n_heads=8) == "answered"
    answer = pick(8192, extrapolate=True, n_heads=8)
    page = shown(browser)
    assert_shows(page, answer)
    assert page["patch"] is None  # a new model: no config.json to patch
    sources = [e for r in page["reasons"] for e in r["evidence"] if e["kind"] == "source"]
    assert sources and all(e["link"]["href"].startswith("https://") for e in sources)
    assert any(e["kind"] == "lab" for r in page["reasons"] for e in r["evidence"])
    browser.shot("pick", PICK)
    browser.page.click(f"{PICK} .pick-reasons button.cite >> nth=0")  # a lab citation: to the Lab view
    top = browser.page.evaluate("document.querySelector('#lab').getBoundingClientRect().top")
    assert abs(top) < 2, top
    state = hash_state(browser)
    assert state["pick"] == {"target_context": 8192, "extrapolate": True, "latency": "normal", "n_heads": 8,
                             "use_config": True}
    browser.assert_clean()
    # The share link: a new page refills the form and answers it.
    other = Browser(context, server.url)
    other.page.goto(browser.page.url)
    other.page.wait_for_selector(f"{PICK}[data-state=answered]", timeout=TIMEOUT_MS)
    assert other.page.input_value(f"{FORM} [name=target_context]") == "8192"
    assert other.page.input_value(f"{FORM} [name=n_heads]") == "8"
    assert other.page.is_checked(f"{FORM} [name=extrapolate]")
    assert shown(other) == page
    other.page.wait_for_selector("body[data-state=drawn]", timeout=TIMEOUT_MS)  # the other views, from the link
    assert hash_state(other) == state
    other.assert_clean(nothing_to_draw=1)  # ALiBi of the default table


def test_a_pasted_checkpoint_gets_the_librarys_config_patch(server, context):
    qwen = config("qwen2-7b-yarn")
    browser = Browser(context, server.url)
    browser.open()
    browser.page.fill(".source[data-slot=a] .config", json.dumps(qwen, indent=1))
    browser.page.check("input[name=source-a][value=config]")  # draws the views from it, too
    assert ask(browser, target_context=262144) == "answered"
    answer = pick(262144, config=qwen)
    page = shown(browser)
    assert_shows(page, answer)
    assert json.loads(page["patch"]) == json.loads(json.dumps(answer.config_patch))
    assert any(e["kind"] == "config" for r in page["reasons"] for e in r["evidence"])
    browser.shot("pick-checkpoint", PICK)
    for _ in range(2):  # the clipboard, whether the browser lets the page write it or not; then none at all
        browser.page.click("#pick-copy")
        browser.page.wait_for_selector(f"{PICK} .pick-copied:not(:empty)", timeout=TIMEOUT_MS)
        assert browser.page.inner_text(f"{PICK} .pick-copied") in ("copied", "selected: press Ctrl+C (or ⌘C) to copy")
        browser.page.evaluate("Object.defineProperty(navigator, 'clipboard', {value: undefined, configurable: true});"
                              "document.querySelector('.pick-copied').textContent = ''")
    browser.page.wait_for_selector("body[data-state=drawn]", timeout=TIMEOUT_MS)
    browser.assert_clean(nothing_to_draw=1)  # ALiBi of the Qwen2 config


def test_a_refused_question_is_one_error_naming_the_field(server, context):
    browser = Browser(context, server.url)
    browser.open()
    assert ask(browser, target_context=4096, goal="train", training_budget="none") == "error"
    errors = browser.page.evaluate("[...document.querySelectorAll('.error')].map(e => e.textContent).filter(t => t)")
    assert len(errors) == 1 and errors[0].startswith("training_budget: a new model needs training"), errors
    assert browser.page.is_hidden("#pick-answer")
    assert browser.page.get_attribute(f"{FORM} [name=training_budget]", "aria-invalid") == "true"
    # A checkpoint pick will not take further: the field is source A's config.
    browser.page.fill(".source[data-slot=a] .config", json.dumps(config("llama-3.1-8b")))
    browser.page.check("input[name=source-a][value=config]")
    assert ask(browser, target_context=262144, goal="", training_budget="") == "error"
    error = browser.page.inner_text("#pick-error")
    assert error.startswith("hf_config.rope_scaling: this model already uses llama3 scaling"), error
    assert error.endswith("(source A's config.json)")
    assert browser.page.get_attribute(f"{FORM} [name=use_config]", "aria-invalid") == "true"
    assert browser.page.get_attribute(f"{FORM} [name=training_budget]", "aria-invalid") is None
    # Nothing else broke: the views drew the config, and the next question is answered, the error gone.
    browser.page.wait_for_selector("body[data-state=drawn]", timeout=TIMEOUT_MS)
    assert browser.page.inner_text("#source-error") == ""
    assert ask(browser, target_context=65536) == "answered"
    assert shown(browser)["summary"] == pick(65536, config=config("llama-3.1-8b")).summary
    assert browser.page.inner_text("#pick-error") == ""
    assert browser.console_errors == [NOTE_422] * 3, browser.console_errors  # the two refusals and ALiBi's
    browser.console_errors.clear()
    browser.assert_clean()


def test_the_answer_reasons_from_the_run_the_lab_view_shows(server, context, tmp_path):
    """A results file chosen for Lab A is what the Pick panel reasons from (as `posenc pick --results`)."""
    doc = results.documented()
    for run in doc["results"]:  # a run whose ALiBi diverged on the language model
        for point in run["evaluations"].get("alibi", []) if run["task"] == "lm" else []:
            point["perplexity"] = 1000.0
    (tmp_path / "diverged.json").write_text(json.dumps(doc))
    browser = Browser(context, server.url)
    browser.open()
    browser.page.set_input_files("#lab .lab-source[data-slot=a] .lab-file", str(tmp_path / "diverged.json"))
    browser.page.wait_for_selector("#lab .slot[data-slot=a][data-state=drawn]", timeout=TIMEOUT_MS)
    assert ask(browser, target_context=8192, extrapolate=True, n_heads=8) == "answered"
    answer = pick(8192, extrapolate=True, n_heads=8, results=doc)
    assert answer.scheme != pick(8192, extrapolate=True, n_heads=8).scheme
    assert_shows(shown(browser), answer)
    assert browser.page.inner_text(f"{PICK} .pick-lab").startswith("lab evidence from the posted results")
    browser.assert_clean()
