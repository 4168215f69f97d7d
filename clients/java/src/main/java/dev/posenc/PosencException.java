package dev.posenc;

/**
 * The root of every exception this library throws: something was wrong, and {@link #field()}
 * names what ("positions", "spec.n_freq", "segment", "connection", ...), as the server and the
 * Python library name it. {@link #getMessage()} is {@code "field: message"}, the server's own
 * spelling of an error.
 *
 * <p>Unchecked, so that a caller who wants one handler catches this type and a caller who cares
 * about one case catches its subclass: {@code dev.posenc.client.ServerException} (the server
 * refused a request), {@code dev.posenc.client.InvalidInputException} (refused here, before
 * anything was sent), {@code dev.posenc.client.ConnectionException} (the transport failed) and
 * {@code dev.posenc.shm.ShmException} (a shared-memory table could not be read).
 */
public class PosencException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String field;
    private final String detail;

    public PosencException(String field, String detail) {
        this(field, detail, null);
    }

    public PosencException(String field, String detail, Throwable cause) {
        super(field + ": " + detail, cause);
        this.field = field;
        this.detail = detail;
    }

    /** What was wrong: a request field, a spec field, "connection", "segment", ... */
    public String field() {
        return field;
    }

    /** The message without the leading {@code "field: "}. */
    public String detail() {
        return detail;
    }
}
