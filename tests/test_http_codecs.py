"""Wire formats: Accept negotiation, JSON/npy/raw responses, and binary bodies parsed without trusting them."""

import io
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import orjson
import pytest
from posenc.http.api.codecs import (
    JSON,
    NPY,
    RAW,
    decode_array,
    decode_json,
    encode,
    json_data,
    media_type,
    negotiate,
)
from posenc.http.api.errors import HttpError

I64 = np.dtype(np.int64)


@pytest.mark.parametrize("accept, expected", [
    (None, JSON), ("", JSON), ("*/*", JSON), ("application/*", JSON), ("application/x-npy", NPY),
    ("text/html, application/octet-stream;q=0.9", RAW),
    ("application/json;q=0.5, application/x-npy", NPY),
    ("application/x-npy;q=0.5, application/json;q=0.9", JSON),
    ("application/x-npy;q=0, */*;q=0.1", JSON),
    ("APPLICATION/OCTET-STREAM", RAW),
])
def test_negotiate(accept, expected):
    assert negotiate(accept) == expected


@pytest.mark.parametrize("accept", ["text/html", "application/x-npy;q=0", "image/png;q=bogus"])
def test_negotiate_refuses_with_406(accept):
    with pytest.raises(HttpError) as info:
        negotiate(accept)
    assert (info.value.status, info.value.field) == (406, "accept")


def test_media_type_strips_parameters():
    assert media_type("application/json; charset=utf-8") == JSON
    assert media_type(None) == JSON


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64"])
def test_binary_round_trips(dtype):
    arr = (np.arange(24).reshape(2, 3, 4) * 0.37).astype(dtype)
    body, headers = encode(arr, RAW)
    assert headers["x-posenc-dtype"] == dtype and headers["x-posenc-shape"] == "2,3,4"
    assert np.array_equal(np.frombuffer(body, dtype=np.dtype(dtype).newbyteorder("<")).reshape(2, 3, 4), arr)
    body, headers = encode(arr, NPY)
    assert headers["content-type"] == NPY
    loaded = np.load(io.BytesIO(body), allow_pickle=False)
    assert loaded.dtype == arr.dtype and np.array_equal(loaded, arr)


def test_non_contiguous_arrays_are_sent_in_c_order():
    arr = np.arange(12, dtype=np.float32).reshape(3, 4).T
    assert np.array_equal(np.frombuffer(encode(arr, RAW)[0], np.float32).reshape(4, 3), arr)
    assert np.array_equal(np.load(io.BytesIO(encode(arr, NPY)[0])), arr)
    assert orjson.loads(encode(arr, JSON)[0])["data"] == arr.tolist()


def test_json_is_exact_for_each_dtype_and_nulls_non_finite():
    values = np.array([0.1, 1 / 3, -np.inf, np.nan, 65504.0], dtype=np.float64)
    for dtype in ("float32", "float64", "float16", "bfloat16"):
        arr = values.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
        doc = orjson.loads(encode(arr, JSON)[0])
        assert doc["dtype"] == dtype and doc["shape"] == [5]
        finite = np.isfinite(arr.astype(np.float64))
        parsed = np.array([np.nan if v is None else v for v in doc["data"]])
        assert [v is None for v in doc["data"]] == list(~finite)
        assert np.array_equal(parsed[finite].astype(arr.dtype), arr[finite])  # round-trips to the same value


def test_bfloat16_is_raw_bits_and_has_no_npy():
    arr = np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16)
    body, headers = encode(arr, RAW)
    assert headers["x-posenc-dtype"] == "bfloat16" and body == arr.view(np.uint16).astype("<u2").tobytes()
    with pytest.raises(HttpError) as info:
        encode(arr, NPY)
    assert info.value.field == "dtype"


def test_extra_fields_go_to_json_keys_or_headers():
    arr = np.ones(2)
    assert orjson.loads(encode(arr, JSON, {"attention_factor": 1.25})[0])["attention_factor"] == 1.25
    assert encode(arr, RAW, {"attention_factor": 1.25})[1]["x-posenc-attention-factor"] == "1.25"


def _npy(arr) -> bytes:
    out = io.BytesIO()
    np.save(out, arr, allow_pickle=True)
    return out.getvalue()


def test_decode_npy_any_order_and_endianness():
    c = np.arange(6, dtype=np.float32).reshape(2, 3)
    for arr in (c, np.asfortranarray(c), c.astype(">f8")):
        got = decode_array(_npy(arr), NPY, "x", I64)
        assert got.dtype.isnative and np.array_equal(got, arr)


def test_decode_raw():
    assert np.array_equal(decode_array(np.arange(3, dtype="<i8").tobytes(), RAW, "positions", I64), [0, 1, 2])
    got = decode_array(np.array([0.5], "<f8").tobytes(), RAW, "positions", np.dtype(np.float64))
    assert got.tolist() == [0.5]


def _bad_npy_bodies():
    good = _npy(np.arange(4, dtype=np.int64))
    header_end = good.index(b"\n") + 1
    return {
        "pickled objects": _npy(np.array([{"a": 1}], dtype=object)),
        "strings": _npy(np.array(["a"])),
        "truncated data": good[:-3],
        "trailing bytes": good + b"\0",
        "bad magic": b"\x93NUMPX" + good[6:],
        "header only": good[:header_end],
        "shape claims 2**40 elements": good[:header_end].replace(b"(4,)", b"(1099511627776,)") + good[header_end:],
        "empty": b"",
    }


@pytest.mark.parametrize("name", list(_bad_npy_bodies()))
def test_decode_refuses_malformed_npy(name):
    with pytest.raises(HttpError) as info:
        decode_array(_bad_npy_bodies()[name], NPY, "x", I64)
    assert (info.value.status, info.value.field) == (400, "x")


def test_decode_refuses_ragged_raw_and_bad_json():
    with pytest.raises(HttpError, match="whole number"):
        decode_array(b"1234567", RAW, "positions", I64)
    for body in (b"{", b"[1, 2]", b'"x"', b"NaN"):
        with pytest.raises(HttpError) as info:
            decode_json(body)
        assert (info.value.status, info.value.field) == (400, "body")
    assert decode_json(b"  ") == {}


def _orjson_data(arr: np.ndarray) -> bytes:
    """json_data as it was before the native printer: orjson's numpy serializer."""
    arr = np.asarray(arr)
    if arr.ndim == 0:
        return orjson.dumps(arr.reshape(1), option=orjson.OPT_SERIALIZE_NUMPY)[1:-1]
    return orjson.dumps(np.ascontiguousarray(arr), option=orjson.OPT_SERIALIZE_NUMPY)


def _json_cases() -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    grid = rng.standard_normal((6, 10)) * 10.0 ** rng.integers(-9, 9, size=(6, 10))
    specials = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, 3.4028235e38])
    with np.errstate(over="ignore"):  # the grid's largest values overflow float16 to inf: cases too
        half = grid.astype(np.float16)
    return [grid.astype(np.float32), grid.astype(np.float32)[:, ::3], grid.astype(np.float32).T,
            specials.astype(np.float32), np.array(0.1, np.float32), np.float32(2.5), half,
            grid.astype(np.float64), (grid * 1000).astype(np.int64), grid.astype(np.float32).reshape(2, 3, 10),
            np.zeros((0, 4), np.float32), np.zeros((3, 0), np.float32), _read_only(grid.astype(np.float32))]


def _read_only(arr: np.ndarray) -> np.ndarray:
    arr.setflags(write=False)  # as rows served from a shared-memory table
    return arr


@pytest.mark.parametrize("index", range(13))
def test_json_data_is_orjsons_text(index):
    """The native float32 printer (float16 widened) changes no byte of any JSON answer."""
    arr = _json_cases()[index]
    assert json_data(arr) == _orjson_data(arr)


def test_json_data_prints_bfloat16_as_its_float32():
    arr = (np.arange(12).reshape(3, 4) / 7).astype(ml_dtypes.bfloat16)
    assert json_data(arr) == _orjson_data(arr.astype(np.float32))
    assert json_data(np.array([0.1], np.float16)) == b"[0.099975586]"


@pytest.mark.parametrize("env", [{"POSENC_NATIVE": "0"}, {"POSENC_ISA": "scalar"}])
def test_json_data_without_the_avx512_writer_is_orjson(env):
    """No library (POSENC_NATIVE=0, no build) or no AVX-512 writer: orjson prints, the same bytes."""
    code = ("import numpy as np, orjson; from posenc.native import json_text; from posenc.http.api import codecs\n"
            "a = (np.arange(20, dtype=np.float32).reshape(4, 5) - 7) / 3\n"
            "assert not codecs.NATIVE_JSON\n"
            "assert json_text.available() == (json_text.json_f32(a) is not None)\n"
            "assert codecs.json_data(a) == orjson.dumps(a, option=orjson.OPT_SERIALIZE_NUMPY)\n"
            "h = a.astype(np.float16)\n"
            "assert codecs.json_data(h) == orjson.dumps(h, option=orjson.OPT_SERIALIZE_NUMPY)\n"
            "print('ok')")
    environment = {k: v for k, v in os.environ.items() if k not in ("POSENC_NATIVE", "POSENC_ISA")}
    result = subprocess.run([sys.executable, "-c", code], env={**environment, **env}, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.stdout.strip() == "ok", result.stderr
