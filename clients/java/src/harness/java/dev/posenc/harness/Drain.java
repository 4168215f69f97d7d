package dev.posenc.harness;

import dev.posenc.PosencException;
import dev.posenc.client.Dtype;
import dev.posenc.client.PosencClient;
import dev.posenc.client.Positions;
import dev.posenc.client.ServerClosedException;
import dev.posenc.shm.ShmDirectory;
import dev.posenc.shm.ShmTable;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * {@code drain}: one connection, no retry, 16 ENCODE_TABLE calls of sin128 in flight (rows
 * checked); ready after 100 answers; on a stdin line (pytest has sent SIGTERM) stop sending, wait
 * for every reply, then for the connection's end, which must be a clean EOF within 5 s.
 */
final class Drain implements ScenarioRunner.Scenario {
    private static final int IN_FLIGHT = 16;
    private static final int READY_AFTER = 100;

    @Override
    public JsonLine run(String address, Path shmDir, BufferedReader stdin) throws Exception {
        ShmTable sin128 = new ShmDirectory(shmDir).attach("sin128");
        CompletableFuture<PosencException> ended = new CompletableFuture<>();
        AtomicLong sent = new AtomicLong();
        AtomicLong answered = new AtomicLong();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        CompletableFuture<Void> stop = new CompletableFuture<>();
        Semaphore window = new Semaphore(IN_FLIGHT);
        try (PosencClient client = PosencClient.builder(address).poolSize(1).retries(0)
                .onConnectionEnd(ended::complete).build()) {
            Thread watcher = new Thread(() -> {
                try {
                    stdin.readLine();
                } catch (IOException ignored) {
                    // stdin closed: stop as for a line
                }
                stop.complete(null);
            }, "stdin");
            watcher.setDaemon(true);
            watcher.start();
            for (long i = 0; !stop.isDone() && failure.get() == null; i++) {
                if (!window.tryAcquire(100, TimeUnit.MILLISECONDS)) {
                    continue;
                }
                long[] positions = {i % 4096, (i * 7 + 3) % 4096};
                sent.incrementAndGet();
                client.encodeAsync("sin128", Positions.of(positions), Dtype.FLOAT32).whenComplete((rows, error) -> {
                    try {
                        if (error != null) {
                            failure.compareAndSet(null, error);
                        } else {
                            Rows32.compare(rows, sin128, positions);
                            if (answered.incrementAndGet() == READY_AFTER) {
                                JsonLine.event("ready");
                            }
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    } finally {
                        window.release();
                    }
                });
            }
            ScenarioRunner.check(window.tryAcquire(IN_FLIGHT, 10, TimeUnit.SECONDS), "replies still missing after 10 s");
            String end;
            try {
                PosencException why = ended.get(5, TimeUnit.SECONDS);
                end = why instanceof ServerClosedException ? "eof" : why.toString();
            } catch (TimeoutException e) {
                end = "the connection was still open 5 s after the last reply";
            }
            Throwable why = failure.get();
            boolean ok = why == null && sent.get() == answered.get() && "eof".equals(end);
            return new JsonLine().put("ok", ok).put("detail", why == null ? "" : why.toString()).put("sent", sent.get())
                    .put("answered", answered.get()).put("end", end);
        }
    }
}
