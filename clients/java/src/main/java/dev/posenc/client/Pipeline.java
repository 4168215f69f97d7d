package dev.posenc.client;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;

/**
 * Calls queued, then sent together on one connection in one write by {@link #execute()}: one
 * round trip for all of them. Each call returns its future at once; it completes during
 * {@code execute()} with the result or its error (one failed call does not fail the others).
 *
 * <pre>{@code
 * Pipeline p = client.pipeline();
 * CompletableFuture<Rows> a = p.encode("sin128", Positions.of(1, 2), Dtype.FLOAT32);
 * CompletableFuture<Rows> b = p.encodeSpec(spec, Positions.of(0.5), Dtype.FLOAT64);
 * p.execute();
 * float[] first = a.join().toFloatArray();
 * }</pre>
 *
 * Table names not yet resolved on the connection are resolved first (pipelined too). A pipeline
 * is not retried on another connection, and is for one thread; the client it came from is
 * shared as usual.
 */
public final class Pipeline {
    private final PosencClient client;
    private final List<Queued<?>> queued = new ArrayList<>();

    /** One queued call: its frame, the table it names (or null), and how its reply is read. */
    private static final class Queued<T> {
        final byte[] frame;
        final String table;
        final Function<Reply, T> decode;
        final CompletableFuture<T> result = new CompletableFuture<>();

        Queued(byte[] frame, String table, Function<Reply, T> decode) {
            this.frame = frame;
            this.table = table;
            this.decode = decode;
        }

        void complete(Reply reply, Throwable error) {
            if (error != null) {
                result.completeExceptionally(PosencClient.unwrap(error));
                return;
            }
            try {
                result.complete(decode.apply(reply));
            } catch (RuntimeException e) {
                result.completeExceptionally(e);
            }
        }
    }

    Pipeline(PosencClient client) {
        this.client = client;
    }

    public CompletableFuture<byte[]> ping(byte[] payload) {
        return add(new Queued<>(Requests.ping(payload), null, Reply::aux));
    }

    public CompletableFuture<Rows> encode(String table, Positions positions, Dtype dtype) {
        Requests.checkName(table);
        return add(new Queued<>(Requests.encodeTable(positions, dtype), table, Reply::rows));
    }

    public CompletableFuture<Rows> encodeSpec(InlineSpec spec, Positions positions, Dtype dtype) {
        return add(new Queued<>(Requests.encodeSpec(spec, positions, dtype), null, Reply::rows));
    }

    /** Calls queued and not yet executed. */
    public int size() {
        return queued.size();
    }

    /**
     * Send every queued call in one write and wait for all the replies (each within the request
     * timeout); the futures are complete when this returns. The queue is then empty again.
     */
    public void execute() {
        List<Queued<?>> calls = new ArrayList<>(queued);
        queued.clear();
        if (calls.isEmpty()) {
            return;
        }
        Connection c;
        try {
            c = client.acquire();
        } catch (RuntimeException e) {
            calls.forEach(q -> q.result.completeExceptionally(e));
            return;
        }
        Map<String, CompletableFuture<TableInfo>> tables = new HashMap<>();
        for (Queued<?> q : calls) {
            if (q.table != null) {
                tables.computeIfAbsent(q.table, name -> c.table(name, client.requestTimeout()));
            }
        }
        List<Queued<?>> sent = new ArrayList<>();
        List<byte[]> frames = new ArrayList<>();
        for (Queued<?> q : calls) {
            if (q.table == null) {
                sent.add(q);
                frames.add(q.frame);
                continue;
            }
            CompletableFuture<TableInfo> info = tables.get(q.table);
            try {
                frames.add(Requests.withTableId(q.frame, info.join().id()));
                sent.add(q);
            } catch (RuntimeException e) {
                q.complete(null, e);
            }
        }
        if (!frames.isEmpty()) {
            List<CompletableFuture<Reply>> replies = c.sendAll(frames, client.requestTimeout());
            for (int i = 0; i < replies.size(); i++) {
                Queued<?> q = sent.get(i);
                replies.get(i).whenComplete((reply, error) -> {
                    if (q.table != null) {
                        c.forgetIfUnknown(q.table, error);
                    }
                    q.complete(reply, error);
                });
            }
        }
        CompletableFuture.allOf(calls.stream().map(q -> q.result).toArray(CompletableFuture[]::new))
                .exceptionally(error -> null).join();
    }

    private <T> CompletableFuture<T> add(Queued<T> q) {
        queued.add(q);
        return q.result;
    }
}
