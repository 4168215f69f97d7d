package dev.posenc.client;

/**
 * float16 and bfloat16 bits widened to float32. Both formats are subsets of float32 (fewer
 * exponent or mantissa bits), so every value, subnormals, infinities and NaN payloads included,
 * has an exact float32 twin: widening never rounds. (Java 17 has no {@code Float.float16ToFloat};
 * it came in Java 20 and gives the same values.)
 */
public final class HalfFloats {
    private HalfFloats() {
    }

    /** The float32 value of IEEE-754 binary16 bits (the low 16 bits of {@code bits}). */
    public static float float16ToFloat(int bits) {
        int sign = (bits & 0x8000) << 16;
        int exponent = (bits >>> 10) & 0x1f;
        int mantissa = bits & 0x3ff;
        if (exponent == 0x1f) { // infinity or NaN: the payload moves to the top of float32's mantissa
            return Float.intBitsToFloat(sign | 0x7f80_0000 | (mantissa << 13));
        }
        if (exponent == 0) { // zero or subnormal: mantissa * 2^-24, exact (a power-of-two scale of a small integer)
            float magnitude = mantissa * 0x1p-24f;
            return sign != 0 ? -magnitude : magnitude;
        }
        return Float.intBitsToFloat(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
    }

    /** The float32 value of bfloat16 bits: they are the top half of a float32. */
    public static float bfloat16ToFloat(int bits) {
        return Float.intBitsToFloat((bits & 0xffff) << 16);
    }
}
