package dev.posenc.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Every float16 and bfloat16 bit pattern widened exactly. */
class HalfFloatsTest {
    /** binary16 by its definition: (-1)^s * 2^(e - 15) * (1 + m / 1024), subnormals m * 2^-24. */
    private static double float16Value(int bits) {
        int sign = (bits >> 15) & 1;
        int e = (bits >> 10) & 0x1f;
        int m = bits & 0x3ff;
        double magnitude = e == 0 ? Math.scalb((double) m, -24)
                : e == 31 ? (m == 0 ? Double.POSITIVE_INFINITY : Double.NaN)
                : Math.scalb(1.0 + m / 1024.0, e - 15);
        return sign == 1 ? -magnitude : magnitude;
    }

    @Test
    void everyFloat16PatternHasItsExactFloat32Value() {
        for (int bits = 0; bits < 0x10000; bits++) {
            float got = HalfFloats.float16ToFloat(bits);
            double want = float16Value(bits);
            if (Double.isNaN(want)) {
                assertTrue(Float.isNaN(got), Integer.toHexString(bits));
                // the payload moves to the top of the float32 mantissa, the sign stays
                assertEquals((bits & 0x3ff) << 13, Float.floatToRawIntBits(got) & 0x7f_ffff);
                assertEquals((bits & 0x8000) << 16, Float.floatToRawIntBits(got) & 0x8000_0000);
            } else {
                assertEquals(Double.doubleToRawLongBits(want), Double.doubleToRawLongBits(got),
                        Integer.toHexString(bits));
            }
        }
    }

    @Test
    void knownFloat16Values() {
        assertEquals(1.0f, HalfFloats.float16ToFloat(0x3c00));
        assertEquals(65504.0f, HalfFloats.float16ToFloat(0x7bff));
        assertEquals(0x1p-24f, HalfFloats.float16ToFloat(0x0001));
        assertEquals(0x1p-14f, HalfFloats.float16ToFloat(0x0400));
        assertEquals(-2.0f, HalfFloats.float16ToFloat(0xc000));
        assertEquals(Float.NEGATIVE_INFINITY, HalfFloats.float16ToFloat(0xfc00));
        assertEquals(Float.floatToRawIntBits(-0.0f), Float.floatToRawIntBits(HalfFloats.float16ToFloat(0x8000)));
        assertEquals(1.0f, HalfFloats.float16ToFloat(0xffff3c00)); // only the low 16 bits count
    }

    @Test
    void everyBfloat16PatternIsTheTopHalfOfAFloat32() {
        for (int bits = 0; bits < 0x10000; bits++) {
            assertEquals(bits << 16, Float.floatToRawIntBits(HalfFloats.bfloat16ToFloat(bits)));
        }
        assertEquals(1.0f, HalfFloats.bfloat16ToFloat(0x3f80));
        assertEquals(-0x1p-133f, HalfFloats.bfloat16ToFloat(0x8001));
    }
}
