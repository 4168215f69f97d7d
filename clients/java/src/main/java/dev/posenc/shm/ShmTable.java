package dev.posenc.shm;

import dev.posenc.PosencException;
import dev.posenc.client.Json;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * One generation of a published table, mapped read-only and validated
 * ({@link ShmDirectory#attach}). Rows are read in place: {@link #floatRow}, {@link #doubleRow} and
 * {@link #row} return views into the mapping, never a copy of the table.
 *
 * <p>A segment is immutable once READY, and a writer that replaces the table publishes a new
 * file and unlinks the old one: this mapping stays valid (and its rows unchanged) for as long as
 * the object is reachable, so no row read here is ever torn. {@link #isCurrent()} says whether
 * a newer generation has been published, {@link #refresh()} attaches it. The mapping is released
 * by the garbage collector (Java 17 has no explicit unmap). Thread-safe.
 */
public final class ShmTable {
    private final ShmDirectory directory;
    private final ByteBuffer file;
    private final ByteBuffer data;
    private final int dtype;
    private final long rows;
    private final long width;
    private final long start;
    private final long generation;
    private final String name;
    private final int rowBytes;

    ShmTable(ShmDirectory directory, ByteBuffer file) {
        this.directory = directory;
        this.file = file;
        this.dtype = file.getInt(24);
        this.rows = file.getLong(32);
        this.width = file.getLong(40);
        this.start = file.getLong(48);
        this.generation = file.getLong(72);
        byte[] nameField = new byte[64];
        file.get(112, nameField);
        int n = 0;
        while (n < 64 && nameField[n] != 0) {
            n++;
        }
        this.name = new String(nameField, 0, n, StandardCharsets.US_ASCII);
        this.data = file.slice((int) file.getLong(56), (int) file.getLong(64)).order(ByteOrder.LITTLE_ENDIAN);
        this.rowBytes = dtype == Segment.COMPUTED ? 0 : (int) (width * file.getInt(28));
    }

    public String name() {
        return name;
    }

    public long generation() {
        return generation;
    }

    /** "float32", "float64", or "computed" (a named computed encoding: no rows stored). */
    public String dtype() {
        return dtype == Segment.FLOAT32 ? "float32" : dtype == Segment.FLOAT64 ? "float64" : "computed";
    }

    public boolean isComputed() {
        return dtype == Segment.COMPUTED;
    }

    /** Number of positions: stop - start. */
    public long rows() {
        return rows;
    }

    /** Values per row. */
    public int width() {
        return (int) width;
    }

    /** Position of row 0. */
    public long start() {
        return start;
    }

    /** One past the last position. */
    public long stop() {
        return start + rows;
    }

    public long createdNs() {
        return file.getLong(80);
    }

    public long writerPid() {
        return Integer.toUnsignedLong(file.getInt(88));
    }

    /** 16 lower-case hex digits: the SHA-256 of the spec JSON as stored. */
    public String specHash() {
        byte[] hash = new byte[16];
        file.get(96, hash);
        return new String(hash, StandardCharsets.US_ASCII);
    }

    /** The spec JSON as stored (posenc writes it canonical: sorted keys, no spaces). */
    public String specJson() {
        byte[] spec = new byte[file.getInt(92)];
        file.get(Segment.HEADER_SIZE, spec);
        return new String(spec, StandardCharsets.UTF_8);
    }

    /** The spec JSON parsed (encoding, start, stop, dtype, seq_len, computed). */
    @SuppressWarnings("unchecked")
    public Map<String, Object> spec() {
        return (Map<String, Object>) Json.parse(specJson());
    }

    /** True when {@code position} has a row here: start <= position < stop. */
    public boolean contains(long position) {
        return Long.compareUnsigned(position - start, rows) < 0; // as posenc_shm_row: no overflow at the ends
    }

    /** Every row, row-major, as little-endian bytes: a read-only view of the whole mapped data. */
    public ByteBuffer data() {
        if (dtype == Segment.COMPUTED) {
            throw new PosencException("table", "'" + name + "' is a named computed encoding: it stores no rows");
        }
        return data.asReadOnlyBuffer().order(ByteOrder.LITTLE_ENDIAN);
    }

    /** The row of {@code position} as little-endian bytes: a view into the mapping. */
    public ByteBuffer row(long position) {
        return data.slice(offset(position), rowBytes).order(ByteOrder.LITTLE_ENDIAN);
    }

    /** The row of {@code position} of a float32 table: a view into the mapping. */
    public FloatBuffer floatRow(long position) {
        requireDtype(Segment.FLOAT32);
        return row(position).asFloatBuffer();
    }

    /** The row of {@code position} of a float64 table: a view into the mapping. */
    public DoubleBuffer doubleRow(long position) {
        requireDtype(Segment.FLOAT64);
        return row(position).asDoubleBuffer();
    }

    /** Value {@code column} of the row of {@code position}, as a double (exact for both dtypes). */
    public double get(long position, int column) {
        if (column < 0 || column >= width) {
            throw new PosencException("column", "column " + column + " is outside the table's width " + width);
        }
        int at = offset(position);
        return dtype == Segment.FLOAT32 ? data.getFloat(at + 4 * column) : data.getDouble(at + 8 * column);
    }

    /** The data checksum's algorithm: "crc32c" (what posenc writes) or "crc32" (zlib's, older segments). */
    public String checksumAlgorithm() {
        return file.getInt(176) == Segment.CRC32_C ? "crc32c" : "crc32";
    }

    /** Recompute the data checksum (a pass over the table); a CHECKSUM ShmException if it differs. */
    public void verify() {
        if (Segment.dataChecksum(file.getInt(176), data) != file.getInt(20)) {
            throw new ShmException(ShmException.Code.CHECKSUM, "segment", directory.path() + "/posenc." + name + "."
                    + generation + ": data checksum mismatch: the table was modified or corrupted");
        }
    }

    /** True while the registry still names this generation (false once it was replaced or removed). */
    public boolean isCurrent() {
        return directory.generation(name) == generation;
    }

    /** This table if it is current, else the generation the registry names now (attached and verified). */
    public ShmTable refresh() {
        return isCurrent() ? this : directory.attach(name);
    }

    /** A computed table's spec block (docs/shm-format.md, "Computed tables"): what posenc-server computes from. */
    public ByteBuffer specBlock() {
        if (dtype != Segment.COMPUTED) {
            throw new PosencException("table", "'" + name + "' stores rows; it has no spec block");
        }
        return data.asReadOnlyBuffer().order(ByteOrder.LITTLE_ENDIAN);
    }

    private int offset(long position) {
        if (dtype == Segment.COMPUTED) {
            throw new PosencException("positions", "'" + name + "' is a named computed encoding: it stores no rows "
                    + "to map; ask posenc-server for them (ENCODE_TABLE)");
        }
        if (!contains(position)) {
            throw new PosencException("positions", "position " + position + " is outside the table's positions ["
                    + start + ", " + stop() + ")");
        }
        return (int) ((position - start) * rowBytes);
    }

    private void requireDtype(int wanted) {
        if (dtype != wanted) {
            throw new PosencException("dtype", "'" + name + "' holds " + dtype() + " rows");
        }
    }
}
