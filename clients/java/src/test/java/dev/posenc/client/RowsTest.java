package dev.posenc.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.junit.jupiter.api.Test;

/** Reply rows of each dtype decoded to float[] and double[]. */
class RowsTest {
    private static Rows rows(Dtype dtype, int n, int width, ByteBuffer values) {
        byte[] payload = new byte[3 + values.capacity()]; // an aux block of 3 bytes before the rows
        System.arraycopy(values.array(), 0, payload, 3, values.capacity());
        return new Rows(dtype, n, width, ByteBuffer.wrap(payload, 3, values.capacity()));
    }

    private static ByteBuffer le(int bytes) {
        return ByteBuffer.allocate(bytes).order(ByteOrder.LITTLE_ENDIAN);
    }

    @Test
    void float32RowsAreTheirBits() {
        ByteBuffer b = le(16);
        b.asFloatBuffer().put(new float[] {1.5f, -0.0f, Float.MIN_VALUE, 3e38f});
        Rows r = rows(Dtype.FLOAT32, 2, 2, b);
        assertArrayEquals(new float[] {1.5f, -0.0f, Float.MIN_VALUE, 3e38f}, r.toFloatArray());
        assertArrayEquals(new double[] {1.5, -0.0, Float.MIN_VALUE, 3e38f}, r.toDoubleArray());
        assertEquals(Float.MIN_VALUE, r.getFloat(1, 0));
        assertArrayEquals(new float[] {Float.MIN_VALUE, 3e38f}, r.row(1));
        assertArrayEquals(b.array(), r.toByteArray());
        assertEquals(4, r.size());
    }

    @Test
    void float16AndBfloat16RowsAreWidenedExactly() {
        ByteBuffer half = le(6);
        half.putShort(0, (short) 0x3c00).putShort(2, (short) 0x0001).putShort(4, (short) 0xfbff);
        assertArrayEquals(new float[] {1.0f, 0x1p-24f, -65504.0f}, rows(Dtype.FLOAT16, 1, 3, half).toFloatArray());
        ByteBuffer bf = le(4);
        bf.putShort(0, (short) 0x3f80).putShort(2, (short) 0xc049);
        Rows r = rows(Dtype.BFLOAT16, 2, 1, bf);
        assertArrayEquals(new float[] {1.0f, Float.intBitsToFloat(0xc0490000)}, r.toFloatArray());
        assertEquals((double) Float.intBitsToFloat(0xc0490000), r.getDouble(1, 0));
    }

    @Test
    void float64RowsAreDoublesAndNeverRoundedToFloat() {
        ByteBuffer b = le(16);
        b.asDoubleBuffer().put(new double[] {0.1, -1e300});
        Rows r = rows(Dtype.FLOAT64, 1, 2, b);
        assertArrayEquals(new double[] {0.1, -1e300}, r.toDoubleArray());
        assertEquals(0.1, r.getDouble(0, 0));
        InvalidInputException e = assertThrows(InvalidInputException.class, r::toFloatArray);
        assertEquals("dtype", e.field());
    }

    @Test
    void anIndexOutsideTheRowsIsRefused() {
        Rows r = rows(Dtype.FLOAT32, 1, 2, le(8));
        assertThrows(IndexOutOfBoundsException.class, () -> r.getFloat(1, 0));
        assertThrows(IndexOutOfBoundsException.class, () -> r.getFloat(0, 2));
        assertThrows(IndexOutOfBoundsException.class, () -> r.getDouble(-1, 0));
    }

    @Test
    void noRowsDecodeToEmptyArrays() {
        Rows r = rows(Dtype.FLOAT16, 0, 128, le(0));
        assertEquals(0, r.toFloatArray().length);
        assertEquals(128, r.width());
    }
}
