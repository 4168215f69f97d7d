"""schemathesis hooks (schemathesis.toml loads them): the valid requests a JSON Schema cannot describe.

Runs in schemathesis' own venv (no numpy, no posenc): the fields and sources are read from the
OpenAPI document the run tests; what is here is only the two rules it cannot state.

* A field goes in the query or in a JSON body, not both (calls.read_call: 422, a null in the body
  too), and the body's `oneOf` (exactly one source: table, spec or hf_config) holds for the fields
  of both together.
  OpenAPI lists a route's query parameters and its body's schema separately and cannot relate
  them, so a valid request's query keeps only the fields its JSON body does not give.
* A binary body (application/octet-stream: raw little-endian values; application/x-npy) is
  `format: binary` in the schema, which cannot say "whole int64 values" or "a .npy file": a
  valid request's body is made one, of small positions (every table, scaling and limit admits
  0..63), in the `positions_dtype` its query names.

Only positive cases (requests valid by the schema) are changed: negative ones keep their faults.
"""

from __future__ import annotations

import struct

import schemathesis

JSON = "application/json"
RAW = "application/octet-stream"
NPY = "application/x-npy"
#: How many positions a generated binary body holds, at most.
MAX_BINARY_POSITIONS = 16


def _json_body_schema(case) -> dict:
    """The component schema of the operation's JSON body ({} when it has none or none by reference)."""
    document = case.operation.schema.raw_schema
    operation = document["paths"][case.operation.path][case.operation.method.lower()]
    reference = operation.get("requestBody", {}).get("content", {}).get(JSON, {}).get("schema", {}).get("$ref", "")
    name = reference.rpartition("/")[2]
    return document.get("components", {}).get("schemas", {}).get(name, {})


def _one_of_fields(schema: dict) -> set[str]:
    """The fields the body's `oneOf` constrains (its sources and the fields tied to them)."""
    return {name for branch in schema.get("oneOf", []) for name in branch.get("properties", {})}


def _positions(seed: bytes, dtype: str) -> bytes:
    values = [byte % 64 for byte in seed[:MAX_BINARY_POSITIONS]] or [0]
    return struct.pack(f"<{len(values)}{'d' if dtype == 'float64' else 'q'}", *values)


def _npy(seed: bytes) -> bytes:
    """A version-1.0 .npy file of int64 positions (the header padded so the data is 64-byte aligned)."""
    values = [byte % 64 for byte in seed[:MAX_BINARY_POSITIONS]] or [0]
    header = "{'descr': '<i8', 'fortran_order': False, 'shape': (%d,), }" % len(values)
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin-1") + \
        struct.pack(f"<{len(values)}q", *values)


def _as_bytes(body) -> bytes:
    return body.encode("utf-8", "surrogatepass") if isinstance(body, str) else bytes(body)


def _make_valid(case) -> None:
    """A positive case made the valid request it stands for (see the module's docstring)."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return
    if case.media_type == JSON and isinstance(case.body, dict) and case.query:
        given = set(case.body) | _one_of_fields(_json_body_schema(case))  # a null there is given too (422)
        case.query = {name: value for name, value in case.query.items() if name not in given}
    elif case.media_type in (RAW, NPY) and isinstance(case.body, (bytes, bytearray, str)):
        seed = _as_bytes(case.body)
        dtype = (case.query or {}).get("positions_dtype", "int64")
        case.body = _npy(seed) if case.media_type == NPY else _positions(seed, dtype)


@schemathesis.hook
def map_case(context, case):
    """Generated cases (the coverage, fuzzing and stateful phases)."""
    _make_valid(case)
    return case


@schemathesis.hook
def before_add_examples(context, examples):
    """The examples phase's cases (the schema's examples and defaults, combined)."""
    for case in examples:
        _make_valid(case)
