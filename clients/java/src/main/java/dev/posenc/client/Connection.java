package dev.posenc.client;

import dev.posenc.PosencException;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;

/**
 * One connection: any thread may send (frames are written whole, under a lock); the client's
 * {@link IoLoop} reads the replies and completes each request's future by its request id, so
 * requests from many threads are pipelined on one socket without waiting for each other's round
 * trips. The socket is non-blocking: the loop reads whatever arrived, a writer whose frames do not
 * fit the socket's buffer waits for room.
 *
 * <p>Table ids belong to the server process, and a connection talks to one process: the RESOLVE
 * cache lives here, so a connection opened after a server restart resolves every name again.
 */
final class Connection {
    private static final int READ_BUFFER = 1 << 16;
    /** How long a writer waits for room in the socket's buffer before it looks again. */
    private static final long WRITE_WAIT_NANOS = 20_000;

    private final Address address;
    private final SocketChannel channel;
    private final Object writeLock = new Object();
    private long lastId; // guarded by writeLock
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

    private Connection(Address address, SocketChannel channel, Consumer<PosencException> onEnd) {
        this.address = address;
        this.channel = channel;
        this.onEnd = onEnd;
    }

    /** A connected connection whose replies {@code loop} reads; {@code onEnd} hears once why it ended. */
    static Connection open(Address address, Duration connectTimeout, Consumer<PosencException> onEnd, IoLoop loop) {
        SocketChannel channel = address.connect(connectTimeout);
        try {
            channel.configureBlocking(false);
        } catch (IOException e) {
            throw new ConnectionException("cannot use the connection to " + address + ": " + e.getMessage(), e);
        }
        Connection c = new Connection(address, channel, onEnd);
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
     * Send frames in one write (a pipeline); one future per frame, in order. Ids are given under
     * the write lock, so the server receives a connection's requests in id order: after a
     * frame-level error the failing frame is the lowest id still waiting (docs/protocol.md).
     */
    List<CompletableFuture<Reply>> sendAll(List<byte[]> frames, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        List<CompletableFuture<Reply>> futures = new ArrayList<>(frames.size());
        ByteBuffer[] buffers = new ByteBuffer[frames.size()];
        try {
            synchronized (writeLock) {
                for (int i = 0; i < buffers.length; i++) {
                    long id = ++lastId;
                    byte[] frame = frames.get(i);
                    Protocol.setRequestId(frame, id);
                    Pending p = new Pending(deadline);
                    pending.put(id, p);
                    futures.add(p.future);
                    buffers[i] = ByteBuffer.wrap(frame);
                }
                PosencException why = closedBy.get();
                if (why != null) { // ended before these were registered: fail() may not have seen them
                    failPending(why);
                    return futures;
                }
                writeAll(buffers, deadline);
            }
        } catch (IOException e) {
            fail(new ConnectionException("cannot send to " + address + ": " + e.getMessage(), e));
        }
        return futures;
    }

    /**
     * Write every buffer. When the socket's buffer is full (the server has not read yet), wait for
     * room a few microseconds at a time; past the requests' deadline the connection is given up.
     */
    private void writeAll(ByteBuffer[] buffers, long deadline) throws IOException {
        ByteBuffer last = buffers[buffers.length - 1];
        while (last.hasRemaining()) {
            if (channel.write(buffers) > 0) {
                continue;
            }
            if (closedBy.get() != null) {
                throw new IOException("the connection ended while a frame was being written");
            }
            if (System.nanoTime() - deadline > 0) {
                throw new IOException("the server read nothing for as long as the request timeout");
            }
            LockSupport.parkNanos(WRITE_WAIT_NANOS);
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
