package dev.posenc.harness;

import dev.posenc.shm.ShmDirectory;
import dev.posenc.shm.ShmException;
import dev.posenc.shm.ShmTable;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * {@code shm-replace}: table "flip" is republished while this reads rows of its mapping, each
 * compared with the data its spec_hash had when first attached (verified); whenever the registry
 * names a new generation it is attached (verified); the first mapping is kept and re-read after it
 * was replaced and unlinked.
 */
final class ShmReplace implements ScenarioRunner.Scenario {
    private static final String NAME = "flip";

    private final Map<String, byte[]> reference = new LinkedHashMap<>();
    private final Map<String, Object> digests = new LinkedHashMap<>();
    private final Set<Long> generations = new LinkedHashSet<>();

    @Override
    public JsonLine run(String address, Path shmDir, BufferedReader stdin) throws Exception {
        ShmDirectory dir = new ShmDirectory(shmDir);
        ShmTable current = dir.attach(NAME);
        ShmTable first = current;
        record(current);
        AtomicBoolean stop = new AtomicBoolean();
        Thread watcher = new Thread(() -> {
            try {
                stdin.readLine();
            } catch (IOException ignored) {
                // stdin closed: stop as for a line
            }
            stop.set(true);
        }, "stdin");
        watcher.setDaemon(true);
        JsonLine.event("ready");
        watcher.start();
        Random random = new Random(36);
        long rowsRead = 0;
        int attaches = 1;
        int oldRechecked = 0;
        while (!stop.get()) {
            for (int i = 0; i < 256; i++) {
                compareRow(current, current.start() + random.nextInt((int) current.rows()));
            }
            rowsRead += 256;
            if (current.isCurrent()) {
                continue;
            }
            try {
                current = dir.attach(NAME);
            } catch (ShmException replacedMeanwhile) {
                continue; // replaced again between the registry and the open: the next round attaches
            }
            attaches++;
            record(current);
            if (!Files.exists(shmDir.resolve("posenc." + NAME + "." + first.generation()))) {
                for (long p = first.start(); p < first.stop(); p++) {
                    compareRow(first, p);
                }
                oldRechecked++;
            }
        }
        return new JsonLine().put("ok", true).put("generations", new ArrayList<>(generations))
                .put("digests", digests).put("attaches", attaches).put("rows_read", rowsRead)
                .put("old_rechecked", oldRechecked);
    }

    /** A newly attached generation: its data is its spec's reference, or equal to it. */
    private void record(ShmTable t) throws Exception {
        generations.add(t.generation());
        ByteBuffer data = t.data();
        byte[] bytes = new byte[data.remaining()];
        data.get(bytes);
        byte[] known = reference.putIfAbsent(t.specHash(), bytes);
        if (known == null) {
            digests.put(t.specHash(), Hex.of(MessageDigest.getInstance("SHA-256").digest(bytes)));
        } else {
            ScenarioRunner.check(java.util.Arrays.equals(known, bytes), "generation " + t.generation()
                    + " of spec " + t.specHash() + " has other data than an earlier one");
        }
    }

    private void compareRow(ShmTable t, long position) {
        ByteBuffer row = t.row(position);
        byte[] want = reference.get(t.specHash());
        int at = (int) (position - t.start()) * row.remaining();
        for (int i = 0; i < row.remaining(); i++) {
            ScenarioRunner.check(row.get(i) == want[at + i], "generation " + t.generation() + ", position " + position
                    + ": a row differs from its generation's verified data");
        }
    }
}
