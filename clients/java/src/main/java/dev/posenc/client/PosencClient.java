package dev.posenc.client;

import dev.posenc.PosencException;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * A client of posenc-server's binary protocol (docs/protocol.md): a pool of connections shared by
 * any number of threads, each connection pipelined (requests go out without waiting for earlier
 * replies, replies are matched by request id), their replies read by one I/O thread
 * ({@link Builder#ioThreads}) that completes the requests' futures.
 *
 * <pre>{@code
 * try (PosencClient client = PosencClient.connect("127.0.0.1:8001")) {
 *     Rows rows = client.encode("sin128", Positions.of(0, 1, 4096), Dtype.FLOAT32);
 *     float[] values = rows.toFloatArray();                     // rows() x width(), row-major
 * }
 * }</pre>
 *
 * <ul>
 * <li>Every operation has a blocking form and an {@code ...Async} form returning a
 *     {@link CompletableFuture}; both are thread-safe. A future completes on the I/O thread that
 *     read its reply, and so do the stages chained to it with {@code thenApply},
 *     {@code whenComplete} ...: never make a blocking call there (it would wait for a reply that
 *     thread has to read); chain {@code ...Async} calls, or use the {@code ...Async} stages with
 *     an executor.</li>
 * <li>Table names are resolved once per connection (RESOLVE), by whichever call needs the id
 *     first. Ids belong to the server process, so a connection opened after the server restarted
 *     resolves again.</li>
 * <li>Errors are {@link PosencException}s: {@link ServerException} and its per-status subclasses
 *     for the server's refusals (status code, field, message), {@link InvalidInputException} for
 *     input refused before sending, {@link ConnectionException} for the transport,
 *     {@link RequestTimeoutException} past the request timeout.</li>
 * <li>A request whose connection ended before its reply (a server restart, a drain, an idle
 *     timeout) is sent again on a new connection, {@link Builder#retries} times (default 1): every
 *     operation is a read, so that is safe.</li>
 * </ul>
 */
public final class PosencClient implements AutoCloseable {
    private final Address address;
    private final Duration connectTimeout;
    private final Duration requestTimeout;
    private final int retries;
    private final Consumer<PosencException> onConnectionEnd;
    private final AtomicReferenceArray<Connection> pool;
    private final Object[] slotLocks;
    private final AtomicInteger next = new AtomicInteger();
    private final ScheduledExecutorService sweeper;
    private final IoLoop[] loops;
    private volatile boolean closed;

    private PosencClient(Builder b) {
        this.address = b.address;
        this.connectTimeout = b.connectTimeout;
        this.requestTimeout = b.requestTimeout;
        this.retries = b.retries;
        this.onConnectionEnd = b.onConnectionEnd;
        this.pool = new AtomicReferenceArray<>(b.poolSize);
        this.slotLocks = new Object[b.poolSize];
        for (int i = 0; i < slotLocks.length; i++) {
            slotLocks[i] = new Object();
        }
        this.loops = new IoLoop[b.ioThreads];
        for (int i = 0; i < loops.length; i++) {
            loops[i] = new IoLoop("posenc-io-" + i + " " + address);
        }
        this.sweeper = Executors.newSingleThreadScheduledExecutor(task -> {
            Thread t = new Thread(task, "posenc-timeouts " + address);
            t.setDaemon(true);
            return t;
        });
        long tick = Math.max(1, Math.min(100, requestTimeout.toMillis() / 4));
        sweeper.scheduleWithFixedDelay(this::expireRequests, tick, tick, TimeUnit.MILLISECONDS);
    }

    /** A client with the default settings; opens its first connection now (a ConnectionException if it cannot). */
    public static PosencClient connect(String address) {
        return builder(address).build();
    }

    public static Builder builder(String address) {
        return new Builder(Address.parse(address));
    }

    // --- operations --------------------------------------------------------------------------

    /** PING: the server echoes {@code payload}. */
    public byte[] ping(byte[] payload) {
        return await(pingAsync(payload));
    }

    public CompletableFuture<byte[]> pingAsync(byte[] payload) {
        byte[] frame = Requests.ping(payload);
        return run(c -> c.send(frame, requestTimeout).thenApply(Reply::aux));
    }

    /** STATS: the server's counters and limits (docs/protocol.md, "STATS"). */
    public Map<String, Object> stats() {
        return await(statsAsync());
    }

    public CompletableFuture<Map<String, Object>> statsAsync() {
        byte[] frame = Requests.stats();
        return run(c -> c.send(frame, requestTimeout).thenApply(Reply::jsonObject));
    }

    /** LIST_TABLES: every published table, sorted by name (an unservable one has an error). */
    public List<TableInfo> listTables() {
        return await(listTablesAsync());
    }

    @SuppressWarnings("unchecked")
    public CompletableFuture<List<TableInfo>> listTablesAsync() {
        byte[] frame = Requests.listTables();
        return run(c -> c.send(frame, requestTimeout).thenApply(reply -> {
            List<TableInfo> tables = new ArrayList<>();
            for (Object entry : reply.jsonArray()) {
                if (!(entry instanceof Map)) {
                    throw new ProtocolException("LIST_TABLES entry is not an object: " + entry);
                }
                tables.add(new TableInfo((Map<String, Object>) entry));
            }
            return tables;
        }));
    }

    /** RESOLVE now (the connection's cached id for the name is replaced by this answer). */
    public TableInfo resolve(String name) {
        return await(resolveAsync(name));
    }

    public CompletableFuture<TableInfo> resolveAsync(String name) {
        Requests.checkName(name); // refused here, in the caller's thread
        return run(c -> c.resolve(name, requestTimeout));
    }

    /** Float32 rows of a published table (stored or computed) at integer positions. */
    public Rows encode(String table, long... positions) {
        return encode(table, Positions.of(positions), Dtype.FLOAT32);
    }

    /** Rows of a published table, stored or a named computed encoding, in {@code dtype}. */
    public Rows encode(String table, Positions positions, Dtype dtype) {
        return await(encodeAsync(table, positions, dtype));
    }

    public CompletableFuture<Rows> encodeAsync(String table, Positions positions, Dtype dtype) {
        Requests.checkName(table);
        byte[] frame = Requests.encodeTable(positions, dtype);
        return run(c -> encodeOn(c, table, frame));
    }

    /**
     * Rows of the table with id {@code tableId}, sent as it is with no RESOLVE. An id belongs to
     * one server process, so this call is never retried on a new connection (it could reach a
     * restarted server, where the id may name another table): prefer names.
     */
    public Rows encodeById(int tableId, Positions positions, Dtype dtype) {
        return await(encodeByIdAsync(tableId, positions, dtype));
    }

    public CompletableFuture<Rows> encodeByIdAsync(int tableId, Positions positions, Dtype dtype) {
        byte[] frame = Requests.withTableId(Requests.encodeTable(positions, dtype), tableId);
        return attempt(c -> c.send(frame, requestTimeout).thenApply(Reply::rows), 0);
    }

    /** Rows of any inline spec, computed by the server, in {@code dtype}. */
    public Rows encodeSpec(InlineSpec spec, Positions positions, Dtype dtype) {
        return await(encodeSpecAsync(spec, positions, dtype));
    }

    public CompletableFuture<Rows> encodeSpecAsync(InlineSpec spec, Positions positions, Dtype dtype) {
        byte[] frame = Requests.encodeSpec(spec, positions, dtype);
        return run(c -> c.send(frame, requestTimeout).thenApply(Reply::rows));
    }

    /** Calls sent together in one write on one connection: see {@link Pipeline}. */
    public Pipeline pipeline() {
        return new Pipeline(this);
    }

    /** Close every connection; calls still waiting fail with a ConnectionException. */
    @Override
    public void close() {
        closed = true;
        sweeper.shutdownNow();
        for (int i = 0; i < slotLocks.length; i++) {
            synchronized (slotLocks[i]) {
                Connection c = pool.getAndSet(i, null);
                if (c != null) {
                    c.close();
                }
            }
        }
        for (IoLoop loop : loops) {
            loop.close();
        }
    }

    // --- the pool ----------------------------------------------------------------------------

    Duration requestTimeout() {
        return requestTimeout;
    }

    /**
     * ENCODE_TABLE of {@code table} on connection {@code c}: resolve (once), then the rows. When the
     * RESOLVE is still under way, the request is sent from another thread once it is answered, not
     * from the I/O thread that completes it: an I/O thread waiting to write a big frame would stop
     * reading the replies the server is waiting to send.
     */
    private CompletableFuture<Rows> encodeOn(Connection c, String table, byte[] frame) {
        CompletableFuture<TableInfo> info = c.table(table, requestTimeout);
        Function<TableInfo, CompletableFuture<Reply>> send = t -> c.send(Requests.withTableId(frame, t.id()),
                requestTimeout);
        return (info.isDone() ? info.thenCompose(send) : info.thenComposeAsync(send, ForkJoinPool.commonPool()))
                .whenComplete((reply, error) -> c.forgetIfUnknown(table, error))
                .thenApply(Reply::rows);
    }

    /**
     * A usable connection, round robin over the pool; a slot whose connection ended (or was never
     * opened) gets a new one.
     */
    Connection acquire() {
        int slot = Math.floorMod(next.getAndIncrement(), slotLocks.length);
        Connection c = pool.get(slot);
        if (c != null && c.usable() && !closed) {
            return c;
        }
        synchronized (slotLocks[slot]) { // one connect per slot; the other slots stay usable meanwhile
            if (closed) {
                throw new ConnectionException("the client is closed");
            }
            c = pool.get(slot);
            if (c == null || !c.usable()) {
                c = Connection.open(address, connectTimeout, onConnectionEnd, loops[slot % loops.length]);
                pool.set(slot, c);
            }
            return c;
        }
    }

    private <T> CompletableFuture<T> run(Function<Connection, CompletableFuture<T>> op) {
        return attempt(op, retries);
    }

    private <T> CompletableFuture<T> attempt(Function<Connection, CompletableFuture<T>> op, int retriesLeft) {
        CompletableFuture<T> first;
        try {
            first = op.apply(acquire());
        } catch (PosencException e) {
            first = CompletableFuture.failedFuture(e);
        }
        return first.handle((value, error) -> {
            if (error == null) {
                return CompletableFuture.completedFuture(value);
            }
            Throwable cause = unwrap(error);
            if (retriesLeft > 0 && !closed && unanswered(cause)) {
                return attempt(op, retriesLeft - 1);
            }
            return CompletableFuture.<T>failedFuture(cause);
        }).thenCompose(Function.identity());
    }

    /** True for an error that says the request was never answered, so it may be sent again. */
    private static boolean unanswered(Throwable error) {
        if (error instanceof ServerException) {
            Status s = ((ServerException) error).status();
            return s == Status.SHUTTING_DOWN || s == Status.IDLE_TIMEOUT;
        }
        return error instanceof ConnectionException && !(error instanceof ProtocolException);
    }

    private void expireRequests() {
        long now = System.nanoTime();
        for (int i = 0; i < pool.length(); i++) {
            Connection c = pool.get(i);
            if (c != null) {
                c.expire(now);
            }
        }
    }

    static Throwable unwrap(Throwable error) {
        while (error instanceof CompletionException && error.getCause() != null) {
            error = error.getCause();
        }
        return error;
    }

    /** The value of a future, its PosencException thrown as it is. */
    static <T> T await(CompletableFuture<T> future) {
        try {
            return future.join();
        } catch (CompletionException e) {
            Throwable cause = unwrap(e);
            if (cause instanceof RuntimeException) {
                throw (RuntimeException) cause;
            }
            if (cause instanceof Error) {
                throw (Error) cause;
            }
            throw e;
        }
    }

    /** Settings of a client; every one has a default. */
    public static final class Builder {
        private final Address address;
        private int poolSize = 4;
        private Duration connectTimeout = Duration.ofSeconds(5);
        private Duration requestTimeout = Duration.ofSeconds(30);
        private int retries = 1;
        private int ioThreads = 1;
        private Consumer<PosencException> onConnectionEnd = why -> { };

        private Builder(Address address) {
            this.address = address;
        }

        /** Connections in the pool (default 4), opened as calls need them. */
        public Builder poolSize(int poolSize) {
            if (poolSize < 1) {
                throw new InvalidInputException("pool_size", "must be >= 1, got " + poolSize);
            }
            this.poolSize = poolSize;
            return this;
        }

        /**
         * Threads that read the pool's replies (default 1; connections are spread over them). One
         * thread reads every connection that has something to read at each wake-up, so on few
         * CPUs one is best; give more where one thread's reading, decoding and callbacks become
         * the limit.
         */
        public Builder ioThreads(int ioThreads) {
            if (ioThreads < 1) {
                throw new InvalidInputException("io_threads", "must be >= 1, got " + ioThreads);
            }
            this.ioThreads = ioThreads;
            return this;
        }

        /** How long opening a connection may take (default 5 s). */
        public Builder connectTimeout(Duration connectTimeout) {
            this.connectTimeout = positive("connect_timeout", connectTimeout);
            return this;
        }

        /** How long a request may wait for its reply (default 30 s): then RequestTimeoutException. */
        public Builder requestTimeout(Duration requestTimeout) {
            this.requestTimeout = positive("request_timeout", requestTimeout);
            return this;
        }

        /** How many times a request whose connection ended unanswered is sent again (default 1). */
        public Builder retries(int retries) {
            if (retries < 0) {
                throw new InvalidInputException("retries", "must be >= 0, got " + retries);
            }
            this.retries = retries;
            return this;
        }

        /**
         * Called once for each pooled connection that ends, with why: a
         * {@link ServerClosedException} for a clean close by the server (a drain, a restart), a
         * {@link ServerException} for an error that closes (IDLE_TIMEOUT, SHUTTING_DOWN, ...), a
         * {@link ConnectionException} for the rest (the client's own close included). It runs on
         * the thread that saw the end, usually the I/O thread: keep it short (log, count). The next call opens a new connection in that slot.
         */
        public Builder onConnectionEnd(Consumer<PosencException> listener) {
            if (listener == null) {
                throw new InvalidInputException("on_connection_end", "must be a listener, got null");
            }
            this.onConnectionEnd = listener;
            return this;
        }

        /** The client, with its first connection open (a ConnectionException if it cannot be). */
        public PosencClient build() {
            PosencClient client = new PosencClient(this);
            try {
                client.acquire();
            } catch (PosencException e) {
                client.close();
                throw e;
            }
            return client;
        }

        private static Duration positive(String field, Duration d) {
            if (d == null || d.isNegative() || d.isZero()) {
                throw new InvalidInputException(field, "must be a positive duration, got " + d);
            }
            return d;
        }
    }
}
