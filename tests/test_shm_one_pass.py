"""The shm writers' one pass: rows and their CRC-32C from one kernel call
(`TableSpec.fill_block_crc32c`, used by `segment.fill_checksummed` in cold and prepared
publishes). Where it applies (sinusoidal tables whose stored bytes are the kernel's output,
RoPE tables) the block and the CRC are those of fill_block + the standard CRC-32C; where it
does not (a t2t zero column, per-column `scale`, ALiBi, learned rows, no native library) it
writes nothing and says so, and the writer computes, then checksums. A published segment
is the same file either way, cold or prepared."""

from __future__ import annotations

import numpy as np
import pytest
from posenc import native
from posenc.shm import TableStore, attach, checksum, prepared, segment
from posenc.tables import TableSpec
from shm_support import table_from

pytest_plugins = ["shm_support"]

needs_native = pytest.mark.skipif(native.ACTIVE is None, reason=f"native library unavailable: {native.STATUS}")

ONE_PASS = [
    ({"kind": "sinusoidal", "dim": 64}, 0, 3000, "float32"),
    ({"kind": "sinusoidal", "dim": 33, "offset": 2}, -50, 700, "float64"),
    ({"kind": "sinusoidal", "dim": 40, "layout": "halves"}, 5, 900, "float32"),
    ({"kind": "sinusoidal", "dim": 24, "layout": "t2t"}, -40, 1300, "float64"),
    ({"kind": "rope", "head_dim": 32, "scaling": {"rope_type": "linear", "factor": 2.0}}, 0, 1025, "float32"),
    ({"kind": "rope", "head_dim": 64, "max_position_embeddings": 512,
      "scaling": {"rope_type": "dynamic", "factor": 4.0}}, 0, 600, "float64"),
]
TWO_PASSES = [
    ({"kind": "sinusoidal", "dim": 25, "layout": "t2t"}, 0, 500, "float32"),  # the zero column comes after
    ({"kind": "sinusoidal", "dim": 8, "scale": [1, 2, 3, 4, 5, 6, 7, 8]}, 0, 500, "float32"),  # a second pass
    ({"kind": "alibi", "n_heads": 12}, 0, 2000, "float32"),
]


def fill_block_then_crc(table: TableSpec, lo: int, hi: int, seed: int) -> tuple[bytes, int]:
    block = np.empty((hi - lo, table.width), table.np_dtype)
    table.fill_block(block, lo, hi)
    return block.tobytes(), checksum.crc32c(block, seed, native=False)


@needs_native
@pytest.mark.parametrize("spec, start, stop, dtype", ONE_PASS)
def test_one_pass_gives_fill_blocks_rows_and_their_crc32c(spec, start, stop, dtype):
    table = table_from(spec, start, stop, dtype)
    for lo, hi, seed in ((0, table.rows, 0), (17, 400, 0x1234_5678), (table.rows - 1, table.rows, 99)):
        block = np.full((hi - lo, table.width), np.nan, table.np_dtype)
        crc = table.fill_block_crc32c(block, lo, hi, seed)
        assert (block.tobytes(), crc) == fill_block_then_crc(table, lo, hi, seed)


@pytest.mark.parametrize("spec, start, stop, dtype", TWO_PASSES)
def test_tables_whose_bytes_are_not_the_kernels_output_write_nothing(spec, start, stop, dtype):
    table = table_from(spec, start, stop, dtype)
    block = np.full((100, table.width), np.nan, table.np_dtype)
    assert table.fill_block_crc32c(block, 0, 100, 0) is None
    assert np.isnan(block).all()
    crc = segment.fill_checksummed(table, block, 0, 100, checksum.CRC32C, 5)
    assert (block.tobytes(), crc) == fill_block_then_crc(table, 0, 100, 5)


def test_without_the_native_library_the_writer_computes_then_checksums(monkeypatch):
    table = table_from(*ONE_PASS[0])
    block = np.full((300, table.width), np.nan, table.np_dtype)
    monkeypatch.setattr(native, "ACTIVE", None)
    assert table.fill_block_crc32c(block, 0, 300, 0) is None and np.isnan(block).all()
    crc = segment.fill_checksummed(table, block, 0, 300, checksum.CRC32C, 0)
    assert (block.tobytes(), crc) == fill_block_then_crc(table, 0, 300, 0)


def test_crc32_segments_take_the_two_pass_path(monkeypatch):
    """CRC-32 (zlib) has no one-pass kernel: fill_checksummed computes, then checksums."""
    table = table_from(*ONE_PASS[0])
    monkeypatch.setattr(TableSpec, "fill_block_crc32c", lambda *args: pytest.fail("not for CRC-32"))
    block = np.empty((300, table.width), table.np_dtype)
    crc = segment.fill_checksummed(table, block, 0, 300, checksum.CRC32, 3)
    expected = np.empty_like(block)
    table.fill_block(expected, 0, 300)
    assert block.tobytes() == expected.tobytes() and crc == checksum.compute(checksum.CRC32, expected, 3)


@needs_native
@pytest.mark.parametrize("spec, start, stop, dtype", [ONE_PASS[0], ONE_PASS[4]])
def test_segments_are_the_same_files_with_and_without_one_pass(shm_root, monkeypatch, spec, start, stop, dtype):
    """Cold and prepared publishes, each with the one pass and with it disabled: the data and
    its checksum agree byte for byte, and every segment verifies."""
    table = table_from(spec, start, stop, dtype)
    monkeypatch.setattr(prepared, "PIECE_BYTES_PER_THREAD", 8192)  # several pieces, the CRC chained
    monkeypatch.setattr(segment, "BLOCK_BYTES", 8192)
    one_pass = TableSpec.fill_block_crc32c
    files = {}
    with TableStore(shm_root) as store:
        for fused in (True, False):
            monkeypatch.setattr(TableSpec, "fill_block_crc32c", one_pass if fused else lambda *args: None)
            for how in ("cold", "prepared"):
                if how == "prepared":
                    store.prepare(table)
                name = f"{how}-{'one' if fused else 'two'}"
                store.publish(name, table)
                with attach(name, root=shm_root, verify=True) as tbl:
                    data = tbl.array.tobytes()
                    files[name] = (data, checksum.crc32c(data, native=False))
    assert len(set(files.values())) == 1, sorted(files)
