package dev.posenc.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.posenc.PosencException;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.zip.CRC32;
import java.util.zip.CRC32C;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The reader on files written here by the rules of docs/shm-format.md (a registry and float32
 * segments); tests/test_clients.py's shm-read scenario runs it on the Python writer's files and
 * every corruption of tests/shm_support.py.
 */
class ShmTableTest {
    @TempDir
    Path dir;

    /** A READY float32 segment of `rows` x `width` values 0, 1, 2, ... (times `scale`) starting at `start`. */
    private static byte[] segment(String name, long generation, long start, int rows, int width, float scale)
            throws Exception {
        byte[] spec = ("{\"name\":\"" + name + "\",\"scale\":" + scale + "}").getBytes(StandardCharsets.UTF_8);
        int dataOffset = (256 + spec.length + 63) / 64 * 64;
        int nbytes = rows * width * 4;
        ByteBuffer b = ByteBuffer.allocate(dataOffset + nbytes).order(ByteOrder.LITTLE_ENDIAN);
        b.put("POSENCTB".getBytes(StandardCharsets.US_ASCII)).putInt(1).putInt(0).putInt(0).putInt(0);
        b.putInt(1).putInt(4).putLong(rows).putLong(width).putLong(start).putLong(dataOffset).putLong(nbytes);
        b.putLong(generation).putLong(1_700_000_000_000_000_000L).putInt(4242).putInt(spec.length);
        byte[] sha = MessageDigest.getInstance("SHA-256").digest(spec);
        StringBuilder hex = new StringBuilder();
        for (int i = 0; i < 8; i++) {
            hex.append(String.format("%02x", sha[i]));
        }
        b.put(hex.toString().getBytes(StandardCharsets.US_ASCII));
        b.put(Arrays.copyOf(name.getBytes(StandardCharsets.US_ASCII), 64)).putInt(1); // checksum: CRC-32C
        b.position(256);
        b.put(spec);
        for (int i = 0; i < rows * width; i++) {
            b.putFloat(dataOffset + 4 * i, i * scale);
        }
        CRC32C data = new CRC32C();
        data.update(b.array(), dataOffset, nbytes);
        b.putInt(20, (int) data.getValue());
        CRC32 header = new CRC32();
        header.update(b.array(), 0, 256);
        header.update(spec);
        b.putInt(16, (int) header.getValue());
        b.putInt(12, 2); // READY, last
        return b.array();
    }

    private void publish(String name, long generation, long start, int rows, int width, float scale) throws Exception {
        Files.write(dir.resolve("posenc." + name + "." + generation), segment(name, generation, start, rows, width,
                scale));
        setSlot(0, name, generation, 2);
    }

    /** Registry slot `slot` naming `name` at `generation`, its seqlock counter `seq`. */
    private void setSlot(int slot, String name, long generation, long seq) throws IOException {
        Path registry = dir.resolve("posenc-registry");
        ByteBuffer r;
        if (Files.exists(registry)) {
            r = ByteBuffer.wrap(Files.readAllBytes(registry)).order(ByteOrder.LITTLE_ENDIAN);
        } else {
            r = ByteBuffer.allocate(Registry.SIZE).order(ByteOrder.LITTLE_ENDIAN);
            r.put("POSENCRG".getBytes(StandardCharsets.US_ASCII)).putInt(1).putInt(1024).putInt(128);
        }
        int at = 128 + 128 * slot;
        r.putLong(at, seq).putLong(at + 8, generation);
        r.position(at + 16);
        r.put(Arrays.copyOf(name.getBytes(StandardCharsets.US_ASCII), 64));
        Files.write(registry, r.array());
    }

    @Test
    void rowsAreViewsIntoTheMappedTable() throws Exception {
        publish("t", 5, -1, 3, 2, 1.0f);
        ShmTable t = new ShmDirectory(dir).attach("t");
        assertEquals("t", t.name());
        assertEquals(5, t.generation());
        assertEquals("float32", t.dtype());
        assertEquals(-1, t.start());
        assertEquals(2, t.stop());
        assertEquals(3, t.rows());
        assertEquals(2, t.width());
        assertEquals("crc32c", t.checksumAlgorithm());
        assertEquals(4242, t.writerPid());
        FloatBuffer row = t.floatRow(1);
        assertEquals(4.0f, row.get(0));
        assertEquals(5.0f, row.get(1));
        assertEquals(2, row.remaining());
        assertTrue(row.isDirect()); // a view of the mapping, not a copy
        assertEquals(1.0, t.get(-1, 1));
        assertEquals(24, t.data().remaining());
        assertTrue(t.spec().containsKey("scale"));
        assertFalse(t.contains(2));
        assertFalse(t.contains(Long.MIN_VALUE));
        PosencException outside = assertThrows(PosencException.class, () -> t.floatRow(2));
        assertEquals("positions", outside.field());
        assertTrue(outside.detail().contains("outside"), outside.detail());
        assertThrows(PosencException.class, () -> t.doubleRow(0));
        t.verify();
    }

    @Test
    void aNewGenerationIsSeenAndTheOldMappingStaysReadable() throws Exception {
        publish("t", 5, 0, 4, 1, 1.0f);
        ShmDirectory d = new ShmDirectory(dir);
        ShmTable old = d.attach("t");
        assertTrue(old.isCurrent());
        assertSame(old, old.refresh());
        publish("t", 6, 0, 4, 1, -1.0f);
        Files.delete(dir.resolve("posenc.t.5")); // the writer unlinks the generation it replaced
        assertFalse(old.isCurrent());
        ShmTable fresh = old.refresh();
        assertEquals(6, fresh.generation());
        assertEquals(-3.0f, fresh.floatRow(3).get(0));
        assertEquals(3.0f, old.floatRow(3).get(0));
        assertEquals(6, d.generation("t"));
    }

    @Test
    void aRegistryCreatedAgainIsMappedAgain() throws Exception {
        publish("t", 1, 0, 1, 1, 1.0f);
        ShmDirectory d = new ShmDirectory(dir);
        assertEquals(1, d.attach("t").generation());
        Files.delete(dir.resolve("posenc-registry")); // an operator deleted it; a writer made a new one
        publish("t", 2, 0, 1, 1, 1.0f);
        assertEquals(2, d.generation("t"));
        assertEquals(2, d.attach("t").generation());
    }

    @Test
    void aChangedDataByteFailsVerificationOnly() throws Exception {
        publish("t", 1, 0, 2, 2, 1.0f);
        Path file = dir.resolve("posenc.t.1");
        byte[] bytes = Files.readAllBytes(file);
        bytes[bytes.length - 1] ^= 1;
        Files.write(file, bytes);
        ShmException e = assertThrows(ShmException.class, () -> new ShmDirectory(dir).attach("t"));
        assertEquals(ShmException.Code.CHECKSUM, e.code());
        assertEquals("segment", e.field());
        assertTrue(e.detail().contains("data checksum mismatch"), e.detail());
        ShmTable unverified = new ShmDirectory(dir).attach("t", false);
        assertThrows(ShmException.class, unverified::verify);
    }

    @Test
    void aHeaderFieldChangedWithoutItsCrcIsRefused() throws Exception {
        publish("t", 1, 0, 2, 2, 1.0f);
        Path file = dir.resolve("posenc.t.1");
        byte[] bytes = Files.readAllBytes(file);
        bytes[48] ^= 1; // start
        Files.write(file, bytes);
        ShmException e = assertThrows(ShmException.class, () -> new ShmDirectory(dir).attach("t"));
        assertEquals(ShmException.Code.HEADER, e.code());
        assertTrue(e.detail().endsWith("header checksum mismatch"), e.detail());
    }

    @Test
    void namesAndMissingTablesAreRefusedByName() throws Exception {
        ShmDirectory d = new ShmDirectory(dir);
        ShmException noRegistry = assertThrows(ShmException.class, () -> d.attach("t"));
        assertEquals(ShmException.Code.NOT_FOUND, noRegistry.code());
        assertTrue(noRegistry.detail().contains("no table named 't'"), noRegistry.detail());
        assertEquals(0, d.generation("t"));
        publish("t", 1, 0, 1, 1, 1.0f);
        ShmException absent = assertThrows(ShmException.class, () -> d.attach("u"));
        assertEquals("name", absent.field());
        assertTrue(absent.detail().endsWith("no table named 'u'"), absent.detail());
        for (String bad : new String[] {"", ".", "a/b", "a..b", "x".repeat(65), "sin\u00e9"}) {
            assertEquals(ShmException.Code.BAD_NAME, assertThrows(ShmException.class, () -> d.attach(bad)).code());
        }
        Files.delete(dir.resolve("posenc.t.1"));
        ShmException gone = assertThrows(ShmException.class, () -> d.attach("t"));
        assertTrue(gone.detail().contains("the registry names it but the file is gone"), gone.detail());
    }

    @Test
    void aSlotLeftOddIsReportedBusy() throws Exception {
        publish("t", 1, 0, 1, 1, 1.0f);
        setSlot(0, "t", 1, 3); // a writer died between its two seq stores
        ShmException e = assertThrows(ShmException.class, () -> new ShmDirectory(dir).attach("t"));
        assertEquals(ShmException.Code.BUSY, e.code());
        assertTrue(e.detail().contains("stayed busy"), e.detail());
    }
}
