"""Learned absolute position tables (GPT-2 wpe, OPT's offset 2): read from tiny checkpoints the
tests write (safetensors, .npy), published in shared memory, and served bit for bit by the CLI,
HTTP (PUT upload, rows routes incl. the fast path) and the binary server's ENCODE_TABLE."""

import hashlib
import io
import json
import shutil
import tempfile

import ml_dtypes
import numpy as np
import pytest
from binary_support import running_server
from fastapi.testclient import TestClient
from posenc import checkpoint
from posenc.cli import main
from posenc.client import Client
from posenc.config import ServiceConfig
from posenc.encodings import AlibiSpec, LearnedSpec, RopeSpec
from posenc.errors import PosencError
from posenc.http import create_app
from posenc.models import LayerPositions, ModelPositions, from_hf_config
from posenc.models.tables import context_length, layer_tables
from posenc.shm import TableStore, attach
from posenc.tables import TableSpec
from safetensors.numpy import save, save_file

RNG = np.random.default_rng(10)
NPY, SAFETENSORS = "application/x-npy", "application/x-safetensors"
KEY = {"Authorization": "Bearer secret"}
#: OPT-style: 2 padding rows, then positions 0..29.
OPT_WPE = RNG.standard_normal((32, 8)).astype(np.float32)


def npy_bytes(arr) -> bytes:
    out = io.BytesIO()
    np.save(out, arr, allow_pickle=True)
    return out.getvalue()


def npy_header(shape, descr="<f4") -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": descr, "fortran_order": False, "shape": shape})
    return out.getvalue()


@pytest.fixture
def checkpoint_file(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file({"model.decoder.embed_positions.weight": OPT_WPE,
               "model.decoder.embed_tokens.weight": RNG.standard_normal((50, 8)).astype(np.float32)}, str(path))
    return path


# --- library: reading and checking ---------------------------------------------------------------
def test_a_safetensors_tensor_becomes_a_table_with_its_offset_and_sha256(checkpoint_file):
    name, values = checkpoint.read_file(checkpoint_file, "embed_positions.weight")  # a dotted suffix matches
    assert name == "model.decoder.embed_positions.weight"
    table = checkpoint.learned_table(values, tensor=name, offset=2)
    enc = table.encoding
    assert (enc.num_positions, enc.dim, enc.offset, enc.tensor) == (30, 8, 2, name)
    assert enc.sha256 == hashlib.sha256(OPT_WPE.tobytes()).hexdigest()
    assert (table.start, table.stop, table.dtype, table.shape) == (0, 30, "float32", (30, 8))
    rows = np.empty(table.shape, np.float32)
    table.fill(rows)
    np.testing.assert_array_equal(rows, OPT_WPE[2:])  # position p is row p + 2


def test_the_family_spec_fixes_shape_and_offset_and_checks_sha256(checkpoint_file):
    _, values = checkpoint.read_file(checkpoint_file, "model.decoder.embed_positions.weight")
    spec = LearnedSpec(30, dim=8, tensor="embed_positions.weight", offset=2)
    table = checkpoint.learned_table(values, spec, start=5, stop=10)
    assert (table.encoding.offset, table.encoding.tensor, table.shape) == (2, "embed_positions.weight", (5, 8))
    with pytest.raises(PosencError, match=r"^tensor: has shape \(32, 8\); the model's spec expects \(33, 8\)"):
        checkpoint.learned_table(values, LearnedSpec(31, dim=8, offset=2))
    with pytest.raises(PosencError, match="^sha256: the tensor's values hash to"):
        checkpoint.learned_table(values, LearnedSpec(30, dim=8, offset=2, sha256="0" * 64))
    with pytest.raises(PosencError, match=r"^stop: a learned table holds positions 0\.\.29"):
        checkpoint.learned_table(values, spec, stop=31)


def test_bfloat16_and_float64_checkpoints_are_stored_exactly(tmp_path):
    wide = RNG.standard_normal((6, 4))
    narrow = wide.astype(ml_dtypes.bfloat16)
    path = tmp_path / "bf16.safetensors"
    path.write_bytes(_bf16_safetensors("wpe", narrow))
    _, values = checkpoint.read_file(path)
    table = checkpoint.learned_table(values)
    rows = np.empty(table.shape, table.np_dtype)
    table.fill(rows)
    assert table.dtype == "float32" and np.array_equal(rows, narrow.astype(np.float32))
    assert table.encoding.sha256 == hashlib.sha256(narrow.tobytes()).hexdigest()
    np.save(tmp_path / "f64.npy", wide.astype(">f8"))  # big-endian: read as its values, hashed little-endian
    table = checkpoint.learned_table(checkpoint.read_file(tmp_path / "f64.npy")[1])
    assert table.dtype == "float64" and table.encoding.tensor is None
    assert table.encoding.sha256 == hashlib.sha256(wide.astype("<f8").tobytes()).hexdigest()
    np.testing.assert_array_equal(table.source, wide)


def _bf16_safetensors(name, arr) -> bytes:
    """safetensors.numpy cannot save bfloat16: write the (simple) format by hand."""
    header = json.dumps({name: {"dtype": "BF16", "shape": list(arr.shape), "data_offsets": [0, arr.nbytes]}})
    header = header.encode().ljust(-(-len(header) // 8) * 8)
    return len(header).to_bytes(8, "little") + header + arr.tobytes()


@pytest.mark.parametrize("tensors, tensor, message", [
    ({"a": np.zeros((4, 2), np.float32), "pos": np.zeros((4, 2), np.float32)}, None,
     r"^tensor: the file holds 2 tensors; name one, e\.g\. one of \['pos', 'a'\]"),
    ({"a": np.zeros((4, 2), np.float32)}, "wpe.weight", r"^tensor: no tensor 'wpe\.weight' in the file"),
    ({"x.wpe": np.zeros((4, 2), np.float32), "y.wpe": np.zeros((4, 2), np.float32)}, "wpe",
     "^tensor: 'wpe' matches several tensors"),
    ({"wpe": np.zeros((4, 2), np.int64)}, None, "^tensor: 'wpe' is I64"),
    ({"wpe": np.zeros(4, np.float32)}, None, r"^tensor: must be a non-empty 2-D table .* shape \(4,\)"),
    ({"wpe": np.array([[0.0, np.nan]], np.float32)}, None, "^tensor: holds NaN or infinite values"),
])
def test_bad_checkpoints_name_the_field(tmp_path, tensors, tensor, message):
    path = tmp_path / "bad.safetensors"
    save_file(tensors, str(path))
    with pytest.raises(PosencError, match=message):
        checkpoint.read_file(path, tensor)
    with pytest.raises(PosencError, match=message):
        checkpoint.read_safetensors(path.read_bytes(), tensor)


def test_unreadable_checkpoint_files_are_refused(tmp_path):
    (tmp_path / "junk.safetensors").write_bytes(b"\xff" * 40)
    with pytest.raises(PosencError, match="^checkpoint: .*junk.safetensors is not a valid .safetensors file"):
        checkpoint.read_file(tmp_path / "junk.safetensors")
    with pytest.raises(PosencError, match="^checkpoint: .* must be a .safetensors or .npy file"):
        checkpoint.read_file(tmp_path / "model.bin")
    np.save(tmp_path / "obj.npy", np.array([[1, "a"]], dtype=object), allow_pickle=True)
    with pytest.raises(PosencError, match="^checkpoint: .*obj.npy is not a valid .npy file"):
        checkpoint.read_file(tmp_path / "obj.npy")


def test_a_published_learned_segment_reads_back_without_its_source(tmp_path):
    table = checkpoint.learned_table(OPT_WPE, offset=2)
    with TableStore(tmp_path) as store:
        store.publish("opt-wpe", table)
        with attach("opt-wpe", root=tmp_path, verify=True) as tbl:
            assert tbl.spec == table and tbl.spec.source is None
            np.testing.assert_array_equal(tbl.lookup([0, 29, 7]), OPT_WPE[[2, 31, 9]])
            with pytest.raises(PosencError, match="^source: a learned table is published from its checkpoint"):
                store.publish("copy", tbl.spec)


# --- models -> tables ----------------------------------------------------------------------------
def test_layer_tables_tabulates_what_it_can_and_says_why_not_the_rest():
    rope = RopeSpec(64, max_position_embeddings=128)
    model = ModelPositions("demo", "test", {
        "full_attention": LayerPositions("full_attention", rope, (0, 2)),
        "alibi": LayerPositions("alibi", AlibiSpec(4), (1,), apply="bias"),
        "wpe": LayerPositions("wpe", LearnedSpec(16, dim=8, tensor="wpe.weight"), (), apply="add")})
    tables, skipped = layer_tables(model, context=256, dtype="float64")
    assert tables == {"full_attention": TableSpec(rope, 0, 128, "float64"),
                      "alibi": TableSpec(AlibiSpec(4), 0, 256, "float64")}
    assert list(skipped) == ["wpe"] and "checkpoint" in skipped["wpe"]
    tables, skipped = layer_tables(model, context=None)
    assert list(tables) == ["full_attention"] and "no context length" in skipped["alibi"]
    assert context_length({"text_config": {"max_position_embeddings": 77}, "n_positions": 5}) == 77


# --- CLI -----------------------------------------------------------------------------------------
def test_cli_builds_a_table_from_a_safetensors_checkpoint(checkpoint_file, tmp_path, capsys):
    root = tmp_path / "shm"
    assert main(["table", "build", str(checkpoint_file), "--tensor", "embed_positions.weight", "--offset", "2",
                 "--name", "opt-wpe", "--shm-dir", str(root)]) == 0
    assert capsys.readouterr().out.startswith("published opt-wpe generation 1: 30x8 float32")
    with attach("opt-wpe", root=root, verify=True) as tbl:
        np.testing.assert_array_equal(tbl.array, OPT_WPE[2:])
    assert main(["table", "ls", "--shm-dir", str(root)]) == 0
    assert "learned dim=8 model.decoder.embed_positions.weight offset=2 sha256=" in capsys.readouterr().out


def test_cli_builds_a_table_from_a_npy_file(tmp_path, capsys):
    np.save(tmp_path / "wpe.npy", OPT_WPE)
    assert main(["table", "build", str(tmp_path / "wpe.npy"), "--positions", "3:9", "--dtype", "float64",
                 "--shm-dir", str(tmp_path / "shm")]) == 0
    name = capsys.readouterr().out.split()[1]
    assert name == f"wpe-3to9-f64-{checkpoint.values_sha256(OPT_WPE)[:6]}"  # the file, positions, dtype, the values' digest
    with attach(name, root=tmp_path / "shm") as tbl:
        assert (tbl.start, tbl.stop, tbl.spec.dtype) == (3, 9, "float64")
        np.testing.assert_array_equal(tbl.array, OPT_WPE[3:9].astype(np.float64))


@pytest.mark.parametrize("args, message", [
    (["--tensor", "nope"], "tensor: no tensor 'nope' in the file"),
    (["--tensor", "embed_positions.weight", "--offset", "40"], "offset: must be an integer in [0, 32)"),
    (["--tensor", "embed_positions.weight", "--seq-len", "9"], "seq-len: only applies to rope tables"),
    ([], "tensor: the file holds 2 tensors"),
])
def test_cli_checkpoint_errors_name_the_field(checkpoint_file, tmp_path, capsys, args, message):
    assert main(["table", "build", str(checkpoint_file), *args, "--shm-dir", str(tmp_path / "shm")]) == 2
    assert message in capsys.readouterr().err


def test_cli_config_build_with_a_layer_type_and_checkpoint_options_are_checked(tmp_path, capsys):
    spec = '{"kind": "sinusoidal", "dim": 8}'
    assert main(["table", "build", spec, "--positions", "0:4", "--tensor", "wpe", "--shm-dir", str(tmp_path)]) == 2
    assert "tensor: only applies to a .safetensors / .npy checkpoint" in capsys.readouterr().err
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2,
                                  "max_position_embeddings": 16}))
    assert main(["table", "build", str(config), "--layer-type", "nope", "--shm-dir", str(tmp_path)]) == 2
    assert "layer-type: unknown layer type 'nope'" in capsys.readouterr().err
    assert main(["table", "build", str(config), "--name", "tiny", "--shm-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("published tiny generation 1: 16x32 float32")


GPT2 = {"model_type": "gpt2", "n_embd": 8, "n_head": 2, "n_layer": 2, "n_positions": 32}
OPT = {"model_type": "opt", "hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 2,
       "max_position_embeddings": 30}


@pytest.mark.parametrize("config, offset", [(GPT2, 0), (OPT, 2)])
def test_cli_takes_tensor_name_offset_and_shape_from_the_config(checkpoint_file, tmp_path, capsys, config, offset):
    """GPT-2's reader names transformer.wpe.weight, OPT's model.decoder.embed_positions.weight with offset 2."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    ckpt = tmp_path / "ckpt.safetensors"
    tensor = posenc_learned_spec(config).tensor
    save_file({tensor.removeprefix("transformer."): OPT_WPE, "lm_head.weight": OPT_WPE}, str(ckpt))
    assert main(["table", "build", str(ckpt), "--model-config", str(path), "--name", "wpe",
                 "--shm-dir", str(tmp_path / "shm")]) == 0, capsys.readouterr().err
    with attach("wpe", root=tmp_path / "shm") as tbl:
        assert (tbl.spec.encoding.offset, tbl.spec.encoding.num_positions) == (offset, 32 - offset)
        np.testing.assert_array_equal(tbl.array, OPT_WPE[offset:])
    small = dict(config, **{"n_positions" if "n_positions" in config else "max_position_embeddings": 20})
    path.write_text(json.dumps(small))
    assert main(["table", "build", str(ckpt), "--model-config", str(path), "--shm-dir", str(tmp_path / "shm")]) == 2
    assert "tensor: has shape (32, 8); the model's spec expects" in capsys.readouterr().err


def posenc_learned_spec(config) -> LearnedSpec:
    (entry,) = from_hf_config(config).of_kind("learned").values()
    return entry.spec


def test_cli_config_without_a_computable_encoding_says_why(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GPT2))
    assert main(["table", "build", str(path), "--shm-dir", str(tmp_path / "shm")]) == 2
    err = capsys.readouterr().err
    assert "spec: this gpt2 model has no encoding posenc can tabulate (default: a learned table's values" in err
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2}))
    assert main(["table", "build", str(ckpt_npy(tmp_path)), "--model-config", str(path), "--shm-dir", str(tmp_path)]) == 2
    assert "config: this llama model has no learned position table" in capsys.readouterr().err


def ckpt_npy(tmp_path):
    np.save(tmp_path / "wpe.npy", OPT_WPE)
    return tmp_path / "wpe.npy"


# --- HTTP ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def client():
    root = tempfile.mkdtemp(prefix="posenc-learned-", dir="/dev/shm")
    config = ServiceConfig.from_dict({"server": {"shm_dir": root},
                                      "limits": {"max_body_bytes": 1 << 16, "max_output_bytes": 1 << 15},
                                      "api_key": "secret"})
    with TestClient(create_app(config)) as c:
        yield c
    shutil.rmtree(root, ignore_errors=True)


def test_an_uploaded_npy_table_is_served_by_every_rows_route(client):
    r = client.put("/v1/tables/opt-wpe?offset=2", content=npy_bytes(OPT_WPE), headers={**KEY, "content-type": NPY})
    assert r.status_code == 201, r.text
    info = r.json()
    assert info["kind"] == "learned" and info["shape"] == [30, 8]
    assert info["spec"]["encoding"]["sha256"] == hashlib.sha256(OPT_WPE.tobytes()).hexdigest()
    fast = client.get("/v1/tables/opt-wpe/rows/7", headers={"accept": "application/octet-stream"})
    assert np.frombuffer(fast.content, np.float32).tobytes() == OPT_WPE[9].tobytes()
    assert np.array_equal(np.float32(client.get("/v1/tables/opt-wpe/rows/7").json()["data"]), OPT_WPE[9])
    batch = client.post("/v1/tables/opt-wpe/rows", json={"positions": [0, 29, 3]}, headers={"accept": NPY})
    np.testing.assert_array_equal(np.load(io.BytesIO(batch.content)), OPT_WPE[[2, 31, 5]])
    outside = client.get("/v1/tables/opt-wpe/rows/30")  # a row the table does not hold: 404
    assert outside.status_code == 404 and outside.json()["error"]["field"] == "position"
    assert client.get("/v1/tables/opt-wpe/rows/1?dtype=float64").json()["error"]["field"] == "dtype"
    assert client.delete("/v1/tables/opt-wpe", headers=KEY).status_code == 204


def test_an_uploaded_safetensors_table_picks_its_tensor(client):
    body = save({"wpe.weight": OPT_WPE[:10].astype(np.float64), "wte.weight": OPT_WPE})
    sha = hashlib.sha256(OPT_WPE[:10].astype(np.float64).tobytes()).hexdigest()
    r = client.put(f"/v1/tables/gpt2-wpe?tensor=wpe.weight&sha256={sha}&start=2", content=body,
                   headers={**KEY, "content-type": SAFETENSORS})
    assert r.status_code == 201, r.text
    assert r.json()["dtype"] == "float64" and r.json()["spec"]["encoding"]["tensor"] == "wpe.weight"
    rows = client.post("/v1/tables/gpt2-wpe/rows", json={"positions": [2, 9]}, headers={"accept": NPY})
    np.testing.assert_array_equal(np.load(io.BytesIO(rows.content)), OPT_WPE[[2, 9]].astype(np.float64))
    r = client.put("/v1/tables/gpt2-wpe?tensor=wpe.weight&sha256=" + "0" * 64, content=body,
                   headers={**KEY, "content-type": SAFETENSORS})
    assert (r.status_code, r.json()["error"]["field"]) == (422, "sha256")
    client.delete("/v1/tables/gpt2-wpe", headers=KEY)


GOOD = npy_bytes(OPT_WPE)


@pytest.mark.parametrize("body, content_type, query, status, field", [
    (b"\x93NUMPY garbage", NPY, "", 400, "body"),
    (npy_header((-2, -4)) + bytes(32), NPY, "", 400, "body"),
    (npy_header((2 ** 62, 0)), NPY, "", 400, "body"),
    (npy_header((4, 2)) + bytes(8), NPY, "", 400, "body"),
    (npy_bytes(np.array([[1, "a"]], dtype=object)), NPY, "", 400, "body"),
    (npy_bytes(np.zeros((4, 2), np.int32)), NPY, "", 422, "body"),
    (npy_bytes(np.array([[1.0, np.inf]], np.float32)), NPY, "", 422, "body"),
    (npy_bytes(np.zeros(8, np.float32)), NPY, "", 422, "body"),
    (GOOD, NPY, "?tensor=wpe", 422, "tensor"),
    (GOOD, NPY, "?offset=-1", 422, "offset"),
    (GOOD, NPY, "?stop=99", 422, "stop"),
    (GOOD, NPY, "?dtype=float16", 422, "dtype"),
    (GOOD, NPY, "?bogus=1", 422, "bogus"),
    (npy_bytes(np.zeros((1100, 8), np.float32)), NPY, "", 413, "body"),  # 35 KiB table > max_output_bytes
    (npy_bytes(np.zeros((3000, 8), np.float32)), NPY, "", 413, None),  # body > max_body_bytes
    (b"\x10\x00\x00\x00\x00\x00\x00\x00{}", SAFETENSORS, "", 400, "body"),
    (b"\xff" * 16, SAFETENSORS, "", 400, "body"),
    (save({"a": np.zeros((2, 2), np.float32)})[:-4], SAFETENSORS, "", 400, "body"),
    (save({"a": np.zeros((2, 2), np.float32)}), SAFETENSORS, "?tensor=b", 422, "tensor"),
])
def test_hostile_uploads_are_4xx_naming_the_field(client, body, content_type, query, status, field):
    r = client.put(f"/v1/tables/up{query}", content=body, headers={**KEY, "content-type": content_type})
    assert r.status_code == status, r.text
    if field is not None:
        assert r.json()["error"]["field"] == field
    assert client.get("/v1/tables/up").status_code == 404


def test_uploads_need_the_api_key_and_a_json_learned_spec_has_no_values(client):
    assert client.put("/v1/tables/up", content=GOOD, headers={"content-type": NPY}).status_code == 401
    spec = {"encoding": {"kind": "learned", "num_positions": 4, "dim": 2}, "stop": 4}
    r = client.put("/v1/tables/up", json=spec, headers=KEY)
    assert (r.status_code, r.json()["error"]["field"]) == (422, "source")
    assert client.get("/v1/tables/up").status_code == 404
    r = client.put("/v1/tables/up", content=GOOD, headers={**KEY, "content-type": "application/octet-stream"})
    assert r.status_code == 415 and "application/x-safetensors" in r.json()["error"]["message"]


# --- binary protocol -----------------------------------------------------------------------------
def test_the_binary_server_serves_a_learned_table_bit_for_bit(tmp_path):
    with TableStore(tmp_path) as store:
        store.publish("opt-wpe", checkpoint.learned_table(OPT_WPE, offset=2))
        with running_server(tmp_path, threads=1) as server, Client(server.address) as c:
            rows = c.encode("opt-wpe", np.array([0, 29, 11]))
            assert rows.dtype == np.float32 and rows.tobytes() == OPT_WPE[[2, 31, 13]].tobytes()
            assert c.resolve("opt-wpe").width == 8
