package dev.posenc.harness;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/** Hex spellings of the case list: bytes, and float64 bit patterns (big-endian digits). */
final class Hex {
    private Hex() {
    }

    static String of(byte[] bytes) {
        StringBuilder b = new StringBuilder(bytes.length * 2);
        for (byte x : bytes) {
            b.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
        }
        return b.toString();
    }

    static byte[] bytes(String hex) {
        byte[] out = new byte[hex.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    /** A float64 from the 16 hex digits of its bit pattern (NaN, inf and -0.0 exactly). */
    static double float64(String bits) {
        return Double.longBitsToDouble(Long.parseUnsignedLong(bits, 16));
    }

    /** Little-endian float32 bytes of the values, as hex. */
    static String float32s(float[] values) {
        ByteBuffer b = ByteBuffer.allocate(4 * values.length).order(ByteOrder.LITTLE_ENDIAN);
        b.asFloatBuffer().put(values);
        return of(b.array());
    }

    /** Little-endian float64 bytes of the values, as hex. */
    static String float64s(double[] values) {
        ByteBuffer b = ByteBuffer.allocate(8 * values.length).order(ByteOrder.LITTLE_ENDIAN);
        b.asDoubleBuffer().put(values);
        return of(b.array());
    }
}
