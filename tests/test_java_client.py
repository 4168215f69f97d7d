"""The Java client's own build and unit tests (clients/java): `mvn -o package` compiles it with every
lint as an error, runs its JUnit tests (request frames byte by byte, reply headers, float16/bfloat16
widening over every bit pattern, rows of each dtype, the error classes of every status, inline-spec
refusals, the pool against a scripted peer: replies out of order, a frame-level error, a clean close, a
reply cut short, a timeout, RESOLVE per connection; the shared-memory reader on segments written by the
doc's rules) and builds the jar a Java team publishes. Against a live server it runs the shared case
list and scenarios in tests/test_clients.py, through clients/java/run-cases and run-scenario."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
JAVA = ROOT / "clients" / "java"


def test_maven_builds_tests_and_packages_the_client():
    mvn = shutil.which("mvn")
    if mvn is None:
        pytest.fail("`mvn` is not on PATH (`make test` installs it: Makefile CLIENT_PACKAGES)")
    done = subprocess.run([mvn, "-o", "-q", "-B", "package"], check=False, cwd=JAVA, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"mvn -o package failed:\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    suites = [ET.parse(p).getroot() for p in sorted((JAVA / "target" / "surefire-reports").glob("TEST-*.xml"))]
    counts = {key: sum(int(s.get(key)) for s in suites) for key in ("tests", "failures", "errors", "skipped")}
    assert counts["tests"] >= 47 and counts["failures"] == counts["errors"] == counts["skipped"] == 0, counts
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    pom = (JAVA / "pom.xml").read_text()
    assert re.search(rf"<artifactId>posenc-client</artifactId>\s*(<!--.*?-->\s*)?<version>{re.escape(version)}</version>",
                     pom, re.DOTALL), "the pom's version is the Python package's"
    with zipfile.ZipFile(JAVA / "target" / f"posenc-client-{version}.jar") as jar:
        names = set(jar.namelist())
    assert {"dev/posenc/client/PosencClient.class", "dev/posenc/shm/ShmDirectory.class"} <= names
    assert not any(name.startswith("dev/posenc/harness/") for name in names), "the harness is not published"
