"""`posenc table build|ls|rm|verify` end to end (in-process, through `posenc.cli.main`)."""

import json
import re

import pytest
from conftest import hf_config
from posenc.cli import main
from posenc.shm import attach
from posenc.encodings import RopeSpec
from shm_support import assert_table_rows, poke, table_from

pytest_plugins = ["shm_support"]

SIN = '{"kind": "sinusoidal", "dim": 32}'


def test_build_ls_verify_rm_round_trip(shm_root, capsys):
    assert main(["table", "build", SIN, "--positions=-8:4000", "--name", "sin", "--shm-dir", str(shm_root)]) == 0
    assert "published sin generation 1: 4008x32 float32 (501.0 KiB)" in capsys.readouterr().out
    with attach("sin", root=shm_root) as tbl:
        assert_table_rows(tbl.array, table_from(json.loads(SIN), -8, 4000))

    assert main(["table", "ls", "--shm-dir", str(shm_root)]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["NAME", "SPEC", "SHAPE", "DTYPE", "SIZE", "GENERATION", "STATE", "SERVES"]
    assert row.split() == ["sin", "sinusoidal", "dim=32", "base=10000", "interleaved", "[-8:4000)", "4008x32",
                           "float32", "501.0", "KiB", "1", "READY", "positions", "-8..3999", "of", "any", "sequence"]

    assert main(["table", "verify", "--shm-dir", str(shm_root)]) == 0
    assert capsys.readouterr().out.startswith("ok    sin  generation 1  501.0 KiB  checksum verified in ")

    assert main(["table", "rm", "sin", "--shm-dir", str(shm_root)]) == 0
    assert main(["table", "ls", "--json", "--shm-dir", str(shm_root)]) == 0
    assert capsys.readouterr().out == "removed sin\n"
    assert main(["table", "rm", "sin", "--shm-dir", str(shm_root)]) == 2
    assert "posenc: error: name: no table named 'sin'" in capsys.readouterr().err


def test_build_from_a_hf_config_defaults_to_its_context_length(shm_root, tmp_path, capsys):
    config = hf_config("llama-3.1-8b")
    config["max_position_embeddings"] = 3000  # keep the table small
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["table", "build", str(path), "--name", "llama", "--dtype", "float64", "--shm-dir", str(shm_root)]) == 0
    capsys.readouterr()
    assert main(["table", "ls", "--json", "--shm-dir", str(shm_root)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["name"], info["shape"], info["dtype"], info["state"]) == ("llama", [3000, 128], "float64", "READY")
    assert info["spec"]["encoding"] == RopeSpec.from_hf_config(config).to_dict()
    with attach("llama", root=shm_root) as tbl:
        assert_table_rows(tbl.array, tbl.spec)


def test_build_accepts_a_whole_table_spec_and_shows_progress(shm_root, capsys):
    spec = table_from({"kind": "rope", "head_dim": 64}, 0, 70000).to_dict()  # 5 blocks of 4 MiB
    assert main(["table", "build", json.dumps(spec), "--progress", "always", "--shm-dir", str(shm_root)]) == 0
    captured = capsys.readouterr()
    assert re.search(r"\rrope-d64-theta10000-70000 \[#{30}\] 100%  70000/70000 rows  [0-9.]+ s\n\Z", captured.err)
    assert captured.err.count("\r") >= 2
    name = captured.out.split()[1]
    assert name == "rope-d64-theta10000-70000" and attach(name, root=shm_root).array.shape == (70000, 64)


def test_verify_reports_a_corrupted_table(shm_root, capsys):
    assert main(["table", "build", SIN, "--positions", "0:100", "--name", "t", "--shm-dir", str(shm_root)]) == 0
    poke(shm_root / "posenc.t.1", (shm_root / "posenc.t.1").stat().st_size - 1, b"\xff")
    assert main(["table", "verify", "t", "--shm-dir", str(shm_root)]) == 1
    assert "FAIL  t: segment: " in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["{\"kind\": \"sinusoidal\", \"dim\": 8}"], "positions: is required"),
    (["{\"kind\": \"nope\", \"dim\": 8}"], "encoding.kind: must be one of"),  # the spec before --positions
    (["{\"kind\": \"sinusoidal\", \"dim\": 0}"], "dim: must be >= 1"),
    ([SIN, "--positions", "5"], "positions: must be START:STOP"),
    ([SIN, "--positions", "5:5"], "stop: must be >= 6"),
    (["{\"kind\": \"sinusoidal\", \"dim\": 0}", "--positions", "0:5"], "dim: must be >= 1"),
    (["{not json", "--positions", "0:5"], "spec: invalid JSON"),
    (["/no/such/file.json"], "spec: is neither JSON nor a readable file"),
    (["[1, 2]"], "spec: is neither JSON"),
    ([SIN, "--positions", "0:5", "--name", "../x"], "name: '../x' must not contain"),
])
def test_build_errors_name_the_field(shm_root, capsys, args, message):
    assert main(["table", "build", *args, "--shm-dir", str(shm_root)]) == 2
    assert message in capsys.readouterr().err
    assert [p.name for p in shm_root.iterdir() if p.name != "posenc-registry"] == []


def test_ls_of_an_empty_directory_prints_only_the_header(tmp_path, capsys):
    assert main(["table", "ls", "--shm-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split() == ["NAME", "SPEC", "SHAPE", "DTYPE", "SIZE", "GENERATION", "STATE", "SERVES"]
