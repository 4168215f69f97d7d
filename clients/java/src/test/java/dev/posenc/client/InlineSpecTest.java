package dev.posenc.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** The aux block of an inline spec, and the specs refused before sending, each naming its field. */
class InlineSpecTest {
    private static void refused(String field, Executable build) {
        assertEquals(field, assertThrows(InvalidInputException.class, build).field());
    }

    @Test
    void theBlockIsThePrefixThenTheFrequenciesThenTheScale() {
        InlineSpec spec = InlineSpec.builder().freqs(1.0, 0.01).rowWidth(4).nCos(2).flags(InlineSpec.INTERLEAVED
                | InlineSpec.COLUMN_SCALE).amplitude(2.0).scale(1, 2, 3, 4).build();
        ByteBuffer b = ByteBuffer.wrap(spec.toBytes()).order(ByteOrder.LITTLE_ENDIAN);
        assertEquals(32 + 8 * 2 + 8 * 4, b.capacity());
        assertEquals(2, b.getInt(0));
        assertEquals(4, b.getInt(4));
        assertEquals(2, b.getInt(16));
        assertEquals(5, b.getInt(20));
        assertEquals(2.0, b.getDouble(24));
        assertEquals(0.01, b.getDouble(40));
        assertEquals(4.0, b.getDouble(72));
        assertEquals(4, spec.rowWidth());
    }

    @Test
    void theLayoutsPlaceEveryColumnOnce() {
        double[] freqs = {1.0, 0.5, 0.25, 0.125};
        ByteBuffer halves = ByteBuffer.wrap(InlineSpec.halves(freqs, 7).toBytes()).order(ByteOrder.LITTLE_ENDIAN);
        assertEquals(7, halves.getInt(4));   // row_width
        assertEquals(0, halves.getInt(8));   // sin_base
        assertEquals(4, halves.getInt(12));  // cos_base
        assertEquals(3, halves.getInt(16));  // n_cos: the odd width's lone sin
        ByteBuffer inter = ByteBuffer.wrap(InlineSpec.interleaved(freqs, 8).toBytes()).order(ByteOrder.LITTLE_ENDIAN);
        assertEquals(4, inter.getInt(16));
        assertEquals(InlineSpec.INTERLEAVED, inter.getInt(20));
        ByteBuffer rope = ByteBuffer.wrap(InlineSpec.rope(freqs, 1.25).toBytes()).order(ByteOrder.LITTLE_ENDIAN);
        assertEquals(8, rope.getInt(4));
        assertEquals(4, rope.getInt(8));     // sin after the cos block
        assertEquals(0, rope.getInt(12));
        assertEquals(1.25, rope.getDouble(24));
    }

    @Test
    void specsThatCannotFormABlockAreRefusedNamingTheField() {
        refused("spec.n_freq", () -> InlineSpec.builder().freqs().nFreq(0).rowWidth(0).flags(1).build());
        refused("spec.freqs", () -> InlineSpec.builder().freqs(1.0).nFreq(2).rowWidth(4).nCos(2).build());
        refused("spec.freqs", () -> InlineSpec.builder().freqs((double[]) null).build());
        refused("spec.n_cos", () -> InlineSpec.builder().freqs(1, 2).rowWidth(5).nCos(3).flags(1).build());
        refused("spec.flags", () -> InlineSpec.builder().freqs(1, 2).rowWidth(4).nCos(2).flags(9).build());
        refused("spec.row_width", () -> InlineSpec.builder().freqs(1, 2).rowWidth(5).nCos(2).flags(1).build());
        refused("spec.scale", () -> InlineSpec.builder().freqs(1, 2).rowWidth(4).nCos(2).flags(1).scale(1, 2, 3, 4)
                .build());
        refused("spec.scale", () -> InlineSpec.builder().freqs(1, 2).rowWidth(4).nCos(2).flags(5).build());
        refused("spec.scale", () -> InlineSpec.builder().freqs(1, 2).rowWidth(4).nCos(2).flags(5).scale(1, 2, 3)
                .build());
        // ZERO_LAST adds the zero column to the count
        InlineSpec.builder().freqs(1, 2, 3).rowWidth(7).sinBase(0).cosBase(3).nCos(3).flags(InlineSpec.ZERO_LAST)
                .build();
        // u32 fields are compared unsigned: a huge n_cos is over n_freq, not negative
        refused("spec.n_cos", () -> InlineSpec.builder().freqs(1, 2).rowWidth(4).nCos(-1).build());
    }

    @Test
    void whatOnlyTheServerCanJudgeIsSent() {
        // column placement, non-finite values: the server's to refuse (it names spec.sin_base, spec.freqs)
        InlineSpec.builder().freqs(1, 2, 3).rowWidth(5).sinBase(2).nCos(1).flags(InlineSpec.ZERO_LAST).build();
        InlineSpec.builder().freqs(Double.POSITIVE_INFINITY).rowWidth(2).nCos(1).flags(1).amplitude(Double.NaN)
                .build();
    }
}
