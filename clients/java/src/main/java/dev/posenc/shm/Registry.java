package dev.posenc.shm;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;

/**
 * The registry file, mapped read-only (docs/shm-format.md, "Registry layout" and "Reading the
 * registry"): a 128-byte header, then 1024 slots of 128 bytes, each naming a table's current
 * generation under a seqlock. Readers never lock or write it.
 */
final class Registry {
    static final String FILE = "posenc-registry";
    static final int HEADER = 128;
    static final int CAPACITY = 1024;
    static final int SLOT = 128;
    static final int SIZE = HEADER + CAPACITY * SLOT;
    private static final byte[] MAGIC = "POSENCRG".getBytes(StandardCharsets.US_ASCII);
    /** A slot left odd this long means its writer died mid-update (the doc's 2 s). */
    private static final long BUSY_NANOS = 2_000_000_000L;
    /**
     * Little-endian u64 loads with memory-ordering modes, on the mapping: the seqlock's first load
     * is an acquire, its re-check comes after an acquire fence (x86-64 needs only that the loads
     * stay in order; ARM64 needs the barriers).
     */
    private static final VarHandle U64 = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

    private final Path path;
    private final ByteBuffer map;

    private Registry(Path path, ByteBuffer map) {
        this.path = path;
        this.map = map;
    }

    /**
     * The registry of {@code dir} for a lookup of {@code name}, or a NOT_FOUND ShmException when
     * there is none yet (no file, or one still being created).
     */
    static Registry open(Path dir, String name) {
        Path path = dir.resolve(FILE);
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ)) {
            long size = ch.size();
            if (size < SIZE) { // being created (its magic is stored last), unless it has a magic
                ByteBuffer magic = ByteBuffer.allocate(8);
                ch.read(magic, 0);
                if (!allZero(magic.array(), 0, magic.position())) {
                    throw new ShmException(ShmException.Code.REGISTRY, "registry", path + ": truncated registry ("
                            + size + " bytes, expected " + SIZE + ")");
                }
                throw notInitialised(path, name);
            }
            MappedByteBuffer map = ch.map(FileChannel.MapMode.READ_ONLY, 0, SIZE);
            map.order(ByteOrder.LITTLE_ENDIAN);
            byte[] magic = new byte[8];
            map.get(0, magic);
            if (allZero(magic, 0, 8)) {
                throw notInitialised(path, name);
            }
            if (!Arrays.equals(magic, MAGIC)) {
                throw new ShmException(ShmException.Code.REGISTRY, "registry", path + ": bad magic: corrupted registry");
            }
            if (map.getInt(8) != 1 || map.getInt(12) != CAPACITY || map.getInt(16) != SLOT) {
                throw new ShmException(ShmException.Code.REGISTRY, "registry", path + ": unknown registry layout");
            }
            return new Registry(path, map);
        } catch (NoSuchFileException e) {
            throw new ShmException(ShmException.Code.NOT_FOUND, "name", path + ": no registry (no table named '"
                    + name + "')");
        } catch (IOException e) {
            throw new ShmException(ShmException.Code.OS, "registry", path + ": cannot open: " + e.getMessage(), e);
        }
    }

    Path path() {
        return path;
    }

    /**
     * The current generation of {@code name}: the first slot (0..1023) whose 64 name bytes are the
     * NUL-padded name and whose generation is not 0; 0 when there is none.
     */
    long generation(String name) {
        byte[] want = Arrays.copyOf(name.getBytes(StandardCharsets.US_ASCII), 64);
        byte[] got = new byte[64];
        for (int s = 0; s < CAPACITY; s++) {
            int slot = HEADER + s * SLOT;
            long gen = readSlot(slot, got);
            if (gen != 0 && Arrays.equals(want, got)) {
                if (gen < 0) { // above 2^63 - 1
                    throw new ShmException(ShmException.Code.REGISTRY, "registry", path + ": corrupted slot: '"
                            + name + "' has generation " + Long.toUnsignedString(gen));
                }
                return gen;
            }
        }
        return 0;
    }

    /** Seqlock read of one slot: its generation, and its name bytes into {@code name}. */
    private long readSlot(int slot, byte[] name) {
        long busySince = 0;
        for (int spin = 0;; spin++) {
            long before = (long) U64.getAcquire(map, slot);
            if ((before & 1) == 0) {
                long gen = map.getLong(slot + 8);
                map.get(slot + 16, name);
                VarHandle.acquireFence();
                if ((long) U64.getOpaque(map, slot) == before) {
                    return gen;
                }
            }
            if (spin < 1000) {
                Thread.onSpinWait();
                continue;
            }
            long now = System.nanoTime();
            if (busySince == 0) {
                busySince = now;
            } else if (now - busySince > BUSY_NANOS) {
                throw new ShmException(ShmException.Code.BUSY, "registry", path
                        + ": a slot stayed busy (a writer is stuck mid-update)");
            }
            sleepAMillisecond();
        }
    }

    private static void sleepAMillisecond() {
        try {
            Thread.sleep(1);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ShmException(ShmException.Code.BUSY, "registry", "interrupted while a registry slot was busy");
        }
    }

    private static ShmException notInitialised(Path path, String name) {
        return new ShmException(ShmException.Code.NOT_FOUND, "name", path
                + ": registry not initialised yet (no table named '" + name + "')");
    }

    static boolean allZero(byte[] b, int from, int to) {
        for (int i = from; i < to; i++) {
            if (b[i] != 0) {
                return false;
            }
        }
        return true;
    }
}
