"""Issue 34: one position limit, `max_abs_position`, for every door.

A payments service's positions are transaction ids and millisecond timestamps (~1.7e12): the
default (2^53) admits them in the library, over HTTP and over the binary protocol. The limit is
one setting with one syntax, read by the same rules in Python and in C, given by the TOML key,
the `posenc serve` / `posenc-server` flag or POSENC_MAX_ABS_POSITION (flag > environment > file),
and it reaches the library in every worker, HTTP and the binary sidecar. NaN and infinities are
refused as not finite, never with a limit to raise; HTTP tells its caller the limit, nothing about
the server's environment."""

import os
import tempfile
from pathlib import Path

import httpx
import numpy as np
import orjson
import posenc
import pytest
from fastapi.testclient import TestClient
from binary_support import Raw, build, frame, positions_bytes, running_server, table_store
from posenc.client import Client, Status, start_server
from posenc.client.inline import sinusoidal_aux
from posenc.client.protocol import Opcode, PositionKind
from posenc.config import ServiceConfig, load
from posenc.errors import PositionBeyondLimit
from posenc.http import create_app
from posenc.limits import MAX_EXACT_POSITION, env_max_abs_position, parse_max_abs_position
from serve_support import served

STAMP = 1_700_000_000_000  # a millisecond timestamp, past 2^40
BEYOND = 18_000_000_000_000_000  # 1.8e16, past 2^53 (and a float64 value, so a float request can carry it)
TWO_53 = 9007199254740992
CALLER_MESSAGE = (f"positions: element 0 is {BEYOND}, beyond this service's limit |p| <= {TWO_53} "
                  "(max_abs_position)")


# --- the default admits millisecond timestamps, at every door ------------------------------

def test_the_library_default_is_2_53_and_admits_a_timestamp():
    assert posenc.LIMITS.max_abs_position == MAX_EXACT_POSITION == TWO_53
    rows = posenc.sinusoidal([STAMP, -STAMP], 8, dtype="float64")
    assert rows.shape == (2, 8) and np.isfinite(rows).all()
    cos, _ = posenc.rope_cos_sin(np.array([STAMP], np.int64), posenc.RopeSpec(16))
    assert np.isfinite(cos).all()


@pytest.mark.parametrize("positions", [[TWO_53 + 1], np.array([TWO_53 + 1], np.int64), [BEYOND], [-(2**63)]])
def test_the_library_refuses_past_2_53_naming_the_element_and_the_limit(positions):
    """int64 positions are compared as integers: 2^53 + 1 would round to 2^53 in float64."""
    with pytest.raises(PositionBeyondLimit) as err:
        posenc.sinusoidal(positions, 8)
    assert err.value.field == "positions" and err.value.index == 0 and err.value.limit == TWO_53
    beyond = f"positions: element 0 is {int(positions[0])}, beyond the limit |p| <= {TWO_53}"
    assert str(err.value).startswith(beyond)


def test_an_offset_cannot_round_a_position_back_under_2_53():
    """2^53 - 1 plus offset 2 is 2^53 + 1, which float64 rounds to 2^53: checked before adding."""
    with pytest.raises(PositionBeyondLimit, match=f"element 0 plus offset 2 is {TWO_53 + 1}"):
        posenc.sinusoidal([TWO_53 - 1], 8, offset=2)


@pytest.fixture(scope="module")
def client():
    """The app in process over the binary tests' tables (sin128 among them), on the default config."""
    with table_store() as (_, root), \
            TestClient(create_app(ServiceConfig.from_dict({"server": {"shm_dir": str(root)}}))) as c:
        yield c


SIN8 = {"dim": 8}


def test_http_default_admits_a_timestamp_and_shows_its_limit(client):
    r = client.post("/v1/sinusoidal",
                    json={"spec": SIN8, "positions": [STAMP, STAMP + 1], "dtype": "float64"})
    assert r.status_code == 200, r.text
    np.testing.assert_array_equal(np.array(r.json()["data"]),
                                  posenc.sinusoidal([STAMP, STAMP + 1], 8, dtype="float64"))
    assert client.get("/info").json()["limits"]["max_abs_position"] == TWO_53


@pytest.mark.parametrize("positions", [[BEYOND], [float(BEYOND)]])
def test_http_past_the_limit_tells_the_caller_the_limit_only(client, positions):
    r = client.post("/v1/sinusoidal", json={"spec": SIN8, "positions": positions})
    assert r.status_code == 422
    error = r.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_parameter", "positions")
    assert error["message"] == CALLER_MESSAGE


@pytest.fixture(scope="module")
def binary():
    with table_store() as (_, root), running_server(root) as server:
        yield server


def spec_frame(positions, kind=PositionKind.INT64) -> bytes:
    """ENCODE_SPEC of a Vaswani sinusoid, built by hand: the client would check the positions itself."""
    dtype = "<i8" if kind == PositionKind.INT64 else "<f8"
    return frame(Opcode.ENCODE_SPEC, 5, aux=sinusoidal_aux(posenc.SinusoidalSpec(8)),
                 positions=positions_bytes(positions, dtype), count=len(positions), position_kind=kind)


def test_the_binary_server_default_admits_a_timestamp(binary):
    with Client(binary.address) as c:
        assert c.stats()["limits"]["max_abs_position"] == TWO_53
        rows = c.encode_spec(posenc.SinusoidalSpec(8), [STAMP], dtype="float64")
    np.testing.assert_array_equal(rows, posenc.sinusoidal([STAMP], 8, dtype="float64"))


@pytest.mark.parametrize("positions, kind, shown", [
    ([TWO_53 + 1], PositionKind.INT64, str(TWO_53 + 1)),  # not rounded to 2^53 and let in
    ([-(2**63)], PositionKind.INT64, str(-(2**63))),
    ([float(BEYOND)], PositionKind.FLOAT64, str(BEYOND)),
])
def test_the_binary_server_refuses_past_the_limit_naming_element_and_limit(binary, positions, kind, shown):
    with Raw(binary.address) as raw:
        raw.send(spec_frame(positions, kind))
        err = raw.error(Status.POSITION_OUT_OF_RANGE)
    assert str(err) == (f"positions: element 0 is {shown}, beyond this server's limit |p| <= {TWO_53} "
                        "(max_abs_position)")


# --- NaN and infinities: not finite, everywhere ------------------------------------------

NOT_FINITE = [(float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf")]


@pytest.mark.parametrize("value, shown", NOT_FINITE)
def test_the_library_says_not_finite(value, shown):
    with pytest.raises(posenc.PosencError) as err:
        posenc.sinusoidal([1.0, value], 8)
    assert str(err.value) == f"positions: element 1 is {shown}, not finite"


@pytest.mark.parametrize("value, shown", NOT_FINITE)
@pytest.mark.parametrize("route", ["/v1/sinusoidal", "/v1/tables/sin128/rows"])
def test_http_says_not_finite(client, value, shown, route):
    spec = {"spec": orjson.dumps(SIN8).decode()} if route == "/v1/sinusoidal" else {}
    params = {"positions_dtype": "float64", **spec}
    r = client.post(route, content=np.array([1.0, value], "<f8").tobytes(), params=params,
                    headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert (error["field"], error["message"]) == ("positions", f"positions: element 1 is {shown}, not finite")
    assert "environment" not in error["message"] and "POSENC_" not in error["message"]


@pytest.mark.parametrize("value, shown", NOT_FINITE)
def test_the_binary_server_says_not_finite(binary, value, shown):
    with Client(binary.address) as c:
        table = c.resolve("sin128").id
    requests = [spec_frame([1.0, value], PositionKind.FLOAT64),
                frame(Opcode.ENCODE_TABLE, 6, positions=positions_bytes([1.0, value], "<f8"), count=2,
                      table_id=table, position_kind=PositionKind.FLOAT64)]
    with Raw(binary.address) as raw:
        for request in requests:
            raw.send(request)
            err = raw.error(Status.POSITION_OUT_OF_RANGE)
            assert str(err) == f"positions: element 1 is {shown}, not finite"


# --- one syntax: Python and C agree on every spelling ---------------------------------------

SPELLINGS = {
    "1": 1, "1700000000000": STAMP, "00042": 42, "9007199254740992": TWO_53, "1e13": 10**13, "1E13": 10**13,
    "1e+13": 10**13, "9.007199254740992e15": TWO_53, "1.5e1": 15, "10e-1": 1, "1.7e12": STAMP,
    # refused: above 2^53 (not rounded down to it), not an integer, zero, or not the syntax
    "9007199254740993": None, "9.007199254740993e15": None, "1e16": None, "1.8e16": None, "1e999999": None,
    "0": None, "0e5": None, "-1": None, "+1": None, "1.5": None, "1.0": None, "1.55e1": None, "1e-1": None,
    "1_000": None, " 1": None, "1 ": None, "": None, "0x10": None, "inf": None, "nan": None, "1e": None,
    "e5": None, ".5e1": None, "5.e1": None, "1" * 65: None,
}


def server_limit(spelling: str, *, env: bool = False) -> int | str:
    """What posenc-server makes of the spelling, from the flag (or POSENC_MAX_ABS_POSITION): the
    limit its STATS shows, or the reason it refused to start."""
    build()
    saved = os.environ.get("POSENC_MAX_ABS_POSITION")
    flags = {} if env else {"max_abs_position": spelling}
    try:
        if env:
            os.environ["POSENC_MAX_ABS_POSITION"] = spelling
        with tempfile.TemporaryDirectory() as sock_dir, \
                start_server(host=None, unix_path=str(Path(sock_dir) / "s"), threads=1, **flags) as server, \
                Client(server.address) as c:
            return c.stats()["limits"]["max_abs_position"]
    except posenc.PosencError as exc:
        return str(exc).split("posenc-server: ", 1)[1].split(": ", 1)[1]
    finally:
        if saved is None:
            os.environ.pop("POSENC_MAX_ABS_POSITION", None)
        else:
            os.environ["POSENC_MAX_ABS_POSITION"] = saved


#: A config without tables: the embedded one's [[tables]] hold positions up to 131071, past small limits.
NO_TABLES = Path(tempfile.mkdtemp(prefix="posenc-limit-")) / "posenc.toml"
NO_TABLES.write_text("[server]\nbinary_port = 0\n")


def python_limit(spelling: str) -> int | str:
    try:
        return parse_max_abs_position(spelling)
    except ValueError as exc:
        return str(exc)


@pytest.mark.parametrize("spelling", sorted(SPELLINGS), ids=lambda s: repr(s[:24]))
def test_every_door_reads_a_spelling_alike(spelling):
    expected = python_limit(spelling)
    if SPELLINGS[spelling] is None:
        assert isinstance(expected, str) and expected.startswith("must be"), expected
    else:
        assert expected == SPELLINGS[spelling]
    assert server_limit(spelling) == expected  # the C flag: the same value, or the same words
    toml = f'[limits]\nmax_abs_position = "{spelling}"\n[server]\nbinary_port = 0\n'
    doors = {"the TOML key": lambda: ServiceConfig.from_toml(toml).limits.max_abs_position,
             "the environment (service)": lambda: load(NO_TABLES, env={"POSENC_MAX_ABS_POSITION": spelling}).limits
             .max_abs_position,
             "the environment (library)":
                 lambda: env_max_abs_position({"POSENC_MAX_ABS_POSITION": spelling}, None)}
    for door, read in doors.items():
        if spelling == "":  # empty is unset, in the environment as for posenc-server
            continue
        if isinstance(expected, int):
            assert read() == expected, door
        else:
            with pytest.raises(posenc.PosencError) as err:
                read()
            assert err.value.message == expected, door


@pytest.mark.parametrize("spelling", ["1e13", "9007199254740993", "1.5"])
def test_posenc_server_reads_the_environment_alike_and_its_flag_wins(spelling):
    expected = python_limit(spelling)
    assert server_limit(spelling, env=True) == expected
    build()
    os.environ["POSENC_MAX_ABS_POSITION"] = spelling
    try:
        with tempfile.TemporaryDirectory() as sock_dir, \
                start_server(host=None, unix_path=str(Path(sock_dir) / "s"), threads=1,
                             max_abs_position="12345") as server, Client(server.address) as c:
            assert c.stats()["limits"]["max_abs_position"] == 12345
    finally:
        os.environ.pop("POSENC_MAX_ABS_POSITION")


@pytest.mark.parametrize("value, words", [
    ("1e13", "a float (TOML rounds it to float64"), ("true", "a boolean"), ("[1]", "an array"),
    ("{ a = 1 }", "a table"), ('"ten"', "got 'ten'"), ("-5", "got '-5'"), ("1.5", "a float"),
])
def test_every_wrong_toml_type_gets_a_clear_error(value, words):
    with pytest.raises(posenc.PosencError) as err:
        ServiceConfig.from_toml(f"[limits]\nmax_abs_position = {value}\n")
    assert err.value.field == "limits.max_abs_position"
    assert err.value.message.startswith("must be") and words in err.value.message, err.value.message
    assert "1e13" in err.value.message  # the accepted syntax, shown


def test_a_toml_integer_with_underscores_is_toml_s_own_syntax():
    config = ServiceConfig.from_toml("[limits]\nmax_abs_position = 1_700_000_000_000\n")
    assert config.limits.max_abs_position == STAMP


# --- posenc serve: the setting reaches HTTP, every worker's library and the sidecar ---------

def serve_config(limit_line: str):
    def config(shm_dir: str) -> str:
        return (f'[server]\nworkers = 2\nbinary_port = 0\nbinary_socket = "{shm_dir}/binary.sock"\n'
                f'shm_dir = "{shm_dir}"\n[limits]\n{limit_line}\n')
    return config


@pytest.mark.parametrize("limit_line, env, args, expected", [
    ("", {}, (), TWO_53),  # the default
    ('max_abs_position = "1e13"', {}, (), 10**13),  # the file
    ("max_abs_position = 10000000000000", {"POSENC_MAX_ABS_POSITION": "2e12"}, (), 2 * 10**12),  # env > file
    ("max_abs_position = 10000000000000", {"POSENC_MAX_ABS_POSITION": "2e12"},
     ("--max-abs-position", "1.7e12"), STAMP),  # flag > env > file
], ids=["default", "toml", "env-over-toml", "flag-over-env"])
def test_serve_sets_one_limit_for_http_its_workers_and_the_sidecar(limit_line, env, args, expected):
    with served(serve_config(limit_line), env=env, args=args) as server:
        info = httpx.get(f"{server.url}/info", timeout=10).json()
        assert info["limits"]["max_abs_position"] == expected
        with Client(f"unix:{server.shm_dir}/binary.sock") as c:
            assert c.stats()["limits"]["max_abs_position"] == expected
        for _ in range(8):  # new connections: each worker of the two answers some
            with httpx.Client(timeout=10) as http:
                url = f"{server.url}/v1/sinusoidal"
                inside = http.post(url, json={"spec": SIN8, "positions": [expected]})
                beyond = http.post(url, json={"spec": SIN8, "positions": [expected + 1]})
            assert inside.status_code == 200, inside.text
            assert beyond.status_code == 422
            assert beyond.json()["error"]["message"] == (
                f"positions: element 0 is {expected + 1}, beyond this service's limit |p| <= {expected} "
                "(max_abs_position)")


def test_serve_refuses_a_bad_flag_naming_it():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "posenc.cli", "serve", "--max-abs-position", "1.8e16"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert ("posenc: error: --max-abs-position: must be at most 9007199254740992 (2^53), got '1.8e16': "
            "positions are int64 on the wire, but above 2^53 not every integer has a float64 value"
            ) in result.stderr

