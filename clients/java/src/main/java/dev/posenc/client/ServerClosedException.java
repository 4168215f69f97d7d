package dev.posenc.client;

/**
 * The server ended the connection cleanly (EOF after its last reply, no error frame): what a
 * drain at SIGTERM, a restart or a server-side close looks like. Requests still waiting on that
 * connection were never answered, and a pool sends them again on a new connection.
 */
public class ServerClosedException extends ConnectionException {
    private static final long serialVersionUID = 1L;

    public ServerClosedException(String detail) {
        super(detail);
    }
}
