"""Fuzz every operation from the service's own OpenAPI schema (schemathesis), against a real server:
no 500s, every status, content type, header and body as documented. Bounded: FUZZ_EXAMPLES per operation."""


import pytest
import schemathesis
from conftest import by_profile
from hypothesis import HealthCheck, settings
from posenc.config import ServiceConfig
from posenc.http import create_app
from serve_support import served
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

FUZZ_EXAMPLES = by_profile(25, 300)
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance]
CONFIG = """
[server]
workers = 1
binary_port = 0
shm_dir = "{shm_dir}"
[limits]
max_positions = 4096
max_output_bytes = 4194304
[[tables]]
name = "sin64"
encoding = {{ kind = "sinusoidal", dim = 64 }}
stop = 4096
"""

schemathesis.serializer.alias("application/x-npy", "application/octet-stream")  # fuzzed bytes as .npy bodies
schemathesis.serializer.alias("application/x-safetensors", "application/octet-stream")  # and as safetensors uploads
schema = schemathesis.openapi.from_dict(create_app(ServiceConfig()).api.openapi())


@pytest.fixture(scope="module")
def server():
    with served(lambda shm_dir: CONFIG.format(shm_dir=shm_dir), env={"POSENC_API_KEY": "fuzz"},
                prefix="posenc-fuzz-") as process:
        yield process


@schema.parametrize()
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_schema(case, server):
    case.call_and_validate(base_url=server.url, checks=CHECKS, headers={"Authorization": "Bearer fuzz"})
