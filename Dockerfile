# posenc: exact, fast positional encodings over HTTP (:8000) and the native binary protocol (:8001).
#
#   docker build -t posenc .
#   docker run --rm -p 8000:8000 -p 8001:8001 --shm-size=320m --read-only --tmpfs /tmp -e POSENC_WORKERS=2 \
#       -v "$PWD/deploy/posenc.toml:/etc/posenc/posenc.toml:ro" posenc serve --config /etc/posenc/posenc.toml
#
# --shm-size: the tables live in /dev/shm, and Docker's default 64 MiB holds not even one 131072 x 128
# float32 table (64 MiB of data + its header). Give it twice the configured tables (docs/deploy.md).
# tests/test_deploy.py checks this file and runs the builder's `make` commands on the same build context.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- builder: the wheel (native library compiled in) and the binary-protocol server -----------------
FROM ${PYTHON_IMAGE} AS builder
# liburing-dev: posenc-server's io_uring loop, linked statically (the runtime stage needs nothing more).
# Where the container's seccomp profile refuses io_uring (Docker's default does), --io auto serves with epoll.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev make liburing-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN make wheel PYTHON=python WHEEL_DIR=/wheels
RUN make -C native/server -j"$(nproc)"

# --- runtime: the wheel on a slim Python, as a non-root user --------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
RUN groupadd --system --gid 10001 posenc \
 && useradd --system --uid 10001 --gid posenc --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin posenc
COPY --from=builder /wheels /wheels
RUN python -m pip install --no-cache-dir /wheels/*.whl \
 && rm -rf /wheels
# `posenc serve` starts it for the binary protocol (it looks for posenc-server on PATH).
COPY --from=builder /src/native/build/posenc-server /usr/local/bin/posenc-server

# Read-only root filesystem friendly: the only writes are the metrics files (to /tmp: a tmpfs or an
# emptyDir) and the tables (to POSENC_SHM_DIR); numba's JIT cache (/tmp too) only where the wheel's native
# core did not build, since the kernels run in libposenc through its CPython binding. Bind 0.0.0.0 so published ports reach the server;
# a mounted TOML (`serve --config`) and POSENC_* env vars configure the rest.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NUMBA_CACHE_DIR=/tmp/numba-cache \
    POSENC_HOST=0.0.0.0 \
    POSENC_SHM_DIR=/dev/shm

USER 10001:10001
EXPOSE 8000 8001

# Healthy = ready: tables published and kernels warm. urlopen raises on anything but 2xx.
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('POSENC_PORT', '8000') + '/readyz', timeout=2)"]

ENTRYPOINT ["posenc"]
CMD ["serve"]
