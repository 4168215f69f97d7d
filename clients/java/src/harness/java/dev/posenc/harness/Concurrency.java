package dev.posenc.harness;

import dev.posenc.client.Dtype;
import dev.posenc.client.PosencClient;
import dev.posenc.client.Positions;
import dev.posenc.client.Rows;
import dev.posenc.shm.ShmDirectory;
import dev.posenc.shm.ShmTable;

import java.io.BufferedReader;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * {@code concurrency}: 16 threads on one pool of 8 connections, 2080 ENCODE_TABLE calls of sin128
 * and sin128-any, every row compared bit for bit with sin128's row read through the shm reader.
 */
final class Concurrency implements ScenarioRunner.Scenario {
    private static final int WORKERS = 16;
    private static final int CALLS_PER_WORKER = 130;
    private static final int POOL = 8;

    @Override
    public JsonLine run(String address, Path shmDir, BufferedReader stdin) throws Exception {
        ShmTable sin128 = new ShmDirectory(shmDir).attach("sin128");
        AtomicLong requests = new AtomicLong();
        AtomicLong rowsChecked = new AtomicLong();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        CyclicBarrier start = new CyclicBarrier(WORKERS);
        try (PosencClient client = PosencClient.builder(address).poolSize(POOL).build()) {
            List<Thread> threads = new ArrayList<>();
            for (int w = 0; w < WORKERS; w++) {
                Random random = new Random(w);
                Thread t = new Thread(() -> {
                    try {
                        start.await();
                        for (int i = 0; i < CALLS_PER_WORKER; i++) {
                            long[] positions = random.longs(1 + random.nextInt(4), 0, 4096).toArray();
                            Rows rows = client.encode(i % 2 == 0 ? "sin128" : "sin128-any", Positions.of(positions),
                                    Dtype.FLOAT32);
                            requests.incrementAndGet();
                            rowsChecked.addAndGet(Rows32.compare(rows, sin128, positions));
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }, "worker-" + w);
                threads.add(t);
                t.start();
            }
            for (Thread t : threads) {
                t.join();
            }
        }
        Throwable why = failure.get();
        return new JsonLine().put("ok", why == null).put("detail", why == null ? "" : why.toString())
                .put("workers", WORKERS).put("requests", requests.get()).put("rows_checked", rowsChecked.get())
                .put("pool_size", POOL);
    }
}
