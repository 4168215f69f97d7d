"""What `make run` installs is what serving needs (issue 39): `pip install posenc` (the base
dependencies) serves, `posenc[test]` adds the test tools. The serving stack imports no test-only
package, `make run` installs no extra, and the optional torch features say which extra they need."""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

#: The import names of the [test] extra's packages that the base dependencies do not pull in
#: (pyyaml, for one, comes with uvicorn[standard]).
TEST_ONLY_IMPORTS = ("torch", "transformers", "pytest", "hypothesis", "mpmath", "kubernetes_validate",
                     "dockerfile", "gguf", "schemathesis", "locust", "prometheus_client", "simde", "playwright",
                     "mkdocs", "material", "mkdocstrings")

#: Everything `posenc serve` runs: the CLI, the app with every route (explorer figures and audit
#: included), the server loop, the clients.
SERVING = """
import posenc, posenc.cli, posenc.cli.serve, posenc.client, posenc.shm, posenc.plots, posenc.audit
from posenc.http import create_app
from posenc.http.runtime import server
from posenc.config import ServiceConfig
app = create_app(ServiceConfig.from_dict({"server": {"shm_dir": "/nonexistent"}, "tables": []}))
"""


def _without(packages, code: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter where importing any of `packages` fails as if not installed."""
    block = f"import sys\nfor name in {list(packages)!r}:\n    sys.modules[name] = None\n"
    return subprocess.run([sys.executable, "-c", block + code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", "/tmp/numba")})


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_the_serving_stack_imports_no_test_only_package():
    result = _without(TEST_ONLY_IMPORTS, SERVING)
    assert result.returncode == 0, result.stderr[-3000:]


def test_no_package_is_both_a_dependency_and_a_test_extra():
    base = {_name(requirement) for requirement in PYPROJECT["dependencies"]}
    test = {_name(requirement) for requirement in PYPROJECT["optional-dependencies"]["test"]}
    assert base & test == set(), "a base dependency is installed for serving already"


def _dry_run(target: str) -> str:
    """The commands `make TARGET` would run from scratch: make -n -B, which runs nothing (sub-makes
    only print theirs too)."""
    result = subprocess.run(["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_make_run_installs_the_base_package_and_make_test_the_test_extra():
    run = _dry_run("run")
    assert re.search(r"pip install -e \.$", run, re.MULTILINE), run
    assert "[test]" not in run and "--quiet" not in run, "make run installs no extra, and shows pip's progress"
    assert "pip install -e '.[test]'" in _dry_run("test")


def test_the_torch_features_name_the_extra_they_need():
    imported = _without(["torch"], "import posenc.torch")
    assert "ModuleNotFoundError: posenc.torch needs torch" in imported.stderr
    assert "pip install 'posenc[torch]'" in imported.stderr
    bench = _without(["transformers"], "import sys, posenc.cli; sys.exit(posenc.cli.main(['bench', 'torch']))")
    assert bench.returncode == 2, bench.stderr[-2000:]
    assert bench.stderr.startswith("posenc: error: bench torch: needs transformers, which posenc does not install")
