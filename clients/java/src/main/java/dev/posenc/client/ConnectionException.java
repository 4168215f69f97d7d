package dev.posenc.client;

import dev.posenc.PosencException;

/**
 * The transport failed: the server could not be reached, the connection ended before a reply,
 * or (subclass {@link ProtocolException}) the bytes received were not a valid reply. The field
 * is "connection". A request that failed so was never answered; {@link PosencClient} retries it
 * once on a new connection (every operation is a read, so a retry cannot do anything twice).
 */
public class ConnectionException extends PosencException {
    private static final long serialVersionUID = 1L;

    public ConnectionException(String detail) {
        super("connection", detail);
    }

    public ConnectionException(String detail, Throwable cause) {
        super("connection", detail, cause);
    }
}
