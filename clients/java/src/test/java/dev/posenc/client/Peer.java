package dev.posenc.client;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A loopback TCP peer that reads request frames and answers as a test scripts it: for the
 * client behaviour posenc-server never shows (replies out of order, a reply cut short, a reply
 * that never comes). Everything it writes is a frame of docs/protocol.md.
 */
final class Peer implements AutoCloseable {
    /** One received request. */
    static final class Frame {
        final int opcode;
        final long requestId;
        final int tableId;
        final byte[] aux;

        Frame(ByteBuffer b, byte[] body) {
            this.opcode = b.get(5);
            this.requestId = b.getLong(8);
            this.tableId = b.getInt(16);
            this.aux = java.util.Arrays.copyOf(body, b.getInt(24));
        }
    }

    /** What the peer does with each connection: read frames with {@link Conn#read}, answer with {@link Conn#send}. */
    interface Script {
        void run(int connection, Conn conn) throws IOException;
    }

    /** One accepted connection. */
    static final class Conn {
        private final Socket socket;
        private final DataInputStream in;
        private final OutputStream out;

        Conn(Socket socket) throws IOException {
            this.socket = socket;
            this.in = new DataInputStream(socket.getInputStream());
            this.out = socket.getOutputStream();
        }

        Frame read() throws IOException {
            byte[] head = new byte[32];
            in.readFully(head);
            ByteBuffer b = ByteBuffer.wrap(head).order(ByteOrder.LITTLE_ENDIAN);
            byte[] body = new byte[b.getInt(0) - 32];
            in.readFully(body);
            return new Frame(b, body);
        }

        List<Frame> read(int n) throws IOException {
            List<Frame> frames = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                frames.add(read());
            }
            return frames;
        }

        /** A reply frame: header fields, then aux, then row bytes. */
        void send(int opcode, int status, long requestId, int tableId, byte[] aux, int dtype, int rows, int width,
                byte[] body) throws IOException {
            ByteBuffer b = ByteBuffer.allocate(32 + aux.length + body.length).order(ByteOrder.LITTLE_ENDIAN);
            b.putInt(b.capacity()).put((byte) 1).put((byte) opcode).put((byte) status).put((byte) dtype);
            b.putLong(requestId).putInt(rows).putInt(width).putInt(aux.length).putInt(tableId).put(aux).put(body);
            out.write(b.array());
            out.flush();
        }

        /** Bytes as they are (a frame cut short). */
        void raw(byte[] bytes) throws IOException {
            out.write(bytes);
            out.flush();
        }

        /** A PING reply echoing the request's aux. */
        void echo(Frame f) throws IOException {
            send(f.opcode, 0, f.requestId, 0, f.aux, 0, 0, 0, new byte[0]);
        }

        void error(int status, long requestId, String text) throws IOException {
            send(0, status, requestId, 0, text.getBytes(java.nio.charset.StandardCharsets.UTF_8), 0, 0, 0, new byte[0]);
        }

        void close() throws IOException {
            socket.close();
        }
    }

    private final ServerSocket server;
    final AtomicInteger accepted = new AtomicInteger();

    Peer(Script script) throws IOException {
        server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread acceptor = new Thread(() -> {
            try {
                while (true) {
                    Socket s = server.accept();
                    int n = accepted.getAndIncrement();
                    Thread t = new Thread(() -> {
                        try (s) {
                            script.run(n, new Conn(s));
                        } catch (IOException ended) {
                            // the client closed: the script is over
                        }
                    }, "peer-conn-" + n);
                    t.setDaemon(true);
                    t.start();
                }
            } catch (IOException closed) {
                // the peer was closed
            }
        }, "peer-accept");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    String address() {
        return "127.0.0.1:" + server.getLocalPort();
    }

    @Override
    public void close() throws IOException {
        server.close();
    }
}
