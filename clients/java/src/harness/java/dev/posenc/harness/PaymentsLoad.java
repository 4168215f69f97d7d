package dev.posenc.harness;

import dev.posenc.client.Dtype;
import dev.posenc.client.InlineSpec;
import dev.posenc.client.PosencClient;
import dev.posenc.client.Positions;
import dev.posenc.client.Rows;

import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.Function;

/**
 * The payments scenario's load driven through the Java client (docs/benchmarks.md, "The payments
 * scenario"), as posenc-load drives it in C: one 128-d float32 row a request, positions uniform
 * int64 in [LO, HI), a pool of CONNECTIONS with IN_FLIGHT requests outstanding in all (closed
 * loop), or RATE requests a second scheduled at fixed times (open loop, latency from the scheduled
 * time; the sending thread yields the CPU while it waits). Prints one JSON line: rps, completed,
 * errors, p50_us, p99_us, p999_us, max_us.
 *
 * <pre>
 * PaymentsLoad --address H:P (--table NAME | --spec-freqs HEX,...) --positions LO:HI --connections N
 *              [--in-flight N | --rate R] --seconds S --warmup S --seed N
 * </pre>
 */
public final class PaymentsLoad {
    /** Latency buckets of 0.1 us up to 100 ms; slower replies land in the last. */
    private static final int BUCKETS = 1_000_000;

    private final AtomicLongArray histogram = new AtomicLongArray(BUCKETS);
    private final AtomicLong completed = new AtomicLong();
    private final AtomicLong errors = new AtomicLong();
    private final AtomicLong outstanding = new AtomicLong();
    private volatile long windowStart;
    private volatile long windowEnd;
    private volatile boolean running = true;

    private PaymentsLoad() {
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opt = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            opt.put(args[i].substring(2), args[i + 1]);
        }
        String[] range = opt.get("positions").split(":");
        long lo = Long.parseLong(range[0]);
        long span = Long.parseLong(range[1]) - lo;
        int connections = Integer.parseInt(opt.get("connections"));
        double seconds = Double.parseDouble(opt.get("seconds"));
        double warmup = Double.parseDouble(opt.get("warmup"));
        SplittableRandom random = new SplittableRandom(Long.parseLong(opt.getOrDefault("seed", "1")));
        try (PosencClient client = PosencClient.builder(opt.get("address")).poolSize(connections).retries(0)
                .requestTimeout(Duration.ofSeconds(10)).build()) {
            Function<Long, CompletableFuture<Rows>> call = operation(client, opt);
            List<CompletableFuture<Rows>> opening = new java.util.ArrayList<>();
            for (int c = 0; c < connections; c++) { // every connection open (and every name resolved) before the clock starts
                opening.add(call.apply(lo));
            }
            CompletableFuture.allOf(opening.toArray(CompletableFuture[]::new)).join();
            PaymentsLoad load = new PaymentsLoad();
            long now = System.nanoTime();
            load.windowStart = now + (long) (warmup * 1e9);
            load.windowEnd = load.windowStart + (long) (seconds * 1e9);
            if (opt.containsKey("rate")) {
                load.openLoop(call, Double.parseDouble(opt.get("rate")), lo, span, random);
            } else {
                load.closedLoop(call, Integer.parseInt(opt.get("in-flight")), lo, span, random);
            }
            load.report(seconds);
        }
    }

    private static Function<Long, CompletableFuture<Rows>> operation(PosencClient client, Map<String, String> opt) {
        if (opt.containsKey("table")) {
            String table = opt.get("table");
            return p -> client.encodeAsync(table, Positions.of(p), Dtype.FLOAT32);
        }
        double[] freqs = Arrays.stream(opt.get("spec-freqs").split(",")).mapToDouble(Hex::float64).toArray();
        InlineSpec spec = InlineSpec.interleaved(freqs, 2 * freqs.length);
        return p -> client.encodeSpecAsync(spec, Positions.of(p), Dtype.FLOAT32);
    }

    /** IN_FLIGHT requests outstanding: each reply sends the next, until the window closes. */
    private void closedLoop(Function<Long, CompletableFuture<Rows>> call, int inFlight, long lo, long span,
            SplittableRandom random) throws InterruptedException {
        for (int i = 0; i < inFlight; i++) {
            send(call, lo, span, random.split());
        }
        sleepUntil(windowEnd);
        running = false;
        drain();
    }

    private void send(Function<Long, CompletableFuture<Rows>> call, long lo, long span, SplittableRandom random) {
        long sent = System.nanoTime();
        outstanding.incrementAndGet();
        call.apply(lo + random.nextLong(span)).whenComplete((rows, error) -> {
            record(sent, rows, error);
            if (running) {
                send(call, lo, span, random);
            }
        });
    }

    /** RATE requests a second at fixed times from one thread; latency counts from the scheduled time. */
    private void openLoop(Function<Long, CompletableFuture<Rows>> call, double rate, long lo, long span,
            SplittableRandom random) throws InterruptedException {
        double period = 1e9 / rate;
        long start = System.nanoTime();
        for (long i = 0;; i++) {
            long due = start + (long) (i * period);
            if (due >= windowEnd) {
                break;
            }
            while (System.nanoTime() < due) {
                Thread.yield(); // the reader threads share the load CPU: let them run (posenc-load's --yield)
            }
            outstanding.incrementAndGet();
            call.apply(lo + random.nextLong(span)).whenComplete((rows, error) -> record(due, rows, error));
        }
        running = false;
        drain();
    }

    private void record(long since, Rows rows, Throwable error) {
        long done = System.nanoTime();
        if (since >= windowStart && since < windowEnd) {
            if (error != null || rows.rows() != 1 || rows.width() != 128) {
                errors.incrementAndGet();
            } else {
                completed.incrementAndGet();
                histogram.incrementAndGet((int) Math.min(BUCKETS - 1, (done - since) / 100));
            }
        }
        outstanding.decrementAndGet();
    }

    private void drain() throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (outstanding.get() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
    }

    private static void sleepUntil(long when) throws InterruptedException {
        long left;
        while ((left = when - System.nanoTime()) > 0) {
            TimeUnit.NANOSECONDS.sleep(Math.min(left, 50_000_000L));
        }
    }

    private double percentile(double percent) {
        long total = completed.get();
        long target = Math.max(1, (long) Math.ceil(percent / 100 * total));
        long seen = 0;
        for (int b = 0; b < BUCKETS; b++) {
            seen += histogram.get(b);
            if (seen >= target) {
                return (b + 1) / 10.0;
            }
        }
        return BUCKETS / 10.0;
    }

    private void report(double seconds) {
        int top = BUCKETS - 1;
        while (top > 0 && histogram.get(top) == 0) {
            top--;
        }
        new JsonLine().put("rps", completed.get() / seconds).put("completed", completed.get())
                .put("errors", errors.get() + outstanding.get()).put("p50_us", percentile(50))
                .put("p99_us", percentile(99)).put("p999_us", percentile(99.9)).put("max_us", (top + 1) / 10.0)
                .print();
    }
}
