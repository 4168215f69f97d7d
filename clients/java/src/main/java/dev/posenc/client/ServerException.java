package dev.posenc.client;

import dev.posenc.PosencException;

/**
 * The server answered with an error frame (docs/protocol.md, "Errors"). {@link #statusCode()} is
 * the wire status, {@link #field()} and {@link #detail()} come from its {@code "field: message"}
 * text. Each status has its own subclass ({@link UnknownTable}, {@link PositionOutOfRange},
 * {@link BadArgument}, ...), so a caller catches exactly the refusals it handles; a status this
 * version does not know is a plain {@code ServerException} that {@link #closesConnection()}.
 */
public class ServerException extends PosencException {
    private static final long serialVersionUID = 1L;

    private final int statusCode;
    private final long requestId;

    ServerException(int statusCode, String field, String detail, long requestId) {
        super(field, detail);
        this.statusCode = statusCode;
        this.requestId = requestId;
    }

    /**
     * The exception for an error frame: {@code text} is its aux text, "field: message" (a text
     * without ": " counts as a message about the "request").
     */
    public static ServerException of(int statusCode, String text, long requestId) {
        int colon = text.indexOf(": ");
        String field = colon < 0 ? "request" : text.substring(0, colon);
        String detail = colon < 0 ? text : text.substring(colon + 2);
        Status status = Status.ofCode(statusCode);
        if (status == null) {
            return new ServerException(statusCode, field, detail, requestId);
        }
        switch (status) {
            case BAD_FRAME: return new BadFrame(field, detail, requestId);
            case BAD_VERSION: return new BadVersion(field, detail, requestId);
            case UNKNOWN_OPCODE: return new UnknownOpcode(field, detail, requestId);
            case FRAME_TOO_LARGE: return new FrameTooLarge(field, detail, requestId);
            case TOO_MANY_POSITIONS: return new TooManyPositions(field, detail, requestId);
            case UNKNOWN_TABLE: return new UnknownTable(field, detail, requestId);
            case POSITION_OUT_OF_RANGE: return new PositionOutOfRange(field, detail, requestId);
            case BAD_ARGUMENT: return new BadArgument(field, detail, requestId);
            case OUTPUT_TOO_LARGE: return new OutputTooLarge(field, detail, requestId);
            case TOO_MANY_CONNECTIONS: return new TooManyConnections(field, detail, requestId);
            case SHUTTING_DOWN: return new ShuttingDown(field, detail, requestId);
            case TABLE_UNAVAILABLE: return new TableUnavailable(field, detail, requestId);
            case INTERNAL: return new Internal(field, detail, requestId);
            case IDLE_TIMEOUT: return new IdleTimeout(field, detail, requestId);
            default: return new ServerException(statusCode, field, detail, requestId);
        }
    }

    /** The wire status code (1..14 in protocol version 1). */
    public int statusCode() {
        return statusCode;
    }

    /** The status, or null for a code this client does not know. */
    public Status status() {
        return Status.ofCode(statusCode);
    }

    /** The status name as docs/protocol.md spells it ("UNKNOWN_TABLE"), or "STATUS_N". */
    public String statusName() {
        Status s = status();
        return s == null ? "STATUS_" + statusCode : s.name();
    }

    /** The request id the frame echoed (0 for errors about the stream, which close it). */
    public long requestId() {
        return requestId;
    }

    /** True when the server closes the connection after this error (unknown codes included). */
    public boolean closesConnection() {
        Status s = status();
        return s == null || s.closes();
    }

    /** BAD_FRAME (closes): a frame's length or reserved field was wrong, or the stream ended inside one. */
    public static final class BadFrame extends ServerException {
        private static final long serialVersionUID = 1L;
        BadFrame(String field, String detail, long id) { super(1, field, detail, id); }
    }

    /** BAD_VERSION (closes). */
    public static final class BadVersion extends ServerException {
        private static final long serialVersionUID = 1L;
        BadVersion(String field, String detail, long id) { super(2, field, detail, id); }
    }

    /** UNKNOWN_OPCODE (closes). */
    public static final class UnknownOpcode extends ServerException {
        private static final long serialVersionUID = 1L;
        UnknownOpcode(String field, String detail, long id) { super(3, field, detail, id); }
    }

    /** FRAME_TOO_LARGE (closes): a frame over the server's --max-frame-bytes. */
    public static final class FrameTooLarge extends ServerException {
        private static final long serialVersionUID = 1L;
        FrameTooLarge(String field, String detail, long id) { super(4, field, detail, id); }
    }

    /** TOO_MANY_POSITIONS: more positions than the server's --max-positions. */
    public static final class TooManyPositions extends ServerException {
        private static final long serialVersionUID = 1L;
        TooManyPositions(String field, String detail, long id) { super(5, field, detail, id); }
    }

    /** UNKNOWN_TABLE: no such table name, or the table was removed. */
    public static final class UnknownTable extends ServerException {
        private static final long serialVersionUID = 1L;
        UnknownTable(String field, String detail, long id) { super(6, field, detail, id); }
    }

    /** POSITION_OUT_OF_RANGE: a position outside the table, not finite, or beyond the server's limit. */
    public static final class PositionOutOfRange extends ServerException {
        private static final long serialVersionUID = 1L;
        PositionOutOfRange(String field, String detail, long id) { super(7, field, detail, id); }
    }

    /** BAD_ARGUMENT: a field is invalid (dtype, a table name, an inline-spec field, ...). */
    public static final class BadArgument extends ServerException {
        private static final long serialVersionUID = 1L;
        BadArgument(String field, String detail, long id) { super(8, field, detail, id); }
    }

    /** OUTPUT_TOO_LARGE: the reply would exceed the server's --max-response-bytes. */
    public static final class OutputTooLarge extends ServerException {
        private static final long serialVersionUID = 1L;
        OutputTooLarge(String field, String detail, long id) { super(9, field, detail, id); }
    }

    /** TOO_MANY_CONNECTIONS (closes): sent right after accept. */
    public static final class TooManyConnections extends ServerException {
        private static final long serialVersionUID = 1L;
        TooManyConnections(String field, String detail, long id) { super(10, field, detail, id); }
    }

    /** SHUTTING_DOWN (closes): the drain timeout passed; the text says what was left unanswered. */
    public static final class ShuttingDown extends ServerException {
        private static final long serialVersionUID = 1L;
        ShuttingDown(String field, String detail, long id) { super(11, field, detail, id); }
    }

    /** TABLE_UNAVAILABLE: the table's segment failed validation. */
    public static final class TableUnavailable extends ServerException {
        private static final long serialVersionUID = 1L;
        TableUnavailable(String field, String detail, long id) { super(12, field, detail, id); }
    }

    /** INTERNAL: out of memory, no table id left, and the like. */
    public static final class Internal extends ServerException {
        private static final long serialVersionUID = 1L;
        Internal(String field, String detail, long id) { super(13, field, detail, id); }
    }

    /** IDLE_TIMEOUT (closes): no traffic for the server's --idle-timeout-ms. */
    public static final class IdleTimeout extends ServerException {
        private static final long serialVersionUID = 1L;
        IdleTimeout(String field, String detail, long id) { super(14, field, detail, id); }
    }
}
