"""The Java client's own build and unit tests (clients/java): `mvn -o package` compiles it with every
lint as an error, runs its JUnit tests (request frames byte by byte, reply headers, float16/bfloat16
widening over every bit pattern, rows of each dtype, the error classes of every status, inline-spec
refusals, the pool against a scripted peer: replies out of order, a frame-level error, a clean close, a
reply cut short, a timeout, RESOLVE per connection; the shared-memory reader on segments written by the
doc's rules) and builds the jar a Java team publishes. Against a live server it runs the shared case
list and scenarios in tests/test_clients.py, through clients/java/run-cases and run-scenario; here, its
payments driver (clients/java/run-payments, for `posenc bench clients`) reports as the bench reads it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import posenc
import pytest
from binary_support import running_server, table_store
from posenc.tables import TableSpec

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


@pytest.mark.parametrize("loop", [[], ["-rate", "2000"]], ids=["closed", "open"])
def test_run_payments_reports_as_posenc_bench_clients_reads_it(loop):
    """clients/java/run-payments, the Java driver of `posenc bench clients`: one JSON object with the rate,
    the replies and exact percentiles of a short run against a named computed table."""
    table = {"pay": TableSpec(posenc.SinusoidalSpec(128), 0, 1 << 53, computed=True)}
    with table_store(table) as (_, root), running_server(root, threads=1) as server:
        done = subprocess.run([str(JAVA / "run-payments"), server.address, "pay", "-seconds", "0.5", "-warmup", "0.3",
                               "-workers", "8", "-pool", "2", *loop], check=False, capture_output=True, text=True,
                              timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["errors"] == 0 and report["completed"] > 0 and report["rps"] == report["completed"] / 0.5
    assert 0 < report["p50_us"] <= report["p99_us"] <= report["p999_us"] <= report["max_us"], report
