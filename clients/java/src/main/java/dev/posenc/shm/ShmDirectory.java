package dev.posenc.shm;

import dev.posenc.TableNames;

import java.io.IOException;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;

/**
 * A shm directory of posenc tables ({@code $POSENC_SHM_DIR}, else /dev/shm), read as
 * docs/shm-format.md says: find a name's current generation in the registry (seqlock), map
 * {@code posenc.<name>.<generation>} read-only, validate it, use its rows in place.
 *
 * <pre>{@code
 * ShmTable t = ShmDirectory.fromEnvironment().attach("sin128");   // validated, CRC-32C verified
 * FloatBuffer row = t.floatRow(4096);                             // a view into the mapping
 * if (!t.isCurrent()) t = t.refresh();                            // a new generation was published
 * }</pre>
 *
 * Nothing here writes, locks or unlinks a file. Thread-safe.
 */
public final class ShmDirectory {
    /** How many times attach follows a table replaced between reading the registry and opening it. */
    private static final int ATTEMPTS = 32;

    private final Path dir;
    /** The registry's mapping, and the identity (device, inode) of the file it maps. */
    private volatile Mapped registry;

    /** A registry mapping and the file key it was looked up under. */
    private static final class Mapped {
        final Registry registry;
        final Object key;

        Mapped(Registry registry, Object key) {
            this.registry = registry;
            this.key = key;
        }
    }

    public ShmDirectory(Path dir) {
        this.dir = dir;
    }

    /** {@code $POSENC_SHM_DIR} when set, else /dev/shm. */
    public static ShmDirectory fromEnvironment() {
        String env = System.getenv("POSENC_SHM_DIR");
        return new ShmDirectory(Paths.get(env != null && !env.isEmpty() ? env : "/dev/shm"));
    }

    public Path path() {
        return dir;
    }

    /** Attach the current generation of {@code name}, verifying the data checksum (one pass). */
    public ShmTable attach(String name) {
        return attach(name, true);
    }

    /**
     * Attach the current generation of {@code name}; {@code verify} = false skips the data
     * checksum (the header CRC and the spec hash are always checked).
     */
    public ShmTable attach(String name, boolean verify) {
        requireValidName(name);
        for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
            long generation = registry(name).generation(name);
            if (generation == 0) {
                throw new ShmException(ShmException.Code.NOT_FOUND, "name", dir + ": no table named '" + name + "'");
            }
            Path file = dir.resolve("posenc." + name + "." + generation);
            MappedByteBuffer map;
            try {
                map = map(file);
            } catch (NoSuchFileException gone) {
                if (generation(name) != generation) {
                    continue; // replaced between the registry and the open: look again
                }
                throw new ShmException(ShmException.Code.NOT_FOUND, "segment", file
                        + ": the registry names it but the file is gone");
            }
            Segment.check(map, file.toString(), verify);
            ShmTable table = new ShmTable(this, map);
            if (table.generation() != generation || !table.name().equals(name)) {
                throw new ShmException(ShmException.Code.HEADER, "segment", file
                        + ": header names another table or generation");
            }
            return table;
        }
        throw new ShmException(ShmException.Code.BUSY, "name", "table '" + name + "' in " + dir
                + " kept being replaced while attaching");
    }

    /** The generation the registry names for {@code name} now, 0 when there is no such table. */
    public long generation(String name) {
        requireValidName(name);
        try {
            return registry(name).generation(name);
        } catch (ShmException e) {
            if (e.code() == ShmException.Code.NOT_FOUND) {
                return 0;
            }
            throw e;
        }
    }

    /**
     * The registry, mapped once and reused while the file is the same one (a stat a call): Java
     * cannot unmap, so mapping it for every lookup would pile up mappings until a GC. A registry
     * deleted and created again is mapped again.
     */
    private Registry registry(String name) {
        Object key;
        try {
            key = Files.readAttributes(dir.resolve(Registry.FILE), BasicFileAttributes.class).fileKey();
        } catch (IOException e) {
            key = null; // absent or unreadable: Registry.open says which, in the doc's words
        }
        Mapped known = registry;
        if (known != null && key != null && key.equals(known.key)) {
            return known.registry;
        }
        Registry opened = Registry.open(dir, name);
        registry = new Mapped(opened, key);
        return opened;
    }

    private static void requireValidName(String name) {
        if (!TableNames.valid(name)) {
            throw new ShmException(ShmException.Code.BAD_NAME, "name", TableNames.refusal(name));
        }
    }

    /** The whole file mapped read-only, little-endian. */
    private static MappedByteBuffer map(Path file) throws NoSuchFileException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            long size = ch.size();
            if (size > Integer.MAX_VALUE) {
                throw new ShmException(ShmException.Code.OS, "segment", file + ": cannot map: " + size
                        + " bytes is more than one MappedByteBuffer holds (2^31 - 1)");
            }
            MappedByteBuffer map = ch.map(FileChannel.MapMode.READ_ONLY, 0, size);
            map.order(ByteOrder.LITTLE_ENDIAN);
            return map;
        } catch (NoSuchFileException e) {
            throw e;
        } catch (IOException e) {
            throw new ShmException(ShmException.Code.OS, "segment", file + ": cannot open: " + e.getMessage(), e);
        }
    }
}
