package dev.posenc.client;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * An ENCODE_SPEC aux block (docs/protocol.md, "Inline specs"): frequencies, an amplitude and
 * where each sin and cos goes in a row. The server evaluates {@code amplitude * sin(p * w_i)}
 * and {@code amplitude * cos(p * w_i)} in float64 and rounds once to the requested dtype.
 *
 * <p>The frequencies are the caller's: the rows are the library's bit for bit when they are the
 * library's frequencies ({@code posenc.SinusoidalSpec(d).freqs}, {@code posenc.rope_inv_freq}).
 * Java's {@code Math.pow} is not glibc's (they differ in the last bit for about 1 in 1,200
 * Vaswani frequencies), so a table the server should compute exactly is best published as a
 * named computed encoding and asked for by name ({@link PosencClient#encode}).
 *
 * <p>{@link Builder#build()} refuses, with an {@link InvalidInputException} naming the field, a
 * spec that cannot form a valid block whatever the server's limits: unknown flag bits
 * ({@code spec.flags}), no frequency ({@code spec.n_freq}), freqs not n_freq long
 * ({@code spec.freqs}), {@code n_cos > n_freq} ({@code spec.n_cos}), a row width that is not
 * {@code n_freq + n_cos} (+1 with ZERO_LAST; {@code spec.row_width}), a scale block without
 * COLUMN_SCALE, COLUMN_SCALE without one, or one not row_width long ({@code spec.scale}).
 * Everything else (column placement, non-finite values, the server's limits) is the server's to
 * judge, and its refusal names the field ({@code spec.sin_base: ...}). Immutable, thread-safe.
 */
public final class InlineSpec {
    /** Flag bit 0: sin of frequency i at column 2i, its cos at 2i + 1. */
    public static final int INTERLEAVED = 1;
    /** Flag bit 1: the last column is an explicit zero (odd-width tensor2tensor rows). */
    public static final int ZERO_LAST = 2;
    /** Flag bit 2: per-column float64 multipliers follow the frequencies. */
    public static final int COLUMN_SCALE = 4;

    private final byte[] aux;
    private final int rowWidth;

    private InlineSpec(Builder b) {
        check(b);
        int n = b.freqs.length + (b.scale == null ? 0 : b.scale.length);
        ByteBuffer out = ByteBuffer.allocate(Protocol.SPEC_PREFIX_SIZE + 8 * n).order(ByteOrder.LITTLE_ENDIAN);
        out.putInt(b.freqs.length).putInt(b.rowWidth).putInt(b.sinBase).putInt(b.cosBase).putInt(b.nCos)
                .putInt(b.flags).putDouble(b.amplitude);
        out.asDoubleBuffer().put(b.freqs);
        if (b.scale != null) {
            out.position(Protocol.SPEC_PREFIX_SIZE + 8 * b.freqs.length);
            out.asDoubleBuffer().put(b.scale);
        }
        this.aux = out.array();
        this.rowWidth = b.rowWidth;
    }

    /**
     * Refuse a spec that cannot form a valid block, in the server's order and words
     * (native/server/inline_spec.c): unknown flag bits, no frequency, n_cos over n_freq, a row
     * width that is not the columns placed, a scale block that disagrees with COLUMN_SCALE or
     * row_width. u32 fields are compared unsigned.
     */
    private static void check(Builder b) {
        if (b.freqs == null) {
            throw new InvalidInputException("spec.freqs", "must be an array of frequencies, got null");
        }
        long nFreq = b.nFreq == null ? b.freqs.length : Integer.toUnsignedLong(b.nFreq);
        long nCos = Integer.toUnsignedLong(b.nCos);
        long rowWidth = Integer.toUnsignedLong(b.rowWidth);
        if ((b.flags & ~(INTERLEAVED | ZERO_LAST | COLUMN_SCALE)) != 0) {
            throw bad("flags", "has unknown bits (known: 1 interleaved, 2 zero_last, 4 column_scale)",
                    Integer.toUnsignedLong(b.flags));
        }
        if (nFreq < 1) {
            throw bad("n_freq", "must be >= 1", nFreq);
        }
        if (b.freqs.length != nFreq) {
            throw new InvalidInputException("spec.freqs", "must hold n_freq (" + nFreq + ") values, got "
                    + b.freqs.length);
        }
        if (nCos > nFreq) {
            throw bad("n_cos", "must be <= n_freq", nCos);
        }
        if (rowWidth != nFreq + nCos + ((b.flags & ZERO_LAST) != 0 ? 1 : 0)) {
            throw bad("row_width", "must equal n_freq + n_cos (+1 with zero_last)", rowWidth);
        }
        boolean scaled = (b.flags & COLUMN_SCALE) != 0;
        if (scaled != (b.scale != null)) {
            throw new InvalidInputException("spec.scale", scaled
                    ? "flags has COLUMN_SCALE but no scale was given"
                    : "a scale needs the COLUMN_SCALE flag");
        }
        if (b.scale != null && b.scale.length != rowWidth) {
            throw new InvalidInputException("spec.scale", "must hold row_width (" + rowWidth + ") values, got "
                    + b.scale.length);
        }
    }

    private static InvalidInputException bad(String field, String what, long value) {
        return new InvalidInputException("spec." + field, what + ", got " + value);
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * RoPE rows {@code [cos(p w_0) .. cos(p w_{n-1}) | sin(p w_0) .. sin(p w_{n-1})]} (width 2n),
     * both halves times the attention factor, as posenc's RoPE tables hold them.
     */
    public static InlineSpec rope(double[] invFreq, double attentionFactor) {
        int n = invFreq.length;
        return builder().freqs(invFreq).rowWidth(2 * n).sinBase(n).cosBase(0).nCos(n)
                .amplitude(attentionFactor).build();
    }

    /**
     * Vaswani sinusoidal rows of width {@code dim}, interleaved ({@code sin, cos, sin, cos, ...};
     * an odd width ends with a lone sin): {@code freqs} has {@code ceil(dim / 2)} values.
     */
    public static InlineSpec interleaved(double[] freqs, int dim) {
        return builder().freqs(freqs).rowWidth(dim).nCos(dim / 2).flags(INTERLEAVED).build();
    }

    /** Sinusoidal rows of width {@code dim} in halves: the sins, then the cosines (Marian, fairseq). */
    public static InlineSpec halves(double[] freqs, int dim) {
        return builder().freqs(freqs).rowWidth(dim).sinBase(0).cosBase(freqs.length).nCos(dim / 2).build();
    }

    /** The bytes of the aux block (a copy). */
    public byte[] toBytes() {
        return aux.clone();
    }

    byte[] aux() {
        return aux;
    }

    /** Values per row (u32, as an int read unsigned). */
    public int rowWidth() {
        return rowWidth;
    }

    /** The fields of an inline spec, as docs/protocol.md names them; n_freq is freqs.length. */
    public static final class Builder {
        private double[] freqs;
        private Integer nFreq;
        private double[] scale;
        private int rowWidth;
        private int sinBase;
        private int cosBase;
        private int nCos;
        private int flags;
        private double amplitude = 1.0;

        private Builder() {
        }

        /** The angular frequencies w_i (n_freq of them); the array is copied by {@link #build()}. */
        public Builder freqs(double... freqs) {
            this.freqs = freqs;
            return this;
        }

        /** How many frequencies the block says it holds (u32); freqs.length unless set. */
        public Builder nFreq(int nFreq) {
            this.nFreq = nFreq;
            return this;
        }

        /** Values per row (u32). */
        public Builder rowWidth(int rowWidth) {
            this.rowWidth = rowWidth;
            return this;
        }

        /** First sin column (blocks layout; 0 when interleaved). */
        public Builder sinBase(int sinBase) {
            this.sinBase = sinBase;
            return this;
        }

        /** First cos column (blocks layout; 0 when interleaved). */
        public Builder cosBase(int cosBase) {
            this.cosBase = cosBase;
            return this;
        }

        /** Frequencies 0 .. n_cos - 1 also get a cos column. */
        public Builder nCos(int nCos) {
            this.nCos = nCos;
            return this;
        }

        /** {@link #INTERLEAVED}, {@link #ZERO_LAST}, {@link #COLUMN_SCALE} (with {@link #scale}). */
        public Builder flags(int flags) {
            this.flags = flags;
            return this;
        }

        /** Multiplies every sin and cos (a RoPE attention factor); 1.0 unless set. */
        public Builder amplitude(double amplitude) {
            this.amplitude = amplitude;
            return this;
        }

        /** Column multipliers (row_width of them); needs the {@link #COLUMN_SCALE} flag. */
        public Builder scale(double... scale) {
            this.scale = scale;
            return this;
        }

        public InlineSpec build() {
            return new InlineSpec(this);
        }
    }
}
