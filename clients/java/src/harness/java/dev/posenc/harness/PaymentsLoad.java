package dev.posenc.harness;

import dev.posenc.client.Dtype;
import dev.posenc.client.PosencClient;
import dev.posenc.client.Positions;
import dev.posenc.client.Rows;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * {@code clients/java/run-payments ADDRESS TABLE [flags]}: the payments scenario's load through the
 * Java client, as {@code posenc bench clients} runs every language's driver (docs/benchmarks.md):
 * one PosencClient (a pool of {@code -pool} connections) shared by {@code -workers} threads, each
 * asking the float32 row of one random position in [LO, HI) at a time, with the blocking
 * {@code encode}, as a thread-per-request service calls it.
 *
 * <pre>
 * -seconds S -warmup S [-rate R] [-workers 256] [-pool 4] [-positions LO:HI] [-seed 1]
 * </pre>
 *
 * Without {@code -rate}, a closed loop (each worker sends its next request when its last is
 * answered); with {@code -rate R}, an open loop: request k is due at start + k/R and taken by the next
 * free worker, its latency counted from when it was due (queueing included). Prints one JSON object:
 * rps and completed (the replies that arrived in the measured seconds), errors, and p50_us, p99_us,
 * p999_us, max_us: exact percentiles of the latencies of every request sent (closed loop) or due
 * (open loop) in the measured seconds. The same contract as clients/go/cmd/posenc-payments.
 */
public final class PaymentsLoad {
    private final PosencClient client;
    private final String table;
    private final long lo;
    private final long span;
    private final long start;
    private final long from;
    private final long until;

    /** One worker's count: latencies (ns) of its requests in the window, replies that arrived in it, failures. */
    private static final class Tally {
        long[] latencies = new long[1024];
        int measured;
        long completed;
        long failed;

        void add(long latency) {
            if (measured == latencies.length) {
                latencies = Arrays.copyOf(latencies, 2 * measured);
            }
            latencies[measured++] = latency;
        }
    }

    private PaymentsLoad(PosencClient client, String table, long lo, long span, double warmup, double seconds) {
        this.client = client;
        this.table = table;
        this.lo = lo;
        this.span = span;
        this.start = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(50);
        this.from = start + (long) (warmup * 1e9);
        this.until = from + (long) (seconds * 1e9);
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opt = new HashMap<>();
        for (int i = 2; i + 1 < args.length; i += 2) {
            opt.put(args[i].replaceFirst("^-+", ""), args[i + 1]);
        }
        String[] range = opt.getOrDefault("positions", "1700000000000:1800000000000").split(":");
        long lo = Long.parseLong(range[0]);
        double seconds = Double.parseDouble(opt.getOrDefault("seconds", "2"));
        int workers = Integer.parseInt(opt.getOrDefault("workers", "256"));
        double rate = Double.parseDouble(opt.getOrDefault("rate", "0"));
        try (PosencClient client = PosencClient.builder(args[0])
                .poolSize(Integer.parseInt(opt.getOrDefault("pool", "4"))).build()) {
            PaymentsLoad load = new PaymentsLoad(client, args[1], lo, Long.parseLong(range[1]) - lo,
                    Double.parseDouble(opt.getOrDefault("warmup", "1")), seconds);
            Tally all = load.drive(workers, rate, Long.parseLong(opt.getOrDefault("seed", "1")));
            long[] sorted = Arrays.copyOf(all.latencies, all.measured);
            Arrays.sort(sorted);
            new JsonLine().put("rps", all.completed / seconds).put("completed", all.completed)
                    .put("errors", all.failed).put("p50_us", percentile(sorted, 50))
                    .put("p99_us", percentile(sorted, 99)).put("p999_us", percentile(sorted, 99.9))
                    .put("max_us", percentile(sorted, 100)).print();
        }
    }

    /** Run the workers until the window has passed; their counts together. */
    private Tally drive(int workers, double rate, long seed) throws InterruptedException {
        AtomicLong next = new AtomicLong();
        List<Tally> tallies = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        SplittableRandom seeds = new SplittableRandom(seed);
        for (int w = 0; w < workers; w++) {
            Tally t = new Tally();
            SplittableRandom random = seeds.split();
            tallies.add(t);
            threads.add(new Thread(() -> work(t, random, rate, next), "worker-" + w));
        }
        threads.forEach(Thread::start);
        Tally all = new Tally();
        for (int w = 0; w < workers; w++) {
            threads.get(w).join();
            Tally t = tallies.get(w);
            for (int i = 0; i < t.measured; i++) {
                all.add(t.latencies[i]);
            }
            all.completed += t.completed;
            all.failed += t.failed;
        }
        return all;
    }

    /**
     * One worker: closed loop, a request as soon as the last is answered; open loop, the next request
     * nobody has taken yet (k, due at start + k/rate), sent when it is due. A worker takes a request
     * only when it is free, so when all are busy the due requests wait, and the wait counts. (A pacer
     * thread handing due times to the workers, as the Go driver has, was starved of the CPU by the
     * workers here: Java threads are the kernel's to schedule.)
     */
    private void work(Tally t, SplittableRandom random, double rate, AtomicLong next) {
        sleepUntil(start);
        while (true) {
            long at = rate > 0 ? start + (long) (next.getAndIncrement() * 1e9 / rate) : System.nanoTime();
            if (at >= until) {
                return;
            }
            sleepUntil(at);
            boolean ok;
            try {
                Rows rows = client.encode(table, Positions.of(lo + random.nextLong(span)), Dtype.FLOAT32);
                ok = rows.rows() == 1 && rows.width() == 128;
            } catch (RuntimeException e) {
                ok = false;
            }
            long done = System.nanoTime();
            if (!ok && at >= from) {
                t.failed++;
            }
            if (ok && done >= from && done < until) {
                t.completed++;
            }
            if (ok && at >= from) {
                t.add(done - at);
            }
        }
    }

    /** Park until about 0.1 ms before {@code when}, then yield until it has come. */
    private static void sleepUntil(long when) {
        for (long wait; (wait = when - System.nanoTime()) > 0;) {
            if (wait > 100_000) {
                LockSupport.parkNanos(wait - 100_000);
            } else {
                Thread.yield();
            }
        }
    }

    /** The smallest latency (us) with at least p % of them at or below it (0 without any). */
    private static double percentile(long[] sorted, double p) {
        if (sorted.length == 0) {
            return 0;
        }
        int k = Math.min(sorted.length - 1, Math.max(0, (int) (p / 100 * sorted.length + 0.999999) - 1));
        return sorted[k] / 1e3;
    }
}
