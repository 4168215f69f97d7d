"""POST /v1/audit and the /explore routes in-process: every body form, the figures for tables,
specs and configs and of `posenc lab` results files, and a 4xx naming the field for each kind of bad input."""

from __future__ import annotations

import contextlib
import copy
import io
import json
from pathlib import Path

import numpy as np
import posenc
import pytest
from audit_recipes import bf16_positions, config, exact
from fastapi.testclient import TestClient
from gguf_converter import write as write_gguf
from posenc.config import ServiceConfig
from posenc.http import create_app
from posenc.lab import results as lab_results
from posenc.plots import render_lab
from posenc.plots.sources import spec_from_dict
from safetensors.numpy import save
from shm_support import published_config

N = 2048
LLAMA = config("llama-3.1-8b", max_position_embeddings=N)
SPEC = posenc.RopeSpec.from_hf_config(LLAMA)
ROPE_TABLE = {"name": "llama", "encoding": {"kind": "rope", **SPEC.to_dict()}, "start": 0, "stop": 1024}
ALIBI_TABLE = {"name": "alibi8", "encoding": {"kind": "alibi", "n_heads": 8}, "start": 0, "stop": 64}
BODY_LIMIT = 4 << 20


def service_config(root: str) -> ServiceConfig:
    return ServiceConfig.from_dict({"server": {"shm_dir": root, "body_timeout_s": 2.0},
                                    "limits": {"max_body_bytes": BODY_LIMIT},
                                    "tables": [ROPE_TABLE, ALIBI_TABLE]})


@pytest.fixture(scope="module")
def client():
    with published_config("posenc-audit-test-", service_config) as (cfg, _), TestClient(create_app(cfg)) as c:
        yield c


def npy(arr) -> bytes:
    out = io.BytesIO()
    np.save(out, arr)
    return out.getvalue()


def stack(arrays: dict) -> np.ndarray:
    return np.stack([arrays["cos"], arrays["sin"]])


def error_of(response, status: int, field_prefix: str | None):
    assert response.status_code == status, response.text
    err = response.json()["error"]
    assert set(err) == {"code", "message", "field", "request_id"}
    if field_prefix is not None:
        assert (err["field"] or "").startswith(field_prefix), err
    return err


def test_npy_body_with_config_in_query(client):
    body = npy(stack(exact(SPEC, np.arange(N))))
    r = client.post("/v1/audit", content=body, params={"config": json.dumps(LLAMA)},
                    headers={"content-type": "application/x-npy"})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "correct" and r.json()["expected"]["spec"]["base"] == 500000.0


def test_safetensors_body_broken_cache(client):
    body = save(bf16_positions(SPEC, N))
    r = client.post("/v1/audit", content=body, headers={"content-type": "application/octet-stream"})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["diagnosis"]["cause"] == "bf16_positions" and doc["diagnosis"]["fix"]


def test_multipart_file_and_config(client):
    files = {"file": ("cache.npy", npy(stack(exact(SPEC, np.arange(1, N + 1)))), "application/octet-stream")}
    r = client.post("/v1/audit", files=files, data={"config": json.dumps(LLAMA), "start": "0"})
    assert r.status_code == 200, r.text
    assert r.json()["diagnosis"]["cause"] == "position_offset" and r.json()["cache"]["position_offset"] == 1


def test_multipart_cos_and_sin_parts_and_config_file(client):
    arrays = exact(SPEC, np.arange(N))
    files = {"cos": ("cos.npy", npy(arrays["cos"])), "sin": ("sin.npy", npy(arrays["sin"])),
             "config": ("config.json", json.dumps(LLAMA).encode())}
    r = client.post("/v1/audit", files=files)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "correct"


@pytest.mark.parametrize("kwargs, status, field", [
    ({"content": b"garbage bytes", "headers": {"content-type": "application/octet-stream"}}, 422, "file"),
    ({"content": b"{}", "headers": {"content-type": "application/json"}}, 415, "content-type"),
    ({"files": {"other": ("x.npy", b"1")}}, 422, "file"),
    ({"files": {"file": ("x.npy", npy(np.ones((64, 8), np.int32)))}}, 422, "file"),
    ({"files": {"file": ("x.npy", b"\x93NUMPY garbage")}}, 422, "file"),
    ({"files": {"file": ("c.npy", npy(stack(exact(SPEC, np.arange(64)))))}, "data": {"config": "{nope"}}, 422,
     "config"),
    ({"files": {"file": ("c.npy", npy(stack(exact(SPEC, np.arange(64)))))}, "data": {"start": "-3"}}, 422, "start"),
    ({"files": {"file": ("c.npy", npy(stack(exact(SPEC, np.arange(64)))))},
      "data": {"config": json.dumps(LLAMA), "layer_type": "nope"}}, 422, "layer_type"),
])
def test_bad_audit_requests(client, kwargs, status, field):
    error_of(client.post("/v1/audit", **kwargs), status, field)


def small_config(root: str) -> ServiceConfig:
    """An audit body limit of 10 MiB and a budget of 12 MiB: a multipart body and its parsed file do not fit."""
    return ServiceConfig.from_dict({"server": {"shm_dir": root, "body_timeout_s": 2.0},
                                    "limits": {"max_body_bytes": 1 << 20, "max_output_bytes": 1 << 20,
                                               "max_audit_body_bytes": 10 << 20, "max_buffered_bytes": 12 << 20},
                                    "tables": []})


@contextlib.contextmanager
def small_client():
    """Started after the test's arrays are built: while it runs, the library's output cap is its 1 MiB."""
    with published_config("posenc-audit-small-", small_config) as (cfg, _), TestClient(create_app(cfg)) as c:
        yield c


def test_audit_body_over_its_limit_is_413():
    big = npy(np.zeros((2, (10 << 20) // 8, 1), np.float32))
    with small_client() as c:
        error_of(c.post("/v1/audit", content=big, headers={"content-type": "application/x-npy"}), 413, "body")


def test_other_routes_keep_the_general_limit(client):
    body = b"0" * (BODY_LIMIT + 1)
    error_of(client.post("/explore/figures/spectrum", content=body, headers={"content-type": "application/json"}),
             413, "body")


def test_parsed_file_is_charged_to_the_budget():
    cache = npy(stack(exact(SPEC, np.arange(8192))))  # 8 MiB of body, 8 MiB more once parsed: over 12 MiB
    with small_client() as c:
        error_of(c.post("/v1/audit", files={"file": ("c.npy", cache)}), 503, None)


@pytest.mark.parametrize("rows", [8192, 131072])  # the README's worked example; the documented limit
def test_long_float32_pairs_are_audited(client, rows):
    """Over the general 4 MiB body limit of this service, under the audit's own (136 MiB by default)."""
    spec = posenc.RopeSpec.from_hf_config(config("llama-3.1-8b"))
    body = npy(stack(exact(spec, np.arange(rows))))
    assert len(body) > BODY_LIMIT
    r = client.post("/v1/audit", content=body, params={"config": json.dumps(config("llama-3.1-8b"))},
                    headers={"content-type": "application/x-npy"})
    assert r.status_code == 200, r.text[:300]
    doc = r.json()
    assert doc["rows_checked"] == rows and doc["status"] in ("correct", "warning")  # truncated below 131072
    if rows == 8192:  # the explorer's upload: multipart
        r = client.post("/v1/audit", files={"file": ("c.npy", body)})
        assert r.status_code == 200 and r.json()["status"] == "correct", r.text[:300]


PHI3 = config("phi-3-mini-128k")


def gguf_bytes(tmp_path, cfg, **kwargs) -> bytes:
    return Path(write_gguf(tmp_path / "m.gguf", cfg, **kwargs)).read_bytes()


def test_gguf_raw_body(client, tmp_path):
    """A GGUF model as the body (octet-stream), judged as llama.cpp reads it: Phi-3-128k as the converter
    writes it (LongRoPE factor tensors, no rope.scaling.type) is correct."""
    r = client.post("/v1/audit", content=gguf_bytes(tmp_path, PHI3), params={"config": json.dumps(PHI3)},
                    headers={"content-type": "application/octet-stream"})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["status"] == "correct" and doc["gguf"]["architecture"] == "phi3"
    assert doc["gguf"]["rope.scaling.type"] == "linear" and "phi3.rope.scaling.type" in doc["gguf"]["defaults"]


def test_gguf_multipart(client, tmp_path):
    qwen = config("qwen2-7b-yarn")
    files = {"file": ("model.gguf", gguf_bytes(tmp_path, qwen, arch="llama"), "application/octet-stream"),
             "config": ("config.json", json.dumps(qwen).encode())}
    r = client.post("/v1/audit", files=files)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "warning" and r.json()["diagnosis"]["cause"] == "layout_unconfirmed"
    bad = {"file": ("model.gguf", gguf_bytes(tmp_path, qwen, **{"rope.scaling.factor": 2.0}))}
    r = client.post("/v1/audit", files=bad, data={"config": json.dumps(qwen)})
    assert r.status_code == 200 and r.json()["diagnosis"]["cause"] == "wrong_scaling", r.text


def test_head_of_a_big_gguf(client, tmp_path):
    """Over the general 4 MiB limit as a whole; its first 64 KiB hold the metadata and the RoPE tensors the
    converter writes first. A file whose rope_freqs comes after the weights (llama-quantize's order) needs more:
    a 422 naming the tensor and the bytes that hold it."""
    llama = config("llama-3.1-8b")
    whole = gguf_bytes(tmp_path, llama, pad=8 << 20)
    assert len(whole) > BODY_LIMIT
    for body in (whole, whole[:1 << 16]):
        r = client.post("/v1/audit", content=body, params={"config": json.dumps(llama)},
                        headers={"content-type": "application/octet-stream"})
        assert r.status_code == 200 and r.json()["status"] == "correct", r.text[:300]
    late = gguf_bytes(tmp_path, llama, pad=8 << 20, rope_last=True)[:1 << 16]
    err = error_of(client.post("/v1/audit", files={"file": ("m.gguf", late)}), 422, "rope_freqs.weight")
    assert "send at least the first" in err["message"]


@pytest.mark.parametrize("kind", ["raw", "multipart"])
def test_gguf_over_the_audit_limit_is_413(tmp_path, kind):
    big = gguf_bytes(tmp_path, PHI3, pad=10 << 20)
    with small_client() as c:
        r = c.post("/v1/audit", content=big, headers={"content-type": "application/octet-stream"}) if kind == "raw" \
            else c.post("/v1/audit", files={"file": ("m.gguf", big)})
        error_of(r, 413, "body")


@pytest.mark.parametrize("changes, params, field", [
    ({}, {"start": "5"}, "start"),  # a GGUF file has no start row
    ({"rope.scaling.type": "ntk"}, {}, "phi3.rope.scaling.type"),  # a type llama.cpp refuses
    ({"rope_factors_long": np.ones(3)}, {}, "rope_factors_long"),  # the wrong length for rope.dimension_count
])
def test_bad_gguf_requests(client, tmp_path, changes, params, field):
    body = gguf_bytes(tmp_path, PHI3, **changes)
    error_of(client.post("/v1/audit", content=body, params=params, headers={"content-type": "application/octet-stream"}),
             422, field)
    error_of(client.post("/v1/audit", content=b"GGUF\x03\x00\x00\x00garbage",
                         headers={"content-type": "application/octet-stream"}), 422, "file")


def test_page_and_assets_are_local(client):
    r = client.get("/explore")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in r.headers["content-security-policy"]
    html = r.text
    for ref in ("/explore/assets/explore.js", "/explore/assets/explore.css"):
        assert ref in html
        assert client.get(ref).status_code == 200
    assert "http://" not in html and "https://" not in html
    error_of(client.get("/explore/assets/../../etc/passwd"), 404, None)
    error_of(client.get("/explore/assets/secret.py"), 404, "name")


@pytest.mark.parametrize("figure", ["heatmap", "spectrum", "decay", "alibi", "precision"])
@pytest.mark.parametrize("source", [{"table": "llama"}, {"config": config("qwen2-7b-yarn")},
                                    {"config": config("phi-3-mini-128k")}, {"table": "alibi8"},
                                    {"config": config("bloom-560m")}])
def test_every_figure_for_tables_and_configs(client, figure, source):
    """Every view draws the chosen source, as SVG or as the page's Vega-Lite spec; a source without the
    encodings a view draws is a 422 naming the source (never a default drawn in its place)."""
    kinds = {spec.KIND for spec in _encodings(source).values()}
    wanted = {"heatmap": {"rope", "sinusoidal"}, "alibi": {"alibi"}}.get(figure, {"rope"})
    for fmt in ("svg", "vega"):
        r = client.post(f"/explore/figures/{figure}", json={"source": source, "params": {}, "format": fmt})
        if not kinds & wanted:
            assert "has no" in error_of(r, 422, "source")["message"]
            continue
        assert r.status_code == 200, r.text
        doc = r.json()
        if fmt == "svg":
            assert doc["svg"].lstrip().startswith("<?xml") and "<svg" in doc["svg"] and "<script" not in doc["svg"]
        else:
            assert doc["vega"]["hconcat"] and doc["data"]["panels"]
        assert isinstance(doc["summary"], dict)


def _encodings(source: dict) -> dict:
    """layer type -> spec of a test source (tables as this module's service serves them)."""
    if "table" in source:
        table = {"llama": ROPE_TABLE, "alibi8": ALIBI_TABLE}[source["table"]]
        return {table["name"]: spec_from_dict(table["encoding"], "spec")}
    return {name: entry.spec for name, entry in posenc.from_hf_config(source["config"]).encodings.items()}


def test_spectrum_summary_counts_full_turns(client):
    r = client.post("/explore/figures/spectrum", json={"source": {"table": "llama"}})
    panel = r.json()["summary"]["panels"][0]
    assert panel["rope_type"] == "llama3" and panel["trained_context"] == 8192
    inv = posenc.rope_inv_freq(SPEC)[0]
    extended = max(SPEC.max_position_embeddings, 8 * 8192)  # factor x trained: longer than this config's 2048
    assert panel["extended_context"] == extended
    assert panel["full_turns_after"] == int(np.sum(2 * np.pi / inv <= extended))


def test_audit_figure(client):
    report = client.post("/v1/audit", content=npy(stack(bf16_positions(SPEC, N))),
                         headers={"content-type": "application/x-npy"}).json()
    r = client.post("/explore/figures/audit", json={"report": report})
    assert r.status_code == 200 and "<svg" in r.json()["svg"]
    error_of(client.post("/explore/figures/audit", json={"report": {"no": "profile"}}), 422, "report")


@pytest.mark.parametrize("path, body, status, field", [
    ("/explore/figures/nope", {}, 404, "figure"),
    ("/explore/figures/spectrum", {"source": {"table": "missing"}}, 404, None),
    ("/explore/figures/spectrum", {"source": {"spec": {"kind": "rope", "head_dim": -4}}}, 422, "spec.head_dim"),
    ("/explore/figures/spectrum", {"source": {"specs": "x"}}, 422, "specs"),
    ("/explore/figures/spectrum", {"source": {"config": {"model_type": "llama", "rope_theta": -5}}}, 422,
     "config.rope_theta"),
    ("/explore/figures/alibi", {"params": {"context": 1}}, 422, "context"),
    ("/explore/figures/heatmap", {"params": {"positions": 10 ** 9}}, 422, "positions"),
    ("/explore/figures/heatmap", {"bogus": 1}, 422, "bogus"),
])
def test_bad_figure_requests(client, path, body, status, field):
    error_of(client.post(path, json=body), status, field)


# --- the Lab view's figure ------------------------------------------------------------------------
def lm_rope_and_alibi() -> dict:
    """The documented run cut to the lm task's rope and alibi models: a results file that is not the default."""
    doc = copy.deepcopy(lab_results.documented())
    doc["configuration"]["tasks"] = {"lm": doc["configuration"]["tasks"]["lm"]}
    kept = ("rope", "alibi")
    doc["results"] = [{**run, "evaluations": {s: p for s, p in run["evaluations"].items() if s in kept}}
                      for run in doc["results"] if run["task"] == "lm" and run["trained_as"] in kept]
    return doc


def test_lab_figure_of_the_documented_run(client):
    """Without results, the documented run shipped with posenc; GET /explore/lab/documented is that file."""
    documented = client.get("/explore/lab/documented")
    assert documented.status_code == 200 and documented.headers["content-type"] == "application/json"
    assert documented.json() == lab_results.documented()
    r = client.post("/explore/figures/lab", json={})
    assert r.status_code == 200 and "<svg" in r.json()["svg"]
    assert r.json()["summary"]["text"] == "posenc lab, budget documented, seed 0: lm, copy"
    vega = client.post("/explore/figures/lab", json={"format": "vega"}).json()
    assert vega["data"] == render_lab(lab_results.documented(), "vega")[0]["data"]
    assert [p["title"] for p in vega["data"]["panels"]] == [
        "lm: perplexity vs length", "lm: attention entropy vs length", "copy: token accuracy vs length",
        "copy: attention entropy vs length"]
    # The whole file, posted back, fits the body limit (~90 KB; the default limit is 8 MiB) and draws the same.
    again = client.post("/explore/figures/lab", json={"results": documented.json(), "format": "vega"})
    assert len(documented.content) < BODY_LIMIT // 16 and again.json() == vega


def test_lab_figure_of_a_posted_results_file(client):
    doc = lm_rope_and_alibi()
    vega = client.post("/explore/figures/lab", json={"results": doc, "format": "vega"})
    assert vega.status_code == 200, vega.text
    panels = vega.json()["data"]["panels"]
    assert [p["title"] for p in panels] == ["lm: perplexity vs length", "lm: attention entropy vs length"]
    perplexity = {s["name"]: s["y"] for s in panels[0]["series"]}
    assert set(perplexity) == {"rope", "alibi", "source (floor)"}
    assert perplexity["alibi"] == [p["perplexity"] for task, scheme, points in lab_results.rows(doc)
                                   if scheme == "alibi" for p in points]
    csv = client.post("/explore/figures/lab", json={"results": doc, "format": "csv"})
    assert csv.json()["csv"] == render_lab(doc, "csv")[0].decode()
    assert csv.json()["csv"].startswith("panel,series,x,y")


@pytest.mark.parametrize("body, field, says", [
    ({"results": {"format": "something else"}}, "results", "is not a posenc lab results file"),
    ({"results": {"report": {"status": "correct"}}}, "results", "is not a posenc lab results file"),
    ({"results": {"format": lab_results.FORMAT, "results": []}}, "results", "is not a complete"),
    ({"results": [1, 2]}, "results", None),
    ({"results": {}, "format": "png"}, "format", None),
    ({"report": {}}, "report", None),
])
def test_lab_figure_of_what_is_not_a_results_file(client, body, field, says):
    err = error_of(client.post("/explore/figures/lab", json=body), 422, field)
    assert err["field"] == field and (says is None or says in err["message"]), err
