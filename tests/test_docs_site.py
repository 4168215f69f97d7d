"""The documentation site builds with `mkdocs build --strict` (no warning: no broken link or anchor, no
page left out of the nav, no docstring the API reference cannot render) and works offline: nothing in
its HTML, CSS or JS loads from another host (no web font, no CDN script or stylesheet)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CDN_HOSTS = ("unpkg.com", "cdn.jsdelivr.net", "cdnjs.cloudflare.com", "fonts.googleapis.com", "fonts.gstatic.com",
             "ajax.googleapis.com", "code.jquery.com", "polyfill.io", "stackpath.bootstrapcdn.com",
             "maxcdn.bootstrapcdn.com", "use.fontawesome.com", "kit.fontawesome.com", "cdn.plot.ly")
# Material's JS bundle names two scripts it loads only when a page needs them: a ResizeObserver polyfill
# (every browser Material supports has ResizeObserver) and mermaid (only for ```mermaid diagrams, which no
# page has: checked below). Neither is ever fetched by this site.
DORMANT = ("https://unpkg.com/resize-observer-polyfill", "https://unpkg.com/mermaid@")
ASSET = re.compile(r"""<(?:script|img|iframe|source)\b[^>]*\bsrc=["']https?://|<link\b[^>]*\bhref=["']https?://"""
                   r"""|url\(\s*["']?https?://|@import\s+(?:url\()?["']?https?://""", re.I)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    return out


def test_every_page_is_built(site):
    pages = sorted(p.relative_to(ROOT / "docs").with_suffix("") for p in (ROOT / "docs").rglob("*.md"))
    for page in pages:
        built = site / ("index.html" if page.name == "index" else f"{page}/index.html")
        assert built.is_file(), page
    api = (site / "api" / "index.html").read_text()
    for name in ("posenc.rope_cos_sin", "posenc.client.Client", "posenc.shm.attach", "posenc.torch.patch_model"):
        assert f'id="{name}"' in api, name


def test_nothing_loads_from_another_host(site):
    problems = []
    for path in site.rglob("*"):
        if path.suffix not in (".html", ".css", ".js"):
            continue
        text = path.read_text(errors="replace")
        for m in ASSET.finditer(text):
            problems.append(f"{path.relative_to(site)}: {text[m.start():m.end() + 60]!r}")
        for dormant in DORMANT:
            text = text.replace(dormant, "")
        problems += [f"{path.relative_to(site)}: {host}" for host in CDN_HOSTS if host in text]
        if path.suffix == ".html" and 'class="mermaid"' in text:
            problems.append(f"{path.relative_to(site)}: a mermaid diagram (its script comes from a CDN)")
    assert not problems, "\n".join(problems)


def test_search_works_offline(site):
    index = site / "search" / "search_index.json"
    assert index.is_file() and "posenc_shm_attach" in index.read_text()


def test_the_readme_is_a_front_page():
    """README.md stays short, and every link it makes into the repository resolves (the site's --strict build
    checks the docs pages; the README is not one of them)."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    targets = re.findall(r"\]\(((?!https?:)[^)#\s]+)(?:#[^)]*)?\)", text)
    assert targets and all((ROOT / t).exists() for t in targets), [t for t in targets if not (ROOT / t).exists()]


#: A count of tests: "8,375 tests", "11 tests in 74 s", "47 JUnit 5 tests", "8,237 passed".
TEST_COUNT = re.compile(r"\b\d[\d,]*(?:\s+[\w.-]+){0,2}?\s+(?:tests|passed)\b")
CHROMIUM = Path("/usr/bin/chromium")


def test_one_place_states_the_suites_size_and_time():
    """The README's Quick start says how many tests `make test` runs and how long it takes; another page
    that states a count for the whole suite disagrees sooner or later (issue 39: README 5,745 tests in
    11 min, docs/index.md 2791 in 7 min 52 s). A count elsewhere must name the tests/ file it counts."""
    readme = (ROOT / "README.md").read_text()
    quick_start = readme[readme.index("## Quick start"):readme.index("\n## ", readme.index("## Quick start") + 1)]
    assert len(TEST_COUNT.findall(quick_start)) == 1, "the README's Quick start states the suite's size once"
    problems = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = page.read_text()
        for match in TEST_COUNT.finditer(text):
            if page.name == "README.md" and match.group() in quick_start:
                continue
            line_start = text.rfind("\n", 0, match.start()) + 1
            if "tests/" not in text[line_start:match.end()]:
                line = text.count("\n", 0, match.start()) + 1
                problems.append(f"{page.relative_to(ROOT)}:{line}: {match.group()!r}")
    assert not problems, "a test count that is not the README's and names no tests/ file:\n" + "\n".join(problems)


def test_the_binary_protocol_rows_name_one_machine():
    """README, the benchmarks page's prose and its generated table footer named three machines for the
    binary-protocol rows (issue 39): the footer's (what `posenc bench qps` printed) is the one."""
    bench = (ROOT / "docs" / "benchmarks.md").read_text()
    section = bench[bench.index("## Binary protocol (`posenc bench qps`)"):bench.index("What the previous run")]
    machine = re.search(r"Machine: (AMD EPYC|Intel Xeon)", section)[1]
    assert set(re.findall(r"AMD EPYC|Intel Xeon", section)) == {machine}
    readme = (ROOT / "README.md").read_text()
    assert re.search(rf"binary-protocol\s+rows on a quiet {machine}", readme)
    (row,) = [line for line in readme.splitlines() if line.startswith("| binary protocol rows |")]
    assert f"| {machine}" in row, row


def test_code_blocks_show_their_long_lines(site):
    """A long line of a code block (torch.md's expected output after a comment) wraps instead of running
    on behind a horizontal scrollbar."""
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium not installed (make browser)")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        hidden = {}
        for name in ("torch", "library", "http", "cli"):
            page.goto((site / name / "index.html").as_uri())
            hidden[name] = page.evaluate("""() => [...document.querySelectorAll('pre > code')]
                .filter(code => code.scrollWidth > code.clientWidth + 1)
                .map(code => code.innerText.split('\\n').reduce((a, b) => (b.length > a.length ? b : a)))""")
        browser.close()
    assert not any(hidden.values()), hidden


def test_the_nav_takes_the_pages_that_exist():
    """docs_nav.py: a page ORDER names but the tree lacks is left out; a page ORDER does not name goes to More."""
    sys.path.insert(0, str(ROOT))
    try:
        from docs_nav import nav_for
    finally:
        sys.path.remove(str(ROOT))
    nav = nav_for(["index.md", "http.md", "protocol.md", "new-page.md"])
    assert nav == [{"Start": [{"Overview": "index.md"}]}, {"Guides": ["http.md"]},
                   {"Contracts": [{"Binary protocol v1": "protocol.md"}]}, {"More": ["new-page.md"]}]
