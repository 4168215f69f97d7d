# The two commands a new user needs: `make run` and `make test`. Everything else is optional.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Two installs, each with its stamp: what serving needs (`pip install -e .`: numpy, numba, FastAPI,
# uvicorn, matplotlib...; `make run`) and, on top, the test extras (`.[test]`: torch, transformers,
# playwright, locust, schemathesis...; `make test`), so `make run` never waits for the test tools.
SERVE_STAMP := $(VENV)/.posenc-serve-installed
TEST_STAMP  := $(VENV)/.posenc-test-installed
# Reinstall when packaging or native sources change (editable install: Python edits need nothing).
INSTALL_INPUTS := pyproject.toml $(wildcard setup.py native/src/*.c native/src/*.h native/include/*.h native/python/*.c)

.PHONY: run test install install-test schemathesis server-deps load-tools bench clean wheel native-server bench-qps bench-deps loadtest bench-http browser platform-tools client-tools

# pip without --quiet: a line per package it collects, downloads and installs, so a first install
# (a minute or more) shows that it is moving.
$(SERVE_STAMP): $(INSTALL_INPUTS)
	@echo "==> $(VENV): a virtual environment for posenc ($(PYTHON))"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	@echo "==> posenc and what serving needs (pyproject.toml's dependencies), the native core compiled in"
	$(BIN)/python -m pip install -e .
	touch $@

$(TEST_STAMP): $(SERVE_STAMP)
	@echo "==> the test extras on top (pyproject.toml's [test]: torch CPU, transformers, playwright, locust...)"
	$(BIN)/python -m pip install -e '.[test]'
	touch $@

install: $(SERVE_STAMP) server-deps native-server

install-test: install $(TEST_STAMP) load-tools

# liburing (Debian's liburing-dev) lets posenc-server use its io_uring loop (docs/server-io.md);
# without it (no root, no package) the server builds with the epoll loop alone.
server-deps:
	@[ -e /usr/include/liburing.h ] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq liburing-dev >/dev/null; } \
	  || echo "liburing-dev is not installed: posenc-server builds with the epoll loop only"

# The binary-protocol server, native/build/posenc-server, which `posenc serve` runs beside HTTP (needs
# only a C compiler; the sub-make rebuilds what changed, on every core, as the Dockerfile builds it).
native-server:
	@echo "==> posenc-server, the binary-protocol server (native/server)"
	$(MAKE) -C native/server -j"$$(nproc)"

# Its load tools for the tests and `make bench-qps`: native/build/posenc-load, posenc-jitter.
load-tools:
	$(MAKE) -C loadtest/native

# The wheel (with the native library) that the Docker image installs: the Dockerfile's builder stage
# runs `make wheel`, and tests/test_deploy.py runs it on the same build context, so CI exercises it.
WHEEL_DIR ?= dist
wheel:
	$(PYTHON) -m pip wheel --quiet --no-deps --wheel-dir $(WHEEL_DIR) .

run: install
	$(BIN)/posenc serve

# Headless Chromium for the browser tests of the explorer page: Debian's package, installed once.
browser:
	command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The CPU matrix's tools (tests/test_cpu_matrix.py): qemu-user runs the native code on emulated
# x86-64 CPU models and on aarch64; Debian's cross compiler builds the aarch64 library and server.
# The docs' examples (tests/test_docs_examples.py) run curl and jq and compile C blocks as C++ (g++);
# `posenc bench scale`'s HTTP part (tests/test_bench_scale.py) drives the service with wrk.
ARCH := $(shell uname -m)
ifeq ($(ARCH),x86_64)
PLATFORM_TOOLS := qemu-x86_64 qemu-aarch64 aarch64-linux-gnu-gcc objdump readelf curl jq g++ wrk
PLATFORM_PACKAGES := qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils curl jq g++ wrk
else
PLATFORM_TOOLS := objdump curl jq g++ wrk
PLATFORM_PACKAGES := binutils curl jq g++ wrk
endif
platform-tools:
	for tool in $(PLATFORM_TOOLS); do command -v $$tool >/dev/null || missing=1; done; \
	[ -z "$$missing" ] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(PLATFORM_PACKAGES) >/dev/null; }

# The language clients' toolchains: tests/test_clients.py builds and runs clients/go (Debian's Go 1.19,
# standard library only) and clients/java (JDK 17; Maven builds it offline, -o, from what the machine has).
CLIENT_TOOLS := go javac mvn
CLIENT_PACKAGES := golang-go default-jdk-headless maven
client-tools:
	for tool in $(CLIENT_TOOLS); do command -v $$tool >/dev/null || missing=1; done; \
	[ -z "$$missing" ] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(CLIENT_PACKAGES) >/dev/null; }

# schemathesis in a venv of its own (its pins stay out of posenc's): tests/test_http_schema_conformance.py
# runs its CLI against `posenc serve`, with schemathesis.toml.
SCHEMATHESIS_VENV    := .venv-schemathesis
SCHEMATHESIS_VERSION := 4.32.5
SCHEMATHESIS_STAMP   := $(SCHEMATHESIS_VENV)/.installed-$(SCHEMATHESIS_VERSION)
$(SCHEMATHESIS_STAMP):
	rm -rf $(SCHEMATHESIS_VENV)
	$(PYTHON) -m venv $(SCHEMATHESIS_VENV)
	$(SCHEMATHESIS_VENV)/bin/python -m pip install --quiet schemathesis==$(SCHEMATHESIS_VERSION)
	touch $@
schemathesis: $(SCHEMATHESIS_STAMP)

test: install-test browser platform-tools client-tools schemathesis
	$(BIN)/python -m pytest

bench: install
	$(BIN)/posenc bench tables

# The QPS benchmark's system packages (not needed by `make test`): redis-server (Debian's package)
# to race against, and perf for per-request CPU time and system calls (optional).
bench-deps:
	command -v redis-server >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }
	command -v perf >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null || true
	command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }

# Binary protocol vs redis on this machine, server and load generator pinned to different cores.
bench-qps: install bench-deps load-tools
	$(BIN)/posenc bench qps --readme docs/benchmarks.md

# Locust SLO run: starts `posenc serve` (embedded config), 30 s of the realistic mix on 127.0.0.1;
# fails on any failed request or P99 over the threshold (loadtest/slo.py --help for the knobs).
loadtest: install-test
	$(BIN)/python loadtest/slo.py

# HTTP with wrk vs a bare ASGI app returning the same bytes (server on CPU 0, wrk on CPU 1).
bench-http: install bench-deps
	$(BIN)/posenc bench http --readme docs/benchmarks.md

clean:
	rm -rf $(VENV) $(SCHEMATHESIS_VENV) build *.egg-info service/*.egg-info native/build
