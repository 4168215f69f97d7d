"""A third reader, written from docs/shm-format.md alone: `DocReader` below uses only the
standard library (struct, zlib) and numpy for the final view, and none of posenc. If the
document is complete, it reads every table posenc publishes exactly as `posenc.shm.attach`
does and refuses every damaged segment with the words the document gives."""

import hashlib
import json
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from posenc.shm import ShmError, TableStore, attach
from shm_support import CORRUPTIONS, header_of, poke, rewrite_header, rewrite_spec, run_c_reader, table_from

pytest_plugins = ["shm_support"]


# ---- the reader (from the document only) ----------------------------------------------------

class Refused(Exception):
    pass


def _crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C = _crc32c_table()


def crc32c(data: bytes, crc: int = 0) -> int:
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


HEADER = struct.Struct("<8sIIIIIIQQqQQQqII16s64sI")  # through `checksum` at 176; 180..255 reserved
NAME_CHARS = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def valid_name(name: bytes) -> bool:
    return (1 <= len(name) <= 64 and set(name) <= NAME_CHARS and b".." not in name and name != b"."
            and b"/" not in name)


def spec_width(encoding: dict) -> int:
    """*The spec JSON*: the width of a row from the encoding, by kind."""
    if encoding["kind"] == "rope":
        rotary_dim = int(encoding["head_dim"] * encoding.get("partial_rotary_factor", 1.0))
        scaling = encoding.get("scaling") or {}
        proportional = scaling.get("rope_type", scaling.get("type")) == "proportional"
        return 2 * (encoding["head_dim"] // 2 if proportional else (rotary_dim + 1) // 2)
    return encoding["n_heads"] if encoding["kind"] == "alibi" else encoding["dim"]


class DocReader:
    def __init__(self, root: Path):
        self.root = Path(root)

    def generation(self, name: str) -> int | None:
        """*Reading the registry*: None for "no table"."""
        path = self.root / "posenc-registry"
        if not path.exists():
            return None
        raw = path.read_bytes()
        if len(raw) < 131200:
            if any(raw[:8]):
                raise Refused(f"{path}: truncated registry")
            return None
        if raw[:8] == bytes(8):
            return None
        if raw[:8] != b"POSENCRG":
            raise Refused(f"{path}: bad magic: corrupted registry")
        if struct.unpack_from("<III", raw, 8) != (1, 1024, 128):
            raise Refused(f"{path}: unknown registry layout")
        wanted = name.encode().ljust(64, b"\0")
        for slot in range(1024):
            seq, generation = struct.unpack_from("<QQ", raw, 128 + 128 * slot)
            if seq & 1:
                raise Refused(f"{path}: a slot stayed busy")  # a copy of the file cannot change: no retry
            if generation and raw[128 + 128 * slot + 16:128 + 128 * slot + 80] == wanted:
                if generation > 2**63 - 1:
                    raise Refused(f"{path}: corrupted slot")
                return generation
        return None

    def validate(self, path: Path, verify: bool = True) -> tuple[dict, bytes]:
        """*Validating a segment*, steps 1-10 in order (step 9 as far as *The spec JSON* lets a
        reader check without knowing the encodings: the hash of the bytes, and the shape)."""
        raw = path.read_bytes()  # a copy: the acquire load of `state` is the read of this copy
        if len(raw) < 256:
            raise Refused(f"{path}: truncated")
        (magic, version, state, header_crc, data_crc, dtype, itemsize, rows, width, start, data_offset,
         data_nbytes, generation, _, _, spec_len, spec_hash, name, checksum) = HEADER.unpack_from(raw)
        if magic != b"POSENCTB":
            raise Refused(f"{path}: bad magic")
        if version != 1:
            raise Refused(f"{path}: unknown format version {version}")
        name_bytes, _, padding = name.partition(b"\0")
        problems = [
            ((dtype, itemsize) not in ((1, 4), (2, 8), (3, 1)), "unknown dtype code or itemsize"),
            (rows < 1 or width < 1, "rows and width must be >= 1"),
            (dtype == 3 and (data_nbytes < 64 or data_nbytes % 8),
             "a computed table's data_nbytes is not 32 + an inline spec block"),
            (dtype != 3 and rows * width * itemsize != data_nbytes, "data_nbytes is not rows * width * itemsize"),
            (start + rows > 2**63 - 1, "start + rows overflows int64"),
            (spec_len < 1 or data_offset != -(-(256 + spec_len) // 64) * 64, "data_offset does not follow spec_len"),
            (not 1 <= generation <= 2**63 - 1, "generation outside 1..2^63-1"),
            (checksum not in (0, 1), "unknown checksum algorithm"),
            (not set(spec_hash) <= set(b"0123456789abcdef"), "spec_hash is not 16 lowercase hex digits"),
            (not valid_name(name_bytes) or any(padding), "name is not a valid NUL-padded table name"),
            (any(raw[180:256]), "reserved bytes are not zero"),
        ]
        for failed, what in problems:
            if failed:
                raise Refused(f"{path}: inconsistent header: {what}")
        if state != 2:
            raise Refused(f"{path}: not READY (state {({0: 'EMPTY', 1: 'BUILDING'}).get(state, state)})")
        if len(raw) < data_offset + data_nbytes:
            raise Refused(f"{path}: truncated")
        if len(raw) > data_offset + data_nbytes:
            raise Refused(f"{path}: trailing bytes")
        covered = raw[:12] + bytes(8) + raw[20:256]
        if zlib.crc32(raw[256:256 + spec_len], zlib.crc32(covered)) != header_crc:
            raise Refused(f"{path}: header checksum mismatch")
        if any(raw[256 + spec_len:data_offset]):
            raise Refused(f"{path}: non-zero padding after the spec JSON")
        spec_bytes = raw[256:256 + spec_len]
        if hashlib.sha256(spec_bytes).hexdigest()[:16].encode() != spec_hash:
            raise Refused(f"{path}: spec JSON does not match its hash")
        try:
            spec = json.loads(spec_bytes.decode("utf-8"))
            shape = (spec["stop"] - spec["start"], spec_width(spec["encoding"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise Refused(f"{path}: unusable spec JSON ({exc})") from None
        computed = spec.get("computed") is True  # *Computed tables*: the header's dtype is then 3
        stored = 3 if computed else {"float32": 1, "float64": 2}.get(spec.get("dtype", "float32"))
        if shape != (rows, width) or spec["start"] != start or stored != dtype:
            raise Refused(f"{path}: header shape disagrees with its spec")
        data = raw[data_offset:]
        if verify and (crc32c(data) if checksum == 1 else zlib.crc32(data)) != data_crc:
            raise Refused(f"{path}: data checksum mismatch")
        fields = {"rows": rows, "width": width, "start": start, "dtype": {1: "<f4", 2: "<f8", 3: "u1"}[dtype],
                  "generation": generation, "name": name_bytes.decode(), "spec_hash": spec_hash.decode(),
                  "spec": raw[256:256 + spec_len].decode()}
        return fields, data

    def attach(self, name: str) -> tuple[dict, np.ndarray]:
        generation = self.generation(name)
        if generation is None:
            raise Refused(f"no table named {name!r}")
        fields, data = self.validate(self.root / f"posenc.{name}.{generation}")
        if (fields["name"], fields["generation"]) != (name, generation):
            raise Refused("header names another table or generation")
        if fields["dtype"] == "u1":  # a computed table: its spec block, no rows
            return fields, np.frombuffer(data, np.uint8)
        return fields, np.frombuffer(data, fields["dtype"]).reshape(fields["rows"], fields["width"])


# ---- the checks ---------------------------------------------------------------------------

TABLES = [
    ({"kind": "sinusoidal", "dim": 24, "layout": "t2t"}, -40, 300, "float64", "crc32c"),
    ({"kind": "rope", "head_dim": 32, "scaling": {"rope_type": "linear", "factor": 2.0}}, 0, 257, "float32", "crc32"),
    ({"kind": "alibi", "n_heads": 12}, 0, 500, "float32", "crc32c"),
    ({"kind": "rope", "head_dim": 96, "partial_rotary_factor": 0.4}, 0, 64, "float32", "crc32c"),  # rotary dim 38
    ({"kind": "rope", "head_dim": 64, "partial_rotary_factor": 0.3}, 0, 64, "float64", "crc32c"),  # rotary dim 19
    ({"kind": "rope", "head_dim": 64, "partial_rotary_factor": 0.25, "scaling": {"rope_type": "proportional"}},
     5, 70, "float32", "crc32c"),
]


@pytest.mark.parametrize("encoding, start, stop, dtype, checksum", TABLES)
def test_the_doc_reader_reads_what_posenc_reads(shm_root, encoding, start, stop, dtype, checksum):
    table = table_from(encoding, start, stop, dtype)
    with TableStore(shm_root, checksum=checksum) as store:
        store.publish("t", table)
        store.publish("t", table)  # a second generation: the registry, not the first file, decides
        fields, rows = DocReader(shm_root).attach("t")
        with attach("t", root=shm_root) as tbl:
            np.testing.assert_array_equal(rows, tbl.array)  # bit-exact
            assert (fields["start"], fields["rows"], fields["generation"]) == (tbl.start, table.rows, tbl.generation)
            assert fields["spec"] == table.canonical_json and fields["spec_hash"] == table.hash


def test_the_doc_reader_reads_a_computed_table_as_the_doc_lays_it_out(shm_root):
    """*Computed tables*: dtype 3, the header's rows and width those of the positions it serves, the
    data a spec block of 32 bytes (offset, default dtype, zeros) then the inline spec."""
    from posenc.tables import TableSpec

    table = TableSpec.from_dict({"encoding": {"kind": "sinusoidal", "dim": 9, "layout": "t2t", "offset": 2},
                                 "computed": True, "start": 0, "stop": 1 << 40, "dtype": "float64"})
    with TableStore(shm_root) as store:
        store.publish("c", table)
        fields, block = DocReader(shm_root).attach("c")
        assert (fields["rows"], fields["width"], fields["start"]) == (1 << 40, 9, 0)
        offset, default_dtype = struct.unpack_from("<qI", block)
        n_freq, row_width = struct.unpack_from("<II", block, 32)
        assert (offset, default_dtype, any(block[12:32])) == (2, 3, False)  # float64: wire code 3
        assert (n_freq, row_width, len(block)) == (4, 9, 32 + 32 + 8 * 4)
        assert fields["spec"] == table.canonical_json


@pytest.mark.parametrize("case, corrupt, phrase, code", CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_the_doc_reader_refuses_what_posenc_refuses_with_the_same_words(shm_store, shm_root, case, corrupt, phrase,
                                                                        code):
    shm_store.publish("t", table_from({"kind": "sinusoidal", "dim": 16}, 0, 512))
    path = shm_root / "posenc.t.1"
    corrupt(path, header_of(path))
    with pytest.raises(ShmError) as posenc_refusal:
        attach("t", root=shm_root)
    with pytest.raises(Refused) as doc_refusal:
        DocReader(shm_root).attach("t")
    assert phrase in str(posenc_refusal.value) and phrase in str(doc_refusal.value)


def test_the_doc_reader_and_posenc_pick_the_same_slot_and_agree_on_the_magic(shm_store, shm_root):
    shm_store.publish("t", table_from({"kind": "sinusoidal", "dim": 8}, 0, 10))
    second = shm_store.publish("u", table_from({"kind": "sinusoidal", "dim": 8}, 0, 11)).generation
    poke(shm_root / "posenc-registry", 128 + 128 * 9, struct.pack("<QQ64s", 0, second, b"t"))  # duplicate "t"
    assert DocReader(shm_root).generation("t") == attach("t", root=shm_root).generation == 1
    poke(shm_root / "posenc-registry", 0, bytes(8))
    assert DocReader(shm_root).generation("t") is None
    with pytest.raises(ShmError, match="no registry there yet"):
        attach("t", root=shm_root)
    poke(shm_root / "posenc-registry", 0, b"POSENCR?")
    with pytest.raises(Refused, match="corrupted registry"):
        DocReader(shm_root).generation("t")
    with pytest.raises(ShmError, match="corrupted registry"):
        attach("t", root=shm_root)
    poke(shm_root / "posenc-registry", 0, b"POSENCRG")
    rewrite_header(shm_root / "posenc.t.1", name=b"u")  # a header naming another table
    for reader in (lambda: DocReader(shm_root).attach("t"), lambda: attach("t", root=shm_root)):
        with pytest.raises((Refused, ShmError), match="header names another table or generation"):
            reader()


def test_the_spec_hash_is_over_the_stored_bytes_in_every_reader(shm_store, shm_root, shm_c_reader):
    """A valid spec stored with one extra space and the hash of exactly its bytes is accepted by
    posenc, the C header and the doc-only reader; the canonical form's hash over those bytes is
    refused by all three with the same words."""
    table = table_from({"kind": "sinusoidal", "dim": 16}, 0, 512)
    shm_store.publish("t", table)
    path = shm_root / "posenc.t.1"
    spaced = table.canonical_json.replace('"dim":16', '"dim": 16').encode()
    rewrite_spec(path, spaced)
    digest = hashlib.sha256(spaced).hexdigest()[:16]
    with attach("t", root=shm_root) as tbl:
        assert tbl.spec == table and header_of(path)["spec_hash"] == digest != table.hash
        expected = np.array(tbl.array)
    fields, rows = DocReader(shm_root).attach("t")
    assert fields["spec"] == spaced.decode() and fields["spec_hash"] == digest
    np.testing.assert_array_equal(rows, expected)
    status, lines = run_c_reader(shm_c_reader, "name", shm_root, "t", 1, 3)
    assert status == 0 and f"hash={digest} " in lines[0], lines
    rewrite_spec(path, spaced, spec_hash=table.hash)  # the re-serialised form's hash: not these bytes'
    with pytest.raises(ShmError, match="spec JSON does not match its hash"):
        attach("t", root=shm_root)
    with pytest.raises(Refused, match="spec JSON does not match its hash"):
        DocReader(shm_root).attach("t")
    status, lines = run_c_reader(shm_c_reader, "name", shm_root, "t", 1)
    assert status == 3 and "spec JSON does not match its hash" in lines[0], lines


def _doc_tables() -> dict[str, list[list[str]]]:
    """The key tables of docs/shm-format.md's *The spec JSON*: {heading line: first-column cells}."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "shm-format.md").read_text()
    section = text[text.index("### The spec JSON"):text.index("### Rows")]
    tables, heading, current = {}, "top", None
    for line in section.splitlines():
        if line.startswith("| key |") or line.startswith("| `rope_type` |"):
            current = tables.setdefault(heading if line.startswith("| key |") else "rope_type", [])
        elif line.startswith("| `") and current is not None:
            current.append([cell.strip() for cell in line.strip("|").split("|")])
        elif not line.startswith("|"):
            current = None
            if line.startswith("Encoding `kind` = "):
                heading = line.split("`")[3]
    return tables


def test_the_documented_spec_keys_are_exactly_the_ones_posenc_accepts():
    """*The spec JSON* is the normative list: every kind's keys, and each rope_type's scaling
    keys, are exactly those of posenc's spec classes (the doc cannot drift from the code)."""
    from posenc.encodings.rope_scaling import VARIANTS
    from posenc.tables import ENCODINGS

    tables = _doc_tables()
    keys = {heading: {row[0].strip("`") for row in rows} for heading, rows in tables.items() if heading != "rope_type"}
    assert keys.pop("top") == {"encoding", "start", "stop", "dtype", "seq_len", "computed"}
    assert keys == {kind: {cls.POSITIONAL, *cls.KEYWORDS} for kind, cls in ENCODINGS.items()}
    documented = {row[0].strip("`"): ({k.strip("` ") for k in row[1].split(",") if k.strip()},
                                      {k.strip("` ") for k in row[2].split(",") if k.strip()})
                  for row in tables["rope_type"]}
    assert documented == {name: (set(v.KEYS["required"]), set(v.KEYS["optional"])) for name, v in VARIANTS.items()}
