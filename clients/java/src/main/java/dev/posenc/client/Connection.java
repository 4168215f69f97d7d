package dev.posenc.client;

import dev.posenc.PosencException;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;

/**
 * One connection: any thread may send (its frames are queued in order and written whole, several
 * per system call when they come together); the client's {@link IoLoop} reads the replies and
 * completes each request's future by its request id, so requests from many threads are pipelined
 * on one socket without waiting for each other's round trips. The socket is non-blocking: the
 * loop reads whatever arrived, and writes what did not fit the socket's buffer once it has room.
 *
 * <p>Table ids belong to the server process, and a connection talks to one process: the RESOLVE
 * cache lives here, so a connection opened after a server restart resolves every name again.
 */
final class Connection {
    private static final int READ_BUFFER = 1 << 16;
    /** Frames one gathering write takes at most. */
    private static final int WRITE_BATCH = 1024;

    private final Address address;
    private final SocketChannel channel;
    private final IoLoop loop;
    /** Guards the request ids, the outbox and who writes it: frames leave in id order. */
    private final Object sendLock = new Object();
    private long lastId;
    private final ArrayDeque<ByteBuffer> outbox = new ArrayDeque<>();
    /** A thread is writing the outbox (only one at a time). */
    private boolean writing;
    /** The socket's buffer was full: the loop writes the outbox when it has room again. */
    private boolean waitingForRoom;
    /** The loop flushes this connection at the end of its iteration (loop thread only). */
    boolean dirty;
    private final Map<Long, Pending> pending = new ConcurrentHashMap<>();
    private final Map<String, CompletableFuture<TableInfo>> tables = new ConcurrentHashMap<>();
    private final AtomicReference<PosencException> closedBy = new AtomicReference<>();
    private final Consumer<PosencException> onEnd;
    /** The reply being read (touched by the loop's thread only): bytes received, a header, its payload. */
    private final ByteBuffer in = ByteBuffer.allocate(READ_BUFFER);
    private Protocol.ReplyHeader header;
    private byte[] payload;
    private int filled;

    /** A request waiting for its reply, and when it times out (System.nanoTime). */
    private static final class Pending {
        final CompletableFuture<Reply> future = new CompletableFuture<>();
        final long deadline;

        Pending(long deadline) {
            this.deadline = deadline;
        }
    }

    private Connection(Address address, SocketChannel channel, Consumer<PosencException> onEnd, IoLoop loop) {
        this.address = address;
        this.channel = channel;
        this.onEnd = onEnd;
        this.loop = loop;
    }

    /** A connected connection whose replies {@code loop} reads; {@code onEnd} hears once why it ended. */
    static Connection open(Address address, Duration connectTimeout, Consumer<PosencException> onEnd, IoLoop loop) {
        SocketChannel channel = address.connect(connectTimeout);
        try {
            channel.configureBlocking(false);
        } catch (IOException e) {
            throw new ConnectionException("cannot use the connection to " + address + ": " + e.getMessage(), e);
        }
        Connection c = new Connection(address, channel, onEnd, loop);
        loop.add(c);
        return c;
    }

    SocketChannel channel() {
        return channel;
    }

    /** False once the connection has ended (its replacement is opened on the next request). */
    boolean usable() {
        return closedBy.get() == null;
    }

    /** Send one frame (its request id set here); the future completes with the reply or the error. */
    CompletableFuture<Reply> send(byte[] frame, Duration timeout) {
        return sendAll(List.of(frame), timeout).get(0);
    }

    /**
     * Queue frames to be written in order (a pipeline's go out together); one future per frame.
     * Ids are given as the frames are queued, so the server receives a connection's requests in id
     * order: after a frame-level error the failing frame is the lowest id still waiting
     * (docs/protocol.md). A caller on an idle connection writes its frames at once; one whose
     * connection has requests waiting hands them to the I/O loop, which writes every frame handed to
     * it with one system call a connection once it has read what arrived (replies are due anyway, so
     * many callers share a write instead of each paying one); frames queued while another thread
     * writes go out with its write, and frames a callback queues on the loop's own thread go out at
     * the end of the loop's iteration. No caller ever waits for the socket.
     */
    List<CompletableFuture<Reply>> sendAll(List<byte[]> frames, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        List<CompletableFuture<Reply>> futures = new ArrayList<>(frames.size());
        boolean writeNow;
        boolean handOff;
        synchronized (sendLock) {
            for (byte[] frame : frames) {
                long id = ++lastId;
                Protocol.setRequestId(frame, id);
                Pending p = new Pending(deadline);
                pending.put(id, p);
                futures.add(p.future);
                outbox.add(ByteBuffer.wrap(frame));
            }
            PosencException why = closedBy.get();
            if (why != null) { // ended before these were registered: fail() may not have seen them
                outbox.clear();
                failPending(why);
                return futures;
            }
            boolean free = !writing && !waitingForRoom && !loop.isLoopThread();
            handOff = free && pending.size() > frames.size();
            writeNow = free && !handOff;
            writing |= writeNow;
        }
        if (writeNow) {
            writeOutbox();
        } else if (loop.isLoopThread()) {
            loop.flushLater(this);
        } else if (handOff) {
            loop.flushSoon(this);
        }
        return futures;
    }

    /** At the end of a loop iteration: write what callbacks queued, unless a writer has it already. */
    void flushFromLoop() {
        synchronized (sendLock) {
            if (writing || waitingForRoom || outbox.isEmpty()) {
                return;
            }
            writing = true;
        }
        writeOutbox();
    }

    /** The socket has room again (the loop saw it writable). */
    void onWritable() {
        synchronized (sendLock) {
            waitingForRoom = false;
            if (writing) {
                return;
            }
            writing = true;
        }
        writeOutbox();
    }

    /**
     * Write the outbox until it is empty (the caller holds the writer's role): gathering writes of
     * what is queued, including frames other threads add meanwhile. When the socket takes less
     * than it was given (its buffer is full: the server has not read yet), stop, and let the loop
     * finish once the socket is writable again.
     */
    private void writeOutbox() {
        try {
            while (true) {
                ByteBuffer[] batch;
                synchronized (sendLock) {
                    if (outbox.isEmpty() || closedBy.get() != null) {
                        writing = false;
                        return;
                    }
                    batch = outbox.stream().limit(WRITE_BATCH).toArray(ByteBuffer[]::new);
                }
                channel.write(batch);
                synchronized (sendLock) {
                    while (!outbox.isEmpty() && !outbox.peekFirst().hasRemaining()) {
                        outbox.pollFirst();
                    }
                    if (batch[batch.length - 1].hasRemaining()) {
                        writing = false;
                        waitingForRoom = true;
                        loop.wantWrite(this);
                        return;
                    }
                }
            }
        } catch (IOException e) {
            synchronized (sendLock) {
                writing = false;
            }
            fail(new ConnectionException("cannot send to " + address + ": " + e.getMessage(), e));
        }
    }

    /** The table behind {@code name}: resolved once per connection, even by concurrent callers. */
    CompletableFuture<TableInfo> table(String name, Duration timeout) {
        CompletableFuture<TableInfo> known = tables.get(name);
        if (known != null) {
            return known;
        }
        CompletableFuture<TableInfo> mine = new CompletableFuture<>();
        known = tables.putIfAbsent(name, mine);
        if (known != null) {
            return known;
        }
        resolve(name, timeout).whenComplete((info, error) -> {
            if (error != null) {
                tables.remove(name, mine); // a later call asks again
                mine.completeExceptionally(error);
            } else {
                mine.complete(info);
            }
        });
        return mine;
    }

    /** RESOLVE now (whatever is cached) and cache the answer. */
    CompletableFuture<TableInfo> resolve(String name, Duration timeout) {
        return send(Requests.resolve(name), timeout).thenApply(reply -> {
            TableInfo info = reply.tableInfo();
            tables.put(name, CompletableFuture.completedFuture(info));
            return info;
        });
    }

    /** Forget a resolved name when {@code error} is UNKNOWN_TABLE (removed, or never there): ask again next time. */
    void forgetIfUnknown(String name, Throwable error) {
        if (PosencClient.unwrap(error) instanceof ServerException.UnknownTable) {
            tables.remove(name);
        }
    }

    /** Time out the requests whose deadline has passed (called by the client's sweeper). */
    void expire(long now) {
        for (Map.Entry<Long, Pending> e : pending.entrySet()) {
            Pending p = e.getValue();
            if (now - p.deadline > 0 && pending.remove(e.getKey(), p)) {
                p.future.completeExceptionally(new RequestTimeoutException("no reply from " + address
                        + " in time (request " + e.getKey() + "); the connection stays open"));
            }
        }
    }

    void close() {
        fail(new ConnectionException("the client closed its connection to " + address));
    }

    /**
     * Read what arrived and complete the requests it answers (on the loop's thread, when the socket
     * is readable); the end of the stream or a bad reply ends the connection.
     */
    void readReplies() {
        try {
            int n;
            do {
                n = channel.read(in);
                in.flip();
                boolean open = consume();
                in.compact();
                if (!open) {
                    return;
                }
            } while (n > 0);
            if (n < 0) {
                boolean inside = payload != null || in.position() > 0;
                fail(inside ? new ProtocolException("the server closed the connection to " + address
                        + " inside a reply") : new ServerClosedException("the server closed the connection to "
                        + address + unanswered()));
            }
        } catch (PosencException e) {
            fail(e);
        } catch (IOException | RuntimeException e) { // a RuntimeException here is a bug: end this connection, not the loop
            fail(new ConnectionException("the connection to " + address + " failed: " + e, e));
        }
    }

    /** Take whole replies out of {@code in}; false after an error that closed the stream. */
    private boolean consume() {
        while (true) {
            if (payload == null) {
                if (in.remaining() < Protocol.HEADER_SIZE) {
                    return true;
                }
                header = Protocol.ReplyHeader.decode(in);
                in.position(in.position() + Protocol.HEADER_SIZE);
                payload = new byte[header.payloadLength()];
                filled = 0;
            }
            int n = Math.min(in.remaining(), payload.length - filled);
            in.get(payload, filled, n);
            filled += n;
            if (filled < payload.length) {
                return true;
            }
            Protocol.ReplyHeader h = header;
            byte[] body = payload;
            header = null;
            payload = null;
            if (!dispatch(h, body)) {
                return false;
            }
        }
    }

    /** Complete the request a reply answers; false after an error that closes the stream. */
    private boolean dispatch(Protocol.ReplyHeader h, byte[] payload) {
        if (h.status != Status.OK.code()) {
            String text = new String(payload, 0, (int) h.auxLen, StandardCharsets.UTF_8);
            ServerException error = ServerException.of(h.status, text, h.requestId);
            if (error.closesConnection()) {
                endWith(error);
                return false;
            }
            Pending p = pending.remove(h.requestId);
            if (p != null) {
                p.future.completeExceptionally(error);
            }
            return true;
        }
        Pending p = pending.remove(h.requestId); // absent: a request that timed out, answered late
        if (p != null) {
            p.future.complete(new Reply(h, payload));
        }
        return true;
    }

    /**
     * The server ended the stream with {@code error}. A frame-level error (BAD_FRAME, BAD_VERSION,
     * UNKNOWN_OPCODE, FRAME_TOO_LARGE) is about the first request without a reply: that request
     * gets it, the ones after it were never read and get a ConnectionException (so a pool sends
     * them again). The others (SHUTTING_DOWN, IDLE_TIMEOUT, ...) are about every waiting request.
     */
    private void endWith(ServerException error) {
        Status s = error.status();
        boolean aboutOneFrame = s == Status.BAD_FRAME || s == Status.BAD_VERSION || s == Status.UNKNOWN_OPCODE
                || s == Status.FRAME_TOO_LARGE;
        Long culprit = pending.keySet().stream().min(Long::compare).orElse(null);
        if (!aboutOneFrame || culprit == null) {
            fail(error);
            return;
        }
        Pending p = pending.remove(culprit);
        fail(new ConnectionException("the server closed the connection to " + address + " after "
                + error.statusName() + " for request " + culprit + ", before reading this request"));
        if (p != null) {
            p.future.completeExceptionally(error);
        }
    }

    private String unanswered() {
        int n = pending.size();
        return n == 0 ? "" : " with " + n + (n == 1 ? " request" : " requests") + " unanswered";
    }

    /** End the connection for `why`: close the socket and fail every request still waiting. */
    private void fail(PosencException why) {
        boolean first = closedBy.compareAndSet(null, why);
        synchronized (sendLock) {
            outbox.clear();
        }
        try {
            channel.close();
        } catch (IOException ignored) {
            // closing a broken socket: `why` is what the callers need to know
        }
        failPending(closedBy.get());
        if (first) {
            onEnd.accept(why);
        }
    }

    private void failPending(PosencException why) {
        for (Long id : pending.keySet()) {
            Pending p = pending.remove(id);
            if (p != null) {
                p.future.completeExceptionally(why);
            }
        }
    }
}
