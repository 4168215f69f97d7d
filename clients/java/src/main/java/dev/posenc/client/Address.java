package dev.posenc.client;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.StandardProtocolFamily;
import java.net.StandardSocketOptions;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.time.Duration;

/**
 * Where a posenc binary server listens, spelled as the Python client spells it: "host:port",
 * "tcp://host:port", "[::1]:port", "unix:/path" (or "unix:///path"), or a path starting with
 * "/" or "./" for a Unix socket.
 */
public final class Address {
    private final String host;
    private final int port;
    private final String path;

    private Address(String host, int port, String path) {
        this.host = host;
        this.port = port;
        this.path = path;
    }

    public static Address parse(String address) {
        if (address == null || address.isEmpty()) {
            throw new InvalidInputException("address", "must be 'host:port' or 'unix:/path', got '" + address + "'");
        }
        if (address.startsWith("unix:")) {
            String path = address.substring("unix:".length());
            return new Address(null, 0, path.startsWith("///") ? path.substring(2) : path);
        }
        if (address.startsWith("/") || address.startsWith("./")) {
            return new Address(null, 0, address);
        }
        String rest = address.startsWith("tcp://") ? address.substring("tcp://".length()) : address;
        int colon = rest.lastIndexOf(':');
        if (colon <= 0) {
            throw new InvalidInputException("address", "'" + address + "' needs a port ('host:port')");
        }
        String host = rest.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        int port;
        try {
            port = Integer.parseInt(rest.substring(colon + 1));
        } catch (NumberFormatException e) {
            throw new InvalidInputException("address", "port must be an integer, got '" + rest.substring(colon + 1) + "'");
        }
        if (port < 1 || port > 65535) {
            throw new InvalidInputException("address", "port must be in 1..65535, got " + port);
        }
        return new Address(host, port, null);
    }

    /** A connected blocking channel (TCP_NODELAY on TCP), or a ConnectionException. */
    SocketChannel connect(Duration timeout) {
        SocketChannel channel = null;
        try {
            SocketAddress target = path != null ? UnixDomainSocketAddress.of(path) : new InetSocketAddress(host, port);
            channel = path != null ? SocketChannel.open(StandardProtocolFamily.UNIX) : SocketChannel.open();
            if (path == null) {
                channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
            }
            channel.configureBlocking(false);
            if (!channel.connect(target)) {
                try (Selector selector = Selector.open()) {
                    channel.register(selector, SelectionKey.OP_CONNECT);
                    long millis = Math.max(1, timeout.toMillis());
                    if (selector.select(millis) == 0 && !channel.finishConnect()) {
                        throw new ConnectionException("cannot connect to " + this + ": no answer within " + millis + " ms");
                    }
                    channel.finishConnect();
                }
            }
            channel.configureBlocking(true);
            return channel;
        } catch (IOException | RuntimeException e) {
            closeQuietly(channel);
            if (e instanceof ConnectionException) {
                throw (ConnectionException) e;
            }
            throw new ConnectionException("cannot connect to " + this + ": " + e.getMessage(), e);
        }
    }

    private static void closeQuietly(SocketChannel channel) {
        if (channel != null) {
            try {
                channel.close();
            } catch (IOException ignored) {
                // the connection failed already; that error is the one reported
            }
        }
    }

    @Override
    public String toString() {
        if (path != null) {
            return "unix:" + path;
        }
        return host.contains(":") ? "[" + host + "]:" + port : host + ":" + port;
    }
}
