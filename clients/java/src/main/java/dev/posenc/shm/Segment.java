package dev.posenc.shm;

import dev.posenc.TableNames;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.zip.CRC32;
import java.util.zip.CRC32C;

/**
 * The checks of docs/shm-format.md "Validating a segment", in its order, on a mapped segment
 * file; the first that fails throws, with the doc's words. The spec JSON is checked against its
 * hash but not parsed (as the C reader; the Python reader also parses it).
 */
final class Segment {
    static final int HEADER_SIZE = 256;
    static final int RESERVED_AT = 180;
    static final int FLOAT32 = 1;
    static final int FLOAT64 = 2;
    static final int COMPUTED = 3;
    static final int CRC32_ZLIB = 0;
    static final int CRC32_C = 1;
    private static final int READY = 2;
    private static final byte[] MAGIC = "POSENCTB".getBytes(StandardCharsets.US_ASCII);
    /** The state word is loaded with acquire ordering, before anything else is read from the mapping. */
    private static final VarHandle U32 = MethodHandles.byteBufferViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);

    private Segment() {
    }

    /**
     * Validate the whole mapped file {@code b} (little-endian, position 0) named {@code file};
     * with {@code verify}, the data checksum too.
     */
    static void check(ByteBuffer b, String file, boolean verify) {
        long size = b.capacity();
        if (size < HEADER_SIZE) {
            throw fail(ShmException.Code.TRUNCATED, file + ": truncated: " + size + " bytes, a header needs " + HEADER_SIZE);
        }
        int state = (int) U32.getAcquire(b, 12);
        byte[] magic = new byte[8];
        b.get(0, magic);
        if (!Arrays.equals(magic, MAGIC)) {
            throw fail(ShmException.Code.MAGIC, file + ": bad magic: not a posenc table");
        }
        int version = b.getInt(8);
        if (version != 1) {
            throw fail(ShmException.Code.VERSION, file + ": unknown format version " + Integer.toUnsignedString(version)
                    + " (this reader knows 1)");
        }
        String bad = inconsistency(b);
        if (bad != null) {
            throw fail(ShmException.Code.HEADER, file + ": inconsistent header: " + bad);
        }
        if (state != READY) {
            String name = state == 1 ? "BUILDING" : state == 0 ? "EMPTY" : Integer.toUnsignedString(state);
            throw fail(ShmException.Code.STATE, file + ": not READY (state " + name
                    + "): being written, or its writer died");
        }
        long dataOffset = b.getLong(56);
        long dataNbytes = b.getLong(64);
        if (Long.compareUnsigned(dataNbytes, size) > 0 || Long.compareUnsigned(dataOffset, size - dataNbytes) > 0) {
            throw fail(ShmException.Code.TRUNCATED, file + ": truncated: " + size + " bytes, the header says "
                    + Long.toUnsignedString(dataOffset + dataNbytes));
        }
        if (size != dataOffset + dataNbytes) {
            throw fail(ShmException.Code.HEADER, file + ": trailing bytes: " + size + " bytes, the header says "
                    + (dataOffset + dataNbytes));
        }
        int specLen = b.getInt(92);
        byte[] header = new byte[HEADER_SIZE];
        b.get(0, header);
        Arrays.fill(header, 12, 20, (byte) 0); // state and header_crc are not covered
        CRC32 crc = new CRC32();
        crc.update(header);
        crc.update(b.slice(HEADER_SIZE, specLen));
        if ((int) crc.getValue() != b.getInt(16)) {
            throw fail(ShmException.Code.HEADER, file + ": header checksum mismatch");
        }
        byte[] padding = new byte[(int) dataOffset - HEADER_SIZE - specLen];
        b.get(HEADER_SIZE + specLen, padding);
        if (!Registry.allZero(padding, 0, padding.length)) {
            throw fail(ShmException.Code.HEADER, file + ": non-zero padding after the spec JSON");
        }
        String hash = new String(header, 96, 16, StandardCharsets.US_ASCII);
        if (!sha256Hex16(b.slice(HEADER_SIZE, specLen)).equals(hash)) {
            throw fail(ShmException.Code.HEADER, file + ": spec JSON does not match its hash " + hash);
        }
        if (verify && dataChecksum(b.getInt(176), b.slice((int) dataOffset, (int) dataNbytes)) != b.getInt(20)) {
            throw fail(ShmException.Code.CHECKSUM, file + ": data checksum mismatch: the table was modified or corrupted");
        }
    }

    /** The data checksum of {@code data} by algorithm {@code checksum} (0 CRC-32, 1 CRC-32C). */
    static int dataChecksum(int checksum, ByteBuffer data) {
        java.util.zip.Checksum c = checksum == CRC32_C ? new CRC32C() : new CRC32();
        c.update(data.duplicate());
        return (int) c.getValue();
    }

    /** Step 4's first failing consistency check, or null. */
    private static String inconsistency(ByteBuffer b) {
        int dtype = b.getInt(24);
        int itemsize = b.getInt(28);
        long rows = b.getLong(32);
        long width = b.getLong(40);
        long start = b.getLong(48);
        long dataOffset = b.getLong(56);
        long dataNbytes = b.getLong(64);
        long generation = b.getLong(72);
        long specLen = Integer.toUnsignedLong(b.getInt(92));
        int checksum = b.getInt(176);
        if (!((dtype == FLOAT32 && itemsize == 4) || (dtype == FLOAT64 && itemsize == 8)
                || (dtype == COMPUTED && itemsize == 1))) {
            return "unknown dtype code or itemsize";
        }
        if (rows == 0 || width == 0) {
            return "rows and width must be >= 1";
        }
        if (dtype == COMPUTED) {
            if (Long.compareUnsigned(dataNbytes, 64) < 0 || dataNbytes % 8 != 0) {
                return "a computed table's data_nbytes is not 32 + an inline spec block";
            }
        } else if (Long.compareUnsigned(width, Long.divideUnsigned(Long.divideUnsigned(-1L, itemsize), rows)) > 0
                || dataNbytes != rows * width * itemsize) {
            return "data_nbytes is not rows * width * itemsize";
        }
        if (rows < 0 || start > Long.MAX_VALUE - rows) {
            return "start + rows overflows int64";
        }
        if (specLen == 0 || dataOffset != (HEADER_SIZE + specLen + 63) / 64 * 64) {
            return "data_offset does not follow spec_len";
        }
        if (generation <= 0) {
            return "generation outside 1..2^63-1";
        }
        if (checksum != CRC32_ZLIB && checksum != CRC32_C) {
            return "unknown checksum algorithm";
        }
        for (int i = 96; i < 112; i++) {
            byte ch = b.get(i);
            if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) {
                return "spec_hash is not 16 lowercase hex digits";
            }
        }
        byte[] name = new byte[64];
        b.get(112, name);
        int n = 0;
        while (n < 64 && name[n] != 0) {
            n++;
        }
        if (!TableNames.valid(new String(name, 0, n, StandardCharsets.ISO_8859_1))
                || !Registry.allZero(name, n, 64)) {
            return "name is not a valid NUL-padded table name";
        }
        byte[] reserved = new byte[HEADER_SIZE - RESERVED_AT];
        b.get(RESERVED_AT, reserved);
        if (!Registry.allZero(reserved, 0, reserved.length)) {
            return "reserved bytes are not zero";
        }
        return null;
    }

    private static String sha256Hex16(ByteBuffer spec) {
        try {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            sha.update(spec.duplicate());
            byte[] digest = sha.digest();
            StringBuilder hex = new StringBuilder(16);
            for (int i = 0; i < 8; i++) {
                hex.append(String.format("%02x", digest[i]));
            }
            return hex.toString();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JDK has SHA-256", e);
        }
    }

    private static ShmException fail(ShmException.Code code, String detail) {
        return new ShmException(code, "segment", detail);
    }
}
