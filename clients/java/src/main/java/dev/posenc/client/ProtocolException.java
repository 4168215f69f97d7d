package dev.posenc.client;

/** The server's byte stream was not a valid reply frame: the connection is closed and not reused. */
public class ProtocolException extends ConnectionException {
    private static final long serialVersionUID = 1L;

    public ProtocolException(String detail) {
        super(detail);
    }
}
