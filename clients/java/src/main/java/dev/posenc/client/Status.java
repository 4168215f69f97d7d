package dev.posenc.client;

/**
 * Reply status codes (docs/protocol.md, "Errors"). The ones that {@link #closes()} end the stream:
 * the server half-closes the connection after their frame.
 */
public enum Status {
    OK(0, false),
    BAD_FRAME(1, true),
    BAD_VERSION(2, true),
    UNKNOWN_OPCODE(3, true),
    FRAME_TOO_LARGE(4, true),
    TOO_MANY_POSITIONS(5, false),
    UNKNOWN_TABLE(6, false),
    POSITION_OUT_OF_RANGE(7, false),
    BAD_ARGUMENT(8, false),
    OUTPUT_TOO_LARGE(9, false),
    TOO_MANY_CONNECTIONS(10, true),
    SHUTTING_DOWN(11, true),
    TABLE_UNAVAILABLE(12, false),
    INTERNAL(13, false),
    IDLE_TIMEOUT(14, true);

    private final int code;
    private final boolean closes;

    Status(int code, boolean closes) {
        this.code = code;
        this.closes = closes;
    }

    public int code() {
        return code;
    }

    /** True when the server closes the connection after this error. */
    public boolean closes() {
        return closes;
    }

    /** The status of a wire code, or null for a code this version does not know (which closes). */
    public static Status ofCode(int code) {
        for (Status s : values()) {
            if (s.code == code) {
                return s;
            }
        }
        return null;
    }
}
