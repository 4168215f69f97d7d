package dev.posenc.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;

/**
 * The pool and the pipelined connections against a scripted peer: what posenc-server never does
 * (answer out of order, stop mid-stream, stay silent) and what the client must do then.
 */
class PosencClientTest {
    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void repliesAreMatchedByRequestIdNotByOrder() throws Exception {
        try (Peer peer = new Peer((n, conn) -> {
            while (true) {
                List<Peer.Frame> three = conn.read(3);
                Collections.reverse(three);
                for (Peer.Frame f : three) {
                    conn.echo(f);
                }
            }
        }); PosencClient client = PosencClient.builder(peer.address()).poolSize(1).build()) {
            List<CompletableFuture<byte[]>> futures = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                futures.add(client.pingAsync(new byte[] {(byte) i}));
            }
            for (int i = 0; i < 3; i++) {
                assertArrayEquals(new byte[] {(byte) i}, futures.get(i).get(5, TimeUnit.SECONDS));
            }
        }
    }

    @Test
    void manyThreadsShareOneConnectionEachGettingItsOwnReply() throws Exception {
        try (Peer peer = new Peer((n, conn) -> {
            while (true) {
                conn.echo(conn.read());
            }
        }); PosencClient client = PosencClient.builder(peer.address()).poolSize(1).build()) {
            List<Throwable> failures = new CopyOnWriteArrayList<>();
            CountDownLatch done = new CountDownLatch(8);
            for (int t = 0; t < 8; t++) {
                int thread = t;
                new Thread(() -> {
                    try {
                        for (int i = 0; i < 200; i++) {
                            byte[] payload = bytes(thread + "/" + i);
                            assertArrayEquals(payload, client.ping(payload));
                        }
                    } catch (Throwable e) {
                        failures.add(e);
                    } finally {
                        done.countDown();
                    }
                }).start();
            }
            assertTrue(done.await(30, TimeUnit.SECONDS));
            assertEquals(List.of(), failures);
            assertEquals(1, peer.accepted.get());
        }
    }

    @Test
    void framesLargerThanTheSocketBufferAreWrittenWholeAndInOrder() throws Exception {
        try (Peer peer = new Peer((n, conn) -> {
            while (true) {
                conn.echo(conn.read());
            }
        }); PosencClient client = PosencClient.builder(peer.address()).poolSize(1).build()) {
            byte[] big = new byte[16 << 20]; // far more than a loopback socket buffers: the loop finishes the write
            new java.util.Random(36).nextBytes(big);
            List<CompletableFuture<byte[]>> replies = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                replies.add(client.pingAsync(big));
                replies.add(client.pingAsync(new byte[] {(byte) i}));
            }
            for (int i = 0; i < 3; i++) {
                assertArrayEquals(big, replies.get(2 * i).get(30, TimeUnit.SECONDS));
                assertArrayEquals(new byte[] {(byte) i}, replies.get(2 * i + 1).get(30, TimeUnit.SECONDS));
            }
        }
    }

    @Test
    void aFrameLevelErrorGoesToTheFirstUnansweredRequestAndTheOthersAreSentAgain() throws Exception {
        try (Peer peer = new Peer((n, conn) -> {
            if (n == 0) { // answer the first, refuse the second's frame, never read the third
                List<Peer.Frame> frames = conn.read(3);
                conn.echo(frames.get(0));
                conn.error(4, 0, "length: 9999999 is over --max-frame-bytes 2097152");
                conn.close();
                return;
            }
            while (true) {
                conn.echo(conn.read());
            }
        }); PosencClient client = PosencClient.builder(peer.address()).poolSize(1).build()) {
            CompletableFuture<byte[]> first = new CompletableFuture<>();
            CompletableFuture<byte[]> second = new CompletableFuture<>();
            CompletableFuture<byte[]> third = new CompletableFuture<>();
            Pipeline p = client.pipeline();
            p.ping(bytes("a")).whenComplete((v, e) -> complete(first, v, e));
            p.ping(bytes("b")).whenComplete((v, e) -> complete(second, v, e));
            p.ping(bytes("c")).whenComplete((v, e) -> complete(third, v, e));
            p.execute();
            assertArrayEquals(bytes("a"), first.get());
            Throwable refused = assertThrows(Exception.class, second::get).getCause();
            assertEquals(ServerException.FrameTooLarge.class, refused.getClass());
            assertEquals("length", ((ServerException) refused).field());
            Throwable unread = assertThrows(Exception.class, third::get).getCause();
            assertTrue(unread instanceof ConnectionException, unread.toString());
            // the pool's own calls are sent again on a new connection
            assertArrayEquals(bytes("d"), client.ping(bytes("d")));
            assertEquals(2, peer.accepted.get());
        }
    }

    private static <T> void complete(CompletableFuture<T> f, T value, Throwable error) {
        if (error != null) {
            f.completeExceptionally(error);
        } else {
            f.complete(value);
        }
    }

    @Test
    void aRequestTheServerClosedOnIsSentAgainOnANewConnection() throws Exception {
        List<PosencExceptionHolder> ends = new CopyOnWriteArrayList<>();
        try (Peer peer = new Peer((n, conn) -> {
            if (n == 0) {
                conn.read();
                conn.close(); // a restart: EOF, the request unanswered
                return;
            }
            while (true) {
                conn.echo(conn.read());
            }
        }); PosencClient client = PosencClient.builder(peer.address()).poolSize(1)
                .onConnectionEnd(why -> ends.add(new PosencExceptionHolder(why))).build()) {
            assertArrayEquals(bytes("x"), client.ping(bytes("x")));
            assertEquals(2, peer.accepted.get());
            assertTrue(ends.get(0).why instanceof ServerClosedException, ends.toString());
        }
    }

    /** A listener's argument, kept. */
    private static final class PosencExceptionHolder {
        final Exception why;

        PosencExceptionHolder(Exception why) {
            this.why = why;
        }

        @Override
        public String toString() {
            return String.valueOf(why);
        }
    }

    @Test
    void withoutRetriesTheCallerSeesTheCleanClose() throws Exception {
        try (Peer peer = new Peer((n, conn) -> {
            conn.read();
            conn.close();
        }); PosencClient client = PosencClient.builder(peer.address()).poolSize(1).retries(0).build()) {
            ServerClosedException e = assertThrows(ServerClosedException.class, () -> client.ping(bytes("x")));
            assertEquals("connection", e.field());
            assertTrue(e.detail().contains("1 request unanswered"), e.detail());
        }
    }

    @Test
    void aReplyCutShortIsAProtocolErrorAndNotRetried() throws Exception {
        try (Peer peer = new Peer((n, conn) -> {
            Peer.Frame f = conn.read();
            ByteBuffer head = ByteBuffer.allocate(36).order(ByteOrder.LITTLE_ENDIAN);
            head.putInt(40).put((byte) 1).put((byte) f.opcode).put((byte) 0).put((byte) 0).putLong(f.requestId);
            head.putInt(0).putInt(0).putInt(8).putInt(0).putInt(0x61616161); // 4 of the 8 aux bytes
            conn.raw(head.array());
            conn.close();
        }); PosencClient client = PosencClient.builder(peer.address()).poolSize(1).build()) {
            ProtocolException e = assertThrows(ProtocolException.class, () -> client.ping(bytes("abcdefgh")));
            assertTrue(e.detail().contains("inside a reply"), e.detail());
            assertEquals(1, peer.accepted.get());
        }
    }

    @Test
    void aSilentServerTimesOutTheRequestAndTheConnectionStaysUsable() throws Exception {
        AtomicInteger seen = new AtomicInteger();
        try (Peer peer = new Peer((n, conn) -> {
            while (true) {
                Peer.Frame f = conn.read();
                if (seen.getAndIncrement() > 0) { // the first request is never answered
                    conn.echo(f);
                }
            }
        }); PosencClient client = PosencClient.builder(peer.address()).poolSize(1)
                .requestTimeout(Duration.ofMillis(300)).build()) {
            long start = System.nanoTime();
            RequestTimeoutException e = assertThrows(RequestTimeoutException.class, () -> client.ping(bytes("lost")));
            long ms = (System.nanoTime() - start) / 1_000_000;
            assertTrue(ms >= 300 && ms < 3000, ms + " ms");
            assertEquals("timeout", e.field());
            assertArrayEquals(bytes("ok"), client.ping(bytes("ok")));
            assertEquals(1, peer.accepted.get());
        }
    }

    @Test
    void aNameIsResolvedOncePerConnectionAndAgainOnANewOne() throws Exception {
        ConcurrentHashMap<Integer, AtomicInteger> resolves = new ConcurrentHashMap<>();
        try (Peer peer = new Peer((n, conn) -> {
            for (int served = 0;; served++) {
                Peer.Frame f = conn.read();
                if (f.opcode == Opcode.RESOLVE.code()) {
                    resolves.computeIfAbsent(n, k -> new AtomicInteger()).incrementAndGet();
                    byte[] json = bytes("{\"id\":" + (10 + n) + ",\"name\":\"t\",\"width\":1}");
                    conn.send(f.opcode, 0, f.requestId, 10 + n, json, 0, 0, 1, new byte[0]);
                    continue;
                }
                assertEquals(10 + n, f.tableId); // the id this connection's server process gave
                byte[] row = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putFloat(n).array();
                conn.send(f.opcode, 0, f.requestId, f.tableId, new byte[0], 0, 1, 1, row);
                if (n == 0 && served == 2) {
                    conn.close(); // the server restarts after the second encode
                    return;
                }
            }
        }); PosencClient client = PosencClient.builder(peer.address()).poolSize(1).build()) {
            assertEquals(0f, client.encode("t", 5).getFloat(0, 0));
            assertEquals(0f, client.encode("t", 6).getFloat(0, 0));
            Thread.sleep(100); // the close reaches the reader
            assertEquals(1f, client.encode("t", 7).getFloat(0, 0));
            assertEquals(1, resolves.get(0).get());
            assertEquals(1, resolves.get(1).get());
        }
    }

    @Test
    void badInputIsRefusedBeforeAConnectionIsUsed() throws Exception {
        try (Peer peer = new Peer((n, conn) -> {
            while (true) {
                conn.echo(conn.read());
            }
        }); PosencClient client = PosencClient.builder(peer.address()).poolSize(1).build()) {
            assertEquals("name", assertThrows(InvalidInputException.class,
                    () -> client.encode("../registry", 1)).field());
            assertEquals("name", assertThrows(InvalidInputException.class, () -> client.resolve("sin\u00e9")).field());
            assertEquals("dtype", assertThrows(InvalidInputException.class, () -> Dtype.ofName("float8")).field());
            assertEquals("dtype", assertThrows(InvalidInputException.class,
                    () -> client.encode("t", Positions.of(1L), null)).field());
        }
    }

    @Test
    void aServerThatIsNotThereIsAConnectionError() {
        ConnectionException e = assertThrows(ConnectionException.class,
                () -> PosencClient.builder("127.0.0.1:1").connectTimeout(Duration.ofSeconds(2)).build());
        assertEquals("connection", e.field());
    }
}
