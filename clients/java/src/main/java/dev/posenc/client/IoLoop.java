package dev.posenc.client;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * One thread that reads the replies of many connections: a Selector over their non-blocking
 * sockets. A connection's replies are parsed and its requests' futures completed here, in the
 * order they arrive, so one wake-up serves every reply that came in meanwhile, on every
 * connection: on a few busy CPUs that is what keeps a pool of hundreds of connections from
 * costing a thread switch per reply. Frames the callbacks send meanwhile (the next request of a
 * pipeline), and frames other threads hand over for a busy connection, go out at the end of the
 * iteration, one write a connection; and the loop writes what a full socket buffer left over once
 * the socket is writable again.
 */
final class IoLoop implements Runnable {
    private final Selector selector;
    private final Queue<Connection> joining = new ConcurrentLinkedQueue<>();
    private final Queue<Connection> blocked = new ConcurrentLinkedQueue<>();
    private final Queue<Connection> flushing = new ConcurrentLinkedQueue<>();
    /** Connections whose callbacks queued frames in this iteration (loop thread only). */
    private final List<Connection> dirty = new ArrayList<>();
    private final Thread thread;
    private volatile boolean closed;

    IoLoop(String name) {
        try {
            this.selector = Selector.open();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        this.thread = new Thread(this, name);
        thread.setDaemon(true);
        thread.start();
    }

    /** Start reading {@code c}'s replies (registration happens on the loop's thread). */
    void add(Connection c) {
        joining.add(c);
        selector.wakeup();
    }

    /** {@code c}'s socket buffer is full: write its outbox when it is writable again. */
    void wantWrite(Connection c) {
        blocked.add(c);
        selector.wakeup();
    }

    /** Write {@code c}'s outbox at the end of this iteration (called on the loop's thread). */
    void flushLater(Connection c) {
        if (!c.dirty) {
            c.dirty = true;
            dirty.add(c);
        }
    }

    /** Write {@code c}'s outbox in the loop's next iteration (called by any other thread). */
    void flushSoon(Connection c) {
        flushing.add(c);
        selector.wakeup();
    }

    /** True when the caller runs on this loop's thread (a future's callback). */
    boolean isLoopThread() {
        return Thread.currentThread() == thread;
    }

    @Override
    public void run() {
        try {
            while (!closed) {
                selector.select();
                for (Connection c; (c = joining.poll()) != null;) {
                    try {
                        c.channel().register(selector, SelectionKey.OP_READ, c);
                    } catch (ClosedChannelException alreadyEnded) {
                        // closed before it joined: its requests were failed by whoever closed it
                    }
                }
                for (Connection c; (c = flushing.poll()) != null;) {
                    flushLater(c);
                }
                for (Connection c; (c = blocked.poll()) != null;) {
                    SelectionKey key = c.channel().keyFor(selector);
                    if (key != null && key.isValid()) {
                        key.interestOps(SelectionKey.OP_READ | SelectionKey.OP_WRITE);
                    }
                }
                for (SelectionKey key : selector.selectedKeys()) {
                    Connection c = (Connection) key.attachment();
                    if (key.isValid() && key.isReadable()) {
                        c.readReplies();
                    }
                    if (key.isValid() && key.isWritable()) {
                        key.interestOps(SelectionKey.OP_READ);
                        c.onWritable();
                    }
                }
                selector.selectedKeys().clear();
                for (Connection c : dirty) { // what the callbacks sent: one write a connection
                    c.dirty = false;
                    c.flushFromLoop();
                }
                dirty.clear();
            }
        } catch (IOException | RuntimeException e) {
            // the selector itself failed: nothing more can be read; the connections' requests time out
            e.printStackTrace();
        } finally {
            try {
                selector.close();
            } catch (IOException ignored) {
                // closing: nothing left to read
            }
        }
    }

    void close() {
        closed = true;
        selector.wakeup();
    }
}
