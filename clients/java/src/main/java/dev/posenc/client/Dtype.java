package dev.posenc.client;

import java.util.Locale;

/**
 * The dtype of reply rows, by its wire code and item size (docs/protocol.md, "Request frame").
 * bfloat16 is the top 16 bits of a float32. Every float16 and bfloat16 value is a float32 value,
 * so {@link Rows#toFloatArray()} widens them exactly; float64 rows are read as {@code double}.
 */
public enum Dtype {
    FLOAT32(0, 4),
    FLOAT16(1, 2),
    BFLOAT16(2, 2),
    FLOAT64(3, 8);

    private final int code;
    private final int itemsize;

    Dtype(int code, int itemsize) {
        this.code = code;
        this.itemsize = itemsize;
    }

    public int code() {
        return code;
    }

    /** Bytes per value on the wire. */
    public int itemsize() {
        return itemsize;
    }

    /** The lower-case name the protocol and the Python library use ("float32", "bfloat16", ...). */
    public String wireName() {
        return name().toLowerCase(Locale.ROOT);
    }

    /** The dtype of a wire code, or null for a code this version does not know. */
    public static Dtype ofCode(int code) {
        for (Dtype d : values()) {
            if (d.code == code) {
                return d;
            }
        }
        return null;
    }

    /** The dtype called {@code name} ("float32", "float16", "bfloat16", "float64"). */
    public static Dtype ofName(String name) {
        for (Dtype d : values()) {
            if (d.wireName().equals(name)) {
                return d;
            }
        }
        throw new InvalidInputException("dtype", "unsupported dtype '" + name
                + "'; choose one of [bfloat16, float16, float32, float64]");
    }
}
