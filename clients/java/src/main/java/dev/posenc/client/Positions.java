package dev.posenc.client;

import java.nio.ByteBuffer;

/**
 * The positions of one request: int64 ({@code long[]}, or a range) or float64 ({@code double[]}),
 * as docs/protocol.md's {@code position_kind} says. The server checks the values (range,
 * finiteness, integrality for a stored table) and names the bad element; the client only frames
 * them, refusing locally only a count no frame can carry. An array is read when the request is
 * built (the call that takes it), not kept.
 */
public final class Positions {
    private final long[] ints;
    private final double[] floats;
    private final long rangeStart;
    private final long count;

    private Positions(long[] ints, double[] floats, long rangeStart, long count) {
        this.ints = ints;
        this.floats = floats;
        this.rangeStart = rangeStart;
        this.count = count;
    }

    /** Integer positions (token indices, ids, millisecond timestamps), sent as int64. */
    public static Positions of(long... positions) {
        if (positions == null) {
            throw new InvalidInputException("positions", "must be an array of numbers, got null");
        }
        return new Positions(positions, null, 0, positions.length);
    }

    /** Any positions, fractional ones included, sent as float64. */
    public static Positions of(double... positions) {
        if (positions == null) {
            throw new InvalidInputException("positions", "must be an array of numbers, got null");
        }
        return new Positions(null, positions, 0, positions.length);
    }

    /** The int64 positions {@code start, start + 1, ..., start + count - 1}. */
    public static Positions range(long start, long count) {
        if (count < 0) {
            throw new InvalidInputException("positions", "a range needs a count >= 0, got " + count);
        }
        return new Positions(null, null, start, count);
    }

    /** {@link Protocol#POSITIONS_INT64} or {@link Protocol#POSITIONS_FLOAT64}. */
    public int kind() {
        return floats == null ? Protocol.POSITIONS_INT64 : Protocol.POSITIONS_FLOAT64;
    }

    public long count() {
        return count;
    }

    /** Write the values little-endian at {@code b}'s position (b must be little-endian). */
    void writeTo(ByteBuffer b) {
        if (ints != null) {
            b.asLongBuffer().put(ints);
        } else if (floats != null) {
            b.asDoubleBuffer().put(floats);
        } else {
            for (long i = 0; i < count; i++) {
                b.putLong(b.position() + (int) (8 * i), rangeStart + i);
            }
        }
        b.position(b.position() + (int) (8 * count));
    }
}
