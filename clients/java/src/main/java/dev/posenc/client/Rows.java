package dev.posenc.client;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The rows of an ENCODE_TABLE or ENCODE_SPEC reply: {@link #rows()} x {@link #width()} values of
 * {@link #dtype()}, row-major, kept as the little-endian bytes received (no copy until asked).
 *
 * <p>{@link #toFloatArray()} gives float32, float16 and bfloat16 rows as {@code float[]}
 * (the 16-bit values widened exactly); {@link #toDoubleArray()} gives any dtype as
 * {@code double[]} (float64 as sent, the others widened exactly). Immutable, safe to share.
 */
public final class Rows {
    private final Dtype dtype;
    private final int rows;
    private final int width;
    private final ByteBuffer data;

    Rows(Dtype dtype, int rows, int width, ByteBuffer data) {
        this.dtype = dtype;
        this.rows = rows;
        this.width = width;
        this.data = data.slice().order(ByteOrder.LITTLE_ENDIAN);
    }

    public Dtype dtype() {
        return dtype;
    }

    public int rows() {
        return rows;
    }

    public int width() {
        return width;
    }

    /** Values in all: rows * width. */
    public int size() {
        return rows * width;
    }

    /** Value {@code col} of row {@code row} as a float (not for float64 rows: see {@link #getDouble}). */
    public float getFloat(int row, int col) {
        return floatAt(index(row, col));
    }

    /** Value {@code col} of row {@code row} as a double (exact for every dtype). */
    public double getDouble(int row, int col) {
        int i = index(row, col);
        return dtype == Dtype.FLOAT64 ? data.getDouble(8 * i) : floatAt(i);
    }

    /**
     * Every value, row-major, as float32: float32 rows as sent, float16 and bfloat16 widened exactly.
     * float64 rows are refused (they would be rounded): use {@link #toDoubleArray()}.
     */
    public float[] toFloatArray() {
        float[] out = new float[size()];
        if (dtype == Dtype.FLOAT32) {
            data.asFloatBuffer().get(out);
            return out;
        }
        for (int i = 0; i < out.length; i++) {
            out[i] = floatAt(i);
        }
        return out;
    }

    /** Every value, row-major, as float64 (exact for every dtype). */
    public double[] toDoubleArray() {
        double[] out = new double[size()];
        if (dtype == Dtype.FLOAT64) {
            data.asDoubleBuffer().get(out);
            return out;
        }
        for (int i = 0; i < out.length; i++) {
            out[i] = floatAt(i);
        }
        return out;
    }

    /** Row {@code row} as a new float[] (see {@link #toFloatArray()}). */
    public float[] row(int row) {
        float[] out = new float[width];
        for (int c = 0; c < width; c++) {
            out[c] = getFloat(row, c);
        }
        return out;
    }

    /** The bytes as received: rows * width little-endian values of the dtype. */
    public byte[] toByteArray() {
        byte[] out = new byte[data.remaining()];
        data.duplicate().get(out);
        return out;
    }

    /** A read-only little-endian view of the received bytes. */
    public ByteBuffer buffer() {
        return data.asReadOnlyBuffer().order(ByteOrder.LITTLE_ENDIAN);
    }

    private int index(int row, int col) {
        if (row < 0 || row >= rows || col < 0 || col >= width) {
            throw new IndexOutOfBoundsException("(" + row + ", " + col + ") outside " + rows + "x" + width + " rows");
        }
        return row * width + col;
    }

    private float floatAt(int i) {
        switch (dtype) {
            case FLOAT32: return data.getFloat(4 * i);
            case FLOAT16: return HalfFloats.float16ToFloat(data.getShort(2 * i));
            case BFLOAT16: return HalfFloats.bfloat16ToFloat(data.getShort(2 * i));
            default:
                throw new InvalidInputException("dtype", "float64 rows would be rounded to float; read them with "
                        + "getDouble or toDoubleArray");
        }
    }
}
