package dev.posenc.client;

/** The operations of protocol version 1 (docs/protocol.md, "Operations"), by their wire code. */
public enum Opcode {
    PING(1),
    STATS(2),
    LIST_TABLES(3),
    RESOLVE(4),
    ENCODE_TABLE(5),
    ENCODE_SPEC(6);

    private final int code;

    Opcode(int code) {
        this.code = code;
    }

    public int code() {
        return code;
    }
}
