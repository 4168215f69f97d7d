"""Service config: the embedded default is the documented file, env and flags override, bad keys name themselves."""

from pathlib import Path

import pytest
from posenc.config import DEFAULT_TOML, ServiceConfig, load
from posenc.errors import PosencError
from posenc.limits import LIMITS

ROOT = Path(__file__).parent.parent


def test_embedded_default_is_the_documented_example():
    assert (ROOT / "deploy" / "posenc.toml").read_text() == DEFAULT_TOML
    config = load(env={})
    assert (config.server.host, config.server.port, config.server.workers) == ("127.0.0.1", 8000, 0)
    assert config.server.worker_count >= 1
    assert [t.name for t in config.tables] == ["sin128", "llama3.1-8b", "sin128-any", "alibi-32h"]
    sin, llama, anywhere, alibi = (t.spec for t in config.tables)
    assert (sin.kind, sin.shape, sin.dtype) == ("sinusoidal", (131072, 128), "float32")
    assert (anywhere.computed, anywhere.encoding, anywhere.start) == (True, sin.encoding, -LIMITS.max_abs_position)
    assert (llama.kind, llama.shape, llama.encoding.rope_type) == ("rope", (131072, 128), "llama3")
    assert (alibi.kind, alibi.shape, alibi.encoding.variant) == ("alibi", (131072, 32), "paper")
    assert config.api_key is None


def test_the_binary_port_comment_says_what_serve_does_with_it():
    """Issue 26: deploy/posenc.toml still called binary_port "(a later issue)"; serve runs
    posenc-server on it (and on binary_socket), serving the same shm tables, and neither when both are off."""
    from posenc.http.runtime.server import sidecars_for

    assert "later issue" not in DEFAULT_TOML
    assert "posenc serve also runs posenc-server" in DEFAULT_TOML
    config = load(env={})
    (sidecar,) = sidecars_for(config)
    argv = list(sidecar.argv)
    assert argv[argv.index("--port") + 1] == "8001" and argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--shm-dir") + 1] == config.server.shm_dir
    assert sidecars_for(config.with_overrides(binary_port=0)) == []


def test_env_overrides_then_flags(tmp_path):
    env = {"POSENC_HOST": "0.0.0.0", "POSENC_PORT": "9001", "POSENC_WORKERS": "3", "POSENC_SHM_DIR": str(tmp_path),
           "POSENC_API_KEY": "k"}
    config = load(env=env)
    assert (config.server.host, config.server.port, config.server.workers) == ("0.0.0.0", 9001, 3)
    assert config.server.shm_dir == str(tmp_path) and config.api_key == "k"
    flagged = config.with_overrides(port=9002, host=None)
    assert (flagged.server.host, flagged.server.port) == ("0.0.0.0", 9002)


def test_file_and_round_trip(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[server]\nport = 8123\ndrain_timeout_s = 2\n[limits]\nmax_positions = 10\n'
                    '[[tables]]\nname = "r"\nencoding = { kind = "rope", head_dim = 8 }\nstop = 16\nseq_len = 32.0\n')
    config = load(path, env={})
    assert config.server.port == 8123 and config.server.drain_timeout_s == 2.0
    assert config.limits.max_positions == 10 and config.limits.max_body_bytes == 8 << 20
    assert config.tables[0].spec.seq_len == 32.0
    assert ServiceConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize("text, field", [
    ("[server]\nprot = 1\n", "server.prot"),
    ("[serve]\n", "serve"),
    ('[server]\nport = "80"\n', "server.port"),
    ("[server]\nport = 70000\n", "server.port"),
    ("[server]\nworkers = -1\n", "server.workers"),
    ("[server]\naccess_log = 1\n", "server.access_log"),
    ("[server]\nport = true\n", "server.port"),
    ("[server]\ndrain_timeout_s = 0\n", "server.drain_timeout_s"),
    ("[limits]\nmax_concurrency = 0\n", "limits.max_concurrency"),
    ('[[tables]]\nname = "a/b"\nencoding = { kind = "sinusoidal", dim = 8 }\nstop = 4\n', "tables[0].name"),
    ('[[tables]]\nencoding = { kind = "sinusoidal", dim = 8 }\nstop = 4\n', "tables[0].name"),
    ('[[tables]]\nname = "a"\nencoding = { kind = "sinusoidal", dim = 0 }\nstop = 4\n', "tables[0].encoding.dim"),
    ('[[tables]]\nname = "a"\nencoding = { kind = "sinusoidal", dim = 8 }\nstop = 4\ncolour = 1\n',
     "tables[0].colour"),
    ('[[tables]]\nname = "a"\nencoding = { kind = "sinusoidal", dim = 8 }\nstop = 4\n' * 2, "tables"),
    ("[server\n", "config"),
])
def test_bad_config_names_the_field(text, field):
    with pytest.raises(PosencError) as info:
        ServiceConfig.from_toml(text, "config")
    assert info.value.field == field


def test_bad_env_and_missing_file(tmp_path):
    with pytest.raises(PosencError, match="POSENC_PORT"):
        load(env={"POSENC_PORT": "eighty"})
    with pytest.raises(PosencError) as info:
        load(tmp_path / "missing.toml", env={})
    assert info.value.field == "config"
