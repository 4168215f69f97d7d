"""The segment and registry contract of docs/shm-format.md, checked alike in the Python
reader (`posenc.shm.attach`) and the C reader (`posenc_shm.h`): every header check, in the
doc's order, refuses with the same words; the checksum field selects CRC-32 or CRC-32C;
both readers pick the same registry slot and treat the registry magic the same way."""

import json
import os
import struct
import zlib

import numpy as np
import pytest
from posenc.errors import PosencError
from posenc.shm import ShmError, TableStore, attach, checksum, list_tables
from posenc.shm.registry import HEADER_BYTES, SLOT_BYTES
from shm_support import (CORRUPTIONS, assert_table_rows, header_of, poke, python_worker, rewrite_header, rewrite_spec,
                         run_c_reader, table_from)

pytest_plugins = ["shm_support"]

SIN = {"kind": "sinusoidal", "dim": 16}


def _published(store, root, **kwargs):
    table = table_from(SIN, 0, 512)
    generation = store.publish("t", table, **kwargs).generation
    path = root / f"posenc.t.{generation}"
    return table, path, header_of(path)


@pytest.mark.parametrize("checksum_name", ["crc32c", "crc32"])
@pytest.mark.parametrize("case, corrupt, phrase, code", CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_both_readers_refuse_each_damage_with_the_same_words(shm_root, shm_c_reader, case, corrupt, phrase, code,
                                                             checksum_name):
    with TableStore(shm_root, checksum=checksum_name) as store:
        _, path, header = _published(store, shm_root)
        assert header["checksum"] == checksum.CODES[checksum_name]
        assert (256 + header["spec_len"]) % 64, "the fixture's spec must leave padding to corrupt"
        corrupt(path, header)
        with pytest.raises(ShmError) as err:
            attach("t", root=shm_root)
        assert err.value.field == "segment" and str(path) in str(err.value) and phrase in str(err.value)
        status, lines = run_c_reader(shm_c_reader, "path", path, 1)
        assert status == 3 and lines[0].startswith(f"error {code} {path}: ") and phrase in lines[0], lines


def test_start_plus_rows_overflowing_int64_never_yields_a_row(shm_store, shm_root, shm_c_reader):
    """The review's case: stop went negative and row(INT64_MIN) returned row 11."""
    _, path, header = _published(shm_store, shm_root)
    rewrite_header(path, start=(1 << 63) - 1 - 11)
    status, lines = run_c_reader(shm_c_reader, "name", shm_root, "t", 0, -(1 << 63))
    assert status == 3 and "start + rows overflows int64" in lines[0], lines
    with pytest.raises(ShmError, match="start \\+ rows overflows int64"):
        attach("t", root=shm_root, verify=False)


def test_python_also_parses_the_spec_the_c_reader_only_hashes(shm_store, shm_root, shm_c_reader):
    """Both readers check the spec bytes against spec_hash; only Python parses them, so a spec
    with the hash of its bytes that this version does not accept is refused by Python alone."""
    table, path, header = _published(shm_store, shm_root)
    spec = path.read_bytes()[256:256 + header["spec_len"]]
    poke(path, 256, spec.replace(b'"dim":16', b'"dim":17'))
    rewrite_header(path)  # a valid header CRC over the altered spec, whose hash no longer matches
    with pytest.raises(ShmError, match="spec JSON does not match its hash"):
        attach("t", root=shm_root)
    status, lines = run_c_reader(shm_c_reader, "path", path, 1)
    assert status == 3 and "spec JSON does not match its hash" in lines[0], lines
    rewrite_spec(path, table.canonical_json.replace('"start":0', '"start":0,"colour":1').encode())
    with pytest.raises(ShmError, match="unusable spec JSON .*colour"):
        attach("t", root=shm_root)
    rewrite_spec(path, table.canonical_json.replace('"start":0', '"start":0,"start":0').encode())
    with pytest.raises(ShmError, match="unusable spec JSON .duplicate key 'start'"):
        attach("t", root=shm_root)
    assert run_c_reader(shm_c_reader, "path", path, 1)[0] == 0  # documented: C parses no JSON


# ---- checksum algorithms -------------------------------------------------------------------

def test_crc32c_matches_the_standard_check_values_in_every_implementation():
    # RFC 3720 B.4 vectors and the CRC catalogue's check value
    vectors = {b"123456789": 0xE3069283, bytes(32): 0x8A9136AA, b"\xff" * 32: 0x62A8AB43,
               bytes(range(32)): 0x46DD794E, bytes(range(31, -1, -1)): 0x113FDB5C}
    natives = [True, False] if checksum.implementation() == "native" else [False]
    for native in natives:
        for data, expected in vectors.items():
            assert checksum.crc32c(data, native=native) == expected
    big = np.random.default_rng(7).integers(0, 256, 3 * 32768 * 5 + 1234, np.uint8)  # the 3-lane path + tails
    values = {checksum.crc32c(big, native=n) for n in natives}
    values.add(checksum.crc32c(big[777:], checksum.crc32c(big[:777])))  # chaining like zlib.crc32
    assert len(values) == 1


def test_every_native_crc32c_kernel_agrees_with_numba_at_every_length_and_alignment():
    # The VPCLMULQDQ kernel folds 256 bytes at a time from 512 bytes on and hands the rest to the
    # crc32 instruction: lengths around those edges, odd offsets (unaligned loads), chaining.
    kernels = checksum.native_kernels()
    if not kernels:
        pytest.skip("libposenc is not built")
    data = np.random.default_rng(11).integers(0, 256, 300_000, np.uint8)
    lengths = [0, 1, 15, 16, 255, 256, 257, 511, 512, 513, 767, 768, 1023, 1024, 1025, 4096 + 17,
               3 * 32768 + 255, 3 * 32768 * 2 + 513, 299_000]
    for offset in (0, 1, 7, 63):
        for n in lengths:
            piece = data[offset:offset + n]
            seed = (n * 2654435761) & 0xFFFFFFFF
            expected = checksum.crc32c(piece, seed, native=False)
            assert {kernel: checksum.crc32c_by(kernel, piece, seed) for kernel in kernels} == \
                dict.fromkeys(kernels, expected), (offset, n)
    assert checksum.crc32c(data) == checksum.crc32c_by(kernels[-1], data)  # the default is one of them
    with pytest.raises(PosencError, match="kernel"):
        checksum.crc32c_by("crc64", data)


def test_every_native_crc32c_kernel_gives_the_same_value_fed_piece_by_piece():
    # The one-pass sin/cos kernel feeds the CRC row tiles of any size (posenc_shm.h's stream):
    # the VPCLMULQDQ stream keeps its accumulators and the bytes short of a 256-byte block
    # between pieces; pieces around those edges, unaligned starts, seeds.
    kernels = checksum.native_kernels()
    if not kernels:
        pytest.skip("libposenc is not built")
    data = np.random.default_rng(13).integers(0, 256, 70_000, np.uint8)
    for piece in (1, 3, 64, 255, 256, 257, 511, 512, 513, 7800, 8192, 69_999):
        for offset, n in ((0, 70_000), (5, 60_001), (1, 700), (3, 300), (0, 0)):
            chunk = data[offset:offset + n]
            seed = (piece * 40503 + n) & 0xFFFFFFFF
            expected = checksum.crc32c(chunk, seed, native=False)
            assert {kernel: checksum.crc32c_by(kernel, chunk, seed, piece=piece) for kernel in kernels} == \
                dict.fromkeys(kernels, expected), (piece, offset, n)


@pytest.mark.parametrize("checksum_name", ["crc32", "crc32c"])
def test_segments_of_either_checksum_verify_in_both_readers(shm_root, shm_c_reader, checksum_name):
    table = table_from({"kind": "rope", "head_dim": 32}, -5, 3000, "float64")
    with TableStore(shm_root, checksum=checksum_name) as store:
        generation = store.publish("t", table).generation
        path = shm_root / f"posenc.t.{generation}"
        data = path.read_bytes()[header_of(path)["data_offset"]:]
        stored = struct.unpack_from("<I", path.read_bytes(), 20)[0]
        assert stored == (zlib.crc32(data) if checksum_name == "crc32" else checksum.crc32c(data))
        with attach("t", root=shm_root) as tbl:
            assert_table_rows(tbl.array, table)
        status, lines = run_c_reader(shm_c_reader, "name", shm_root, "t", 1)
        assert status == 0 and lines[0].endswith(f"checksum={checksum.CODES[checksum_name]}"), lines


def test_a_segment_written_before_the_checksum_field_still_verifies(shm_root, shm_c_reader):
    """Old files have zeros at offset 176 and a zlib CRC-32: exactly checksum 0."""
    with TableStore(shm_root, checksum="crc32") as store:
        _, path, header = _published(store, shm_root)
        assert header["checksum"] == 0 and path.read_bytes()[176:256] == bytes(80)
        assert attach("t", root=shm_root).generation == header["generation"]
        assert run_c_reader(shm_c_reader, "name", shm_root, "t", 1)[0] == 0


def test_an_unknown_checksum_name_is_refused(shm_root):
    with pytest.raises(PosencError) as err:
        TableStore(shm_root, checksum="md5")
    assert err.value.field == "checksum"


# ---- the registry --------------------------------------------------------------------------

def _write_slot(root, slot, generation, name):
    poke(root / "posenc-registry", HEADER_BYTES + slot * SLOT_BYTES,
         struct.pack("<QQ64s", 2, generation, name.encode()))


def test_the_first_slot_naming_a_table_wins_in_every_reader(shm_store, shm_root, shm_c_reader):
    first = shm_store.publish("t", table_from(SIN, 0, 100)).generation
    shm_store.publish("u", table_from(SIN, 0, 200))
    other = shm_store.publish("u", table_from(SIN, 0, 300)).generation  # slot 1; frees nothing
    os.link(shm_root / f"posenc.u.{other}", shm_root / f"posenc.t.{other}")
    rewrite_header(shm_root / f"posenc.t.{other}", name=b"t")
    _write_slot(shm_root, 7, other, "t")  # a duplicate of "t" in a later slot
    assert attach("t", root=shm_root).generation == first
    assert run_c_reader(shm_c_reader, "name", shm_root, "t", 0)[1][0].startswith(f"ok generation={first} ")
    states = {(i.name, i.generation): i.state for i in list_tables(shm_root)}
    assert states[("t", first)] == "READY" and states[("t", other)] == "STALE"
    shm_store.publish("v", table_from(SIN, 0, 10))  # a writer clears the duplicate slot under its lock
    raw = (shm_root / "posenc-registry").read_bytes()
    assert struct.unpack_from("<Q", raw, HEADER_BYTES + 7 * SLOT_BYTES + 8)[0] == 0


def test_a_registry_without_magic_is_none_yet_and_a_wrong_magic_is_corrupt(shm_store, shm_root, shm_c_reader):
    shm_store.publish("t", table_from(SIN, 0, 10))
    registry = shm_root / "posenc-registry"
    poke(registry, 0, bytes(8))  # as while a store creates it: the magic is stored last
    with pytest.raises(ShmError, match="no registry there yet") as err:
        attach("t", root=shm_root)
    assert err.value.field == "name"
    status, lines = run_c_reader(shm_c_reader, "name", shm_root, "t", 0)
    assert status == 3 and lines[0].startswith("error -2 ") and "not initialised yet" in lines[0]
    poke(registry, 0, b"GARBAGE!")
    with pytest.raises(ShmError, match="bad magic .* corrupted registry") as err:
        attach("t", root=shm_root)
    assert err.value.field == "registry"
    status, lines = run_c_reader(shm_c_reader, "name", shm_root, "t", 0)
    assert status == 3 and lines[0].startswith("error -10 ") and "bad magic: corrupted registry" in lines[0]
    with pytest.raises(ShmError, match="bad magic"):
        TableStore(shm_root)  # writers refuse it too: they never overwrite a registry they cannot read
    poke(registry, 0, b"POSENCRG")
    copy = shm_root / "copy"  # truncated in a copy: the live store maps the original
    copy.mkdir()
    (copy / "posenc-registry").write_bytes(registry.read_bytes()[:4096])
    with pytest.raises(ShmError, match="truncated registry"):
        attach("t", root=copy)
    status, lines = run_c_reader(shm_c_reader, "name", copy, "t", 0)
    assert status == 3 and lines[0].startswith("error -10 ") and "truncated registry" in lines[0]


def test_python_verifies_crc32c_without_the_native_library(shm_store, shm_root):
    _, path, _ = _published(shm_store, shm_root)

    def verify():
        worker = python_worker(f"verify_without_native({str(shm_root)!r}, 't')", env={"POSENC_NATIVE": "0"})
        out, _ = worker.communicate(timeout=120)
        return json.loads(out)

    assert verify() == {"attached": 1, "crc32c": "numba"}
    poke(path, os.path.getsize(path) - 1, b"\x5a")
    assert "data checksum mismatch" in verify()["error"]


@pytest.mark.parametrize("bad", [-1, "10", True, float("nan"), 1e9])
def test_the_lock_timeout_is_checked(shm_root, bad):
    with pytest.raises(PosencError) as err:
        TableStore(shm_root, lock_timeout_s=bad)
    assert err.value.field == "lock_timeout_s"


def test_a_busy_slot_and_a_slot_generation_past_int64_use_the_same_words_in_every_reader(shm_store, shm_root,
                                                                                          shm_c_reader):
    """docs/shm-format.md: a slot left odd "stayed busy" (POSENC_SHM_EBUSY, ShmError "registry"),
    one term in both readers; a found slot above 2^63 - 1 is a "corrupted slot"
    (POSENC_SHM_EREGISTRY, ShmError "registry")."""
    shm_store.publish("t", table_from(SIN, 0, 10))
    registry = shm_root / "posenc-registry"
    poke(registry, HEADER_BYTES + 8, struct.pack("<Q", 1 << 63))
    with pytest.raises(ShmError, match="corrupted slot: 't' has generation 9223372036854775808") as err:
        attach("t", root=shm_root)
    assert err.value.field == "registry"
    status, lines = run_c_reader(shm_c_reader, "name", shm_root, "t", 0)
    assert status == 3 and lines[0].startswith("error -10 ") and "corrupted slot: 't' has generation" in lines[0]
    poke(registry, HEADER_BYTES, struct.pack("<Q", 7))  # odd: a writer stopped between its two seq stores
    with pytest.raises(ShmError, match="stayed busy") as err:
        attach("t", root=shm_root)
    assert err.value.field == "registry"
    status, lines = run_c_reader(shm_c_reader, "name", shm_root, "t", 0)
    assert status == 3 and lines[0].startswith("error -11 ") and "stayed busy" in lines[0], lines
    poke(registry, HEADER_BYTES, struct.pack("<QQ", 8, 1))  # whole again, for the store's close()
