/* The one kernel body, stamped once per ISA by kernels_<isa>.c.
 *
 * Before including: a simd_*.h layer (VW, vd, vi, v_*), POSENC_KERNELS (the name of the
 * const table this stamp defines) and POSENC_KERNELS_NAME (its "name" string); optionally
 * POSENC_KERNELS_VISIBILITY (default "hidden": only dispatch.c hands tables out). Everything
 * else here is static, so the stamps never clash. Specialisations (layout, dtype, mode) come from
 * always-inline loops called with constant arguments, so inner loops carry no branches.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "posenc.h"
#include "posenc_shm.h" /* the CRC-32C sincos_rows_crc folds rows into (included first by kernels_<isa>.c) */
#include "posenc_crtrig.h"
#include "vsincos.h"

#define INLINE static inline __attribute__((always_inline))

/* ---- partial vectors: spill through a stack buffer (row tails only) --------------------- */

INLINE vd load_partial(const double *p, int64_t count) {
    double buf[VW] = {0};
    memcpy(buf, p, (size_t)count * sizeof(double));
    return v_load(buf);
}

INLINE void store_partial(void *p, vd x, int64_t count, int f32) {
    if (f32) {
        float buf[VW];
        v_store_f32(buf, x);
        memcpy(p, buf, (size_t)count * sizeof(float));
    } else {
        double buf[VW];
        v_store(buf, x);
        memcpy(p, buf, (size_t)count * sizeof(double));
    }
}

INLINE vd load_elems(const void *p, int f32) {
    return f32 ? v_load_f32((const float *)p) : v_load((const double *)p);
}

/* stream: a non-temporal store (STREAM_DIRECT, below) */
INLINE void store_elems(void *p, vd x, int f32, int stream) {
    if (f32) {
        if (stream)
            v_stream_f32((float *)p, x);
        else
            v_store_f32((float *)p, x);
    } else {
        if (stream)
            v_stream((double *)p, x);
        else
            v_store((double *)p, x);
    }
}

INLINE void load_pair_elems(const void *p, vd *a, vd *b, int f32) {
    if (f32)
        v_load_pair_f32((const float *)p, a, b);
    else
        v_load_pair((const double *)p, a, b);
}

INLINE void store_pair_elems(void *p, vd a, vd b, int f32, int stream) {
    if (f32) { /* never streamed: sin/cos rows store float32 through emit_f32 */
        v_store_pair_f32((float *)p, a, b);
    } else {
        if (stream)
            v_stream_pair((double *)p, a, b);
        else
            v_store_pair((double *)p, a, b);
    }
}

INLINE void put_elem(void *base, int64_t index, double x, int f32) {
    if (f32)
        ((float *)base)[index] = (float)x;
    else
        ((double *)base)[index] = x;
}

INLINE size_t elem_size(int f32) { return f32 ? sizeof(float) : sizeof(double); }

static int valid_dtype(int dtype) { return dtype == POSENC_F32 || dtype == POSENC_F64; }

/* How a kernel writes its output. Non-temporal stores pay off only when the output is far
 * bigger than the caches (no read-for-ownership: one memory transfer per byte, not two);
 * they need 16-byte aligned destinations, so the base and every offset in bytes must be.
 *   STREAM_OFF:    ordinary stores (small outputs, odd alignments, the scalar path)
 *   STREAM_DIRECT: each vector store is non-temporal (rows written front to back)
 *   STREAM_TILE:   rows are built in an L1 tile and copied out block by block, for layouts
 *                  whose sin and cos blocks lie far apart (RoPE's [2, n, n_freq] pair):
 *                  direct stores alternating between two distant streams run ~5x slower;
 *                  and for every layout in sincos_rows_crc, which checksums each tile in L1
 *                  before the copy-out (the tile then has the destination's layout and goes
 *                  out as one run; whole rows written directly with non-temporal stores
 *                  while also kept in the tile for the CRC were no faster for interleaved
 *                  rows and 2-10x slower for [sin | cos] rows); and, where the SIMD layer
 *                  sets V_TILE_BLOCK_ROWS, for every dense layout (whole [sin | cos],
 *                  [cos | sin] or interleaved rows), which then also go out as one run from
 *                  the first cache-line boundary, whatever the buffer's offset: simd_avx2.h */
enum { STREAM_OFF, STREAM_DIRECT, STREAM_TILE };
#define STREAM_MIN_BYTES ((size_t)8 << 20)

static int can_stream(const void *out, size_t total_bytes, const int64_t *offsets_bytes, int n_offsets) {
    if (!V_STREAM || total_bytes < STREAM_MIN_BYTES || ((uintptr_t)out & 15))
        return 0;
    for (int k = 0; k < n_offsets; k++)
        if (offsets_bytes[k] & 15)
            return 0;
    return 1;
}

/* ---- sin/cos rows ------------------------------------------------------------------------ */

/* Every value is a pure function of (p, w_i, amp_i), the same on every path (numba too:
 * service/posenc/kernels/trig.py) and whatever else is in the call (posenc.h, "Batch
 * invariance"). Integer positions are split at absolute boundaries,
 *     p = coarse + mid + fine,  coarse = 1024*floor(p/1024), mid = 16*floor((p-coarse)/16),
 * and combined by angle addition from the sincos of each part's exact product with w_i
 * (vsincos.h: no rounded angle anywhere, exactly reduced): the parts repeat
 * across rows (fine: 16 values, mid: 64, coarse: one per 1024 rows), so a contiguous range
 * costs about one multiply-add pair per value and arbitrary integers hit small caches.
 * Other positions (fractional, beyond 2^53) get one direct sincos of the exact p*w_i. Caches only decide
 * whether a part is recomputed, never its value. */

/* Rows built in L1 before a streaming copy-out. */
#define TILE_BYTES ((size_t)8 << 10)
/* Above this many frequencies the mid/fine caches keep one row each (bounded scratch). */
#define CACHE_MAX_FREQS 2048
#define MID_ROWS (POSENC_SPLIT_COARSE / POSENC_SPLIT_FINE)

/* sincos(j * unit * w) rows for j < rows, computed on first use: `slots` rows of storage
 * (rows, or 1 for very wide tables), tag[slot] = the j it holds (-1: none). */
typedef struct {
    double *data; /* slot k: sin at data + 2k*padded, cos at data + (2k+1)*padded */
    int64_t *tag;
    int64_t slots;
    double unit;
} part_cache;

/* Per-call scratch, padded to whole vectors: w and amp; sincos of the current coarse part
 * (cs, cc) and its coarse value; the amp-scaled (coarse + mid) anchor (as, ac) and its key;
 * err, each frequency's bound on a value's error (POSENC_SINCOS_ERROR |amp|); the mid and fine
 * caches; then the tile (streaming only), `tile_rows` compact rows. */
typedef struct {
    double *w, *amp, *cs, *cc, *as, *ac, *err;
    int64_t n_vec, padded;
    double coarse_at, anchor_coarse;
    int64_t anchor_mid;
    part_cache mid, fine;
    char *tile;
    int64_t tile_rows;
    void *block;
} trig_state;

/* Where the tile starts within its 4 KiB page relative to the output's: half a page apart, so the
 * copy-out's loads from the tile never alias the streamed stores just made to the output in the
 * low 12 address bits (4K aliasing: with the output 48 bytes past a line, AVX2 copies ran 1.46x
 * as long as at +0 on Zen 4). */
#define TILE_PAGE_SHIFT 2048

static int trig_state_init(trig_state *st, const double *freqs, const double *amp, int64_t n_sin,
                           size_t tile_row_bytes, size_t tile_min_bytes, const void *out) {
    int64_t padded = (n_sin + VW - 1) / VW * VW;
    int64_t mid_slots = n_sin <= CACHE_MAX_FREQS ? MID_ROWS : 1;
    int64_t fine_slots = n_sin <= CACHE_MAX_FREQS ? POSENC_SPLIT_FINE : 1;
    size_t state_bytes = (size_t)((7 + 2 * (mid_slots + fine_slots)) * padded) * sizeof(double);
    size_t tag_bytes = (size_t)(mid_slots + fine_slots) * sizeof(int64_t);
    st->tile_rows = 0;
    if (tile_row_bytes) /* TILE_BYTES, or at least tile_min_bytes, in whole rows */
        st->tile_rows = tile_min_bytes > TILE_BYTES ? (int64_t)((tile_min_bytes + tile_row_bytes - 1) / tile_row_bytes)
                        : TILE_BYTES / tile_row_bytes ? (int64_t)(TILE_BYTES / tile_row_bytes)
                                                      : 1;
    size_t tile_slack = st->tile_rows ? 4096 : 0;
    size_t bytes = (state_bytes + tag_bytes + 63) / 64 * 64 + tile_slack + (size_t)st->tile_rows * tile_row_bytes;
    st->block = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!st->block)
        return POSENC_ENOMEM;
    double *p = (double *)st->block;
    st->w = p; st->amp = p + padded; st->cs = p + 2 * padded; st->cc = p + 3 * padded;
    st->as = p + 4 * padded; st->ac = p + 5 * padded; st->err = p + 6 * padded;
    st->mid = (part_cache){p + 7 * padded, (int64_t *)((char *)st->block + state_bytes), mid_slots,
                           (double)POSENC_SPLIT_FINE};
    st->fine = (part_cache){st->mid.data + 2 * mid_slots * padded, st->mid.tag + mid_slots, fine_slots, 1.0};
    st->n_vec = padded / VW;
    st->padded = padded;
    uintptr_t tile_at = ((uintptr_t)st->block + state_bytes + tag_bytes + 63) & ~(uintptr_t)63;
    if (tile_slack) /* tile_at + shift = out + TILE_PAGE_SHIFT (mod 4096), a multiple of 64 */
        tile_at += (((uintptr_t)out + TILE_PAGE_SHIFT - tile_at) & 4095) & ~(uintptr_t)63;
    st->tile = (char *)tile_at;
    memset(st->block, 0, 7 * (size_t)padded * sizeof(double)); /* padding lanes: w = amp = err = 0 */
    for (int64_t k = 0; k < mid_slots + fine_slots; k++)
        st->mid.tag[k] = -1;
    memcpy(st->w, freqs, (size_t)n_sin * sizeof(double));
    memcpy(st->amp, amp, (size_t)n_sin * sizeof(double));
    for (int64_t i = 0; i < n_sin; i++)
        st->err[i] = POSENC_SINCOS_ERROR * fabs(amp[i]);
    st->coarse_at = st->anchor_coarse = NAN; /* never equal: the first row computes them */
    st->anchor_mid = -1;
    return POSENC_OK;
}

/* sin/cos of the exact a * w_i for every frequency into (s, c). */
INLINE void sincos_of(const trig_state *st, double a, double *s, double *c) {
    vd av = v_set1(a);
    for (int64_t v = 0; v < st->n_vec; v++) {
        vd sv, cv;
        v_sincos_product(av, v_load(st->w + v * VW), &sv, &cv);
        v_store(s + v * VW, sv);
        v_store(c + v * VW, cv);
    }
}

/* Row j of a part cache: sin at the result, cos `padded` doubles after it. */
INLINE const double *part_row(const trig_state *st, part_cache *pc, int64_t j) {
    int64_t slot = pc->slots > 1 ? j : 0;
    double *row = pc->data + 2 * slot * st->padded;
    if (pc->tag[slot] != j) {
        sincos_of(st, (double)j * pc->unit, row, row + st->padded);
        pc->tag[slot] = j;
    }
    return row;
}

/* (as, ac) = amp * [sin, cos](coarse + mid*16) by angle addition (the row anchor). */
INLINE void set_anchor(trig_state *st, double coarse, int64_t mid) {
    if (coarse == st->anchor_coarse && mid == st->anchor_mid)
        return;
    if (coarse != st->coarse_at) {
        sincos_of(st, coarse, st->cs, st->cc);
        st->coarse_at = coarse;
    }
    const double *m = part_row(st, &st->mid, mid);
    for (int64_t v = 0; v < st->n_vec; v++) {
        vd hs = v_load(st->cs + v * VW), hc = v_load(st->cc + v * VW);
        vd ms = v_load(m + v * VW), mc = v_load(m + st->padded + v * VW), amp = v_load(st->amp + v * VW);
        vd s = v_fmadd(hs, mc, v_mul(hc, ms)); /* sin(a+b) = sa*cb + ca*sb */
        vd c = v_fmsub(hc, mc, v_mul(hs, ms)); /* cos(a+b) = ca*cb - sa*sb */
        v_store(st->as + v * VW, v_mul(amp, s));
        v_store(st->ac + v * VW, v_mul(amp, c));
    }
    st->anchor_coarse = coarse;
    st->anchor_mid = mid;
}

/* Frequencies i0.. of one row whose vector reaches past n_cos: element by element. */
INLINE void emit_tail(void *row, const posenc_layout *lay, int64_t n_sin, int64_t i0, vd s, vd c,
                      int interleaved, int f32) {
    double sv[VW], cv[VW];
    v_store(sv, s);
    v_store(cv, c);
    for (int64_t lane = 0; lane < VW && i0 + lane < n_sin; lane++) {
        int64_t i = i0 + lane;
        put_elem(row, interleaved ? 2 * i : lay->sin_base + i, sv[lane], f32);
        if (i < lay->n_cos)
            put_elem(row, interleaved ? 2 * i + 1 : lay->cos_base + i, cv[lane], f32);
    }
}

/* ROW_ARGS: where and how a row is written; constant per call, so the compiler stamps one
 * loop per combination and inner loops carry no branches on them. */
#define ROW_ARGS const posenc_layout *lay, int64_t n_sin, int interleaved, int f32, int stream

/* Correct rounding (float32): each value y is within err = POSENC_SINCOS_ERROR |amp| of the
 * exact amp sin(p w) (posenc.h); rounding is monotonic, so where y - err and y + err round to the
 * same float32 the exact value does too, and that float32 is the exact value rounded once: it is
 * what is stored. Lanes where they do not (about 5e-6 of a table's values, exact zeros included) are
 * flagged; the loops then recompute those rows' values the same way (the same bits, the same
 * flags) in a cold function that writes posenc_crtrig.h's exact values over the flagged ones, so
 * the hot loops hold no call (a call there cost the anchors their registers: 1.35x the time). */
INLINE int f32_undecided(const trig_state *st, int64_t i0, vd s, vd c, vf *fs, vf *fc) {
    vd err = v_load(st->err + i0);
    *fs = v_to_f32(v_sub(s, err));
    *fc = v_to_f32(v_sub(c, err));
    return vf_differ(*fs, v_to_f32(v_add(s, err))) | (vf_differ(*fc, v_to_f32(v_add(c, err))) << VW);
}

/* f32_undecided's roundings of y - err into (fs, fc), and `flags` or-ed with the bits in which they
 * differ from those of y + err: nonzero where some lane is undecided. The hot loops test that once
 * per row group, one vector or per value instead of a compare, a mask move and scalar shifts
 * (Zen 4, with one row per pass on AVX-512: 0.90-0.97x the time of the per-vector masks there,
 * 0.85-0.94x on AVX2; docs/benchmarks.md, "Correctly rounded float32: where the time goes").
 * Tried and dropped: deciding on y's bits in integers (its low 29 mantissa bits' distance to
 * 2^28 against a shift from its exponent; one conversion per value instead of two): with 64-bit
 * lanes, or 32-bit lanes of s and c packed by two permutes, it ran 1.05-1.18x slower on AVX-512
 * (more vector ops than the conversions and adds it saves) and flagged 185 values of the RoPE
 * 131072 x 64 table against 125. */
INLINE vf f32_round(const trig_state *st, int64_t i0, vd s, vd c, vf *fs, vf *fc, vf flags) {
    vd err = v_load(st->err + i0);
    *fs = v_to_f32(v_sub(s, err));
    *fc = v_to_f32(v_sub(c, err));
    return vf_or(flags, vf_or(vf_xor(*fs, v_to_f32(v_add(s, err))), vf_xor(*fc, v_to_f32(v_add(c, err)))));
}

/* The flagged lanes' exact values (bit k: sin of frequency i0 + k; bit VW + k: its cos) into a
 * float32 row laid out as `lay`. */
static void write_exact_lanes(const trig_state *st, double p, float *row, int64_t i0, int lanes,
                              const posenc_layout *lay, int64_t n_sin, int interleaved) {
    for (int64_t lane = 0; lane < VW && i0 + lane < n_sin; lane++) {
        int64_t i = i0 + lane;
        if ((lanes >> lane) & 1)
            row[interleaved ? 2 * i : lay->sin_base + i] =
                (float)posenc_cr_sincos_rounded(p, st->w[i], st->amp[i], 0, PCT_FLOAT32);
        if ((lanes >> (VW + lane)) & 1 && i < lay->n_cos)
            row[interleaved ? 2 * i + 1 : lay->cos_base + i] =
                (float)posenc_cr_sincos_rounded(p, st->w[i], st->amp[i], 1, PCT_FLOAT32);
    }
}

/* Store s and c of frequencies i0.. into `row`; float32 rows store the rounding of y - err and
 * return `flags` with f32_round's differences or-ed in (float64 rows: flags as they are). */
INLINE vf emit(const trig_state *st, void *row, int64_t i0, vd s, vd c, vf flags, ROW_ARGS) {
    int direct = stream == STREAM_DIRECT;
    if (!f32) {
        if (i0 + VW > lay->n_cos) {
            emit_tail(row, lay, n_sin, i0, s, c, interleaved, 0);
        } else if (interleaved) {
            store_pair_elems((char *)row + (size_t)(2 * i0) * sizeof(double), s, c, 0, direct);
        } else {
            store_elems((char *)row + (size_t)(lay->sin_base + i0) * sizeof(double), s, 0, direct);
            store_elems((char *)row + (size_t)(lay->cos_base + i0) * sizeof(double), c, 0, direct);
        }
        return flags;
    }
    vf fs, fc;
    flags = f32_round(st, i0, s, c, &fs, &fc, flags);
    float *out = (float *)row;
    if (i0 + VW > lay->n_cos) { /* frequencies past n_cos: element by element (float -> double -> float is exact) */
        float sv[VW], cv[VW];
        vf_store(sv, fs);
        vf_store(cv, fc);
        emit_tail(row, lay, n_sin, i0, v_load_f32(sv), v_load_f32(cv), interleaved, 1);
    } else if (interleaved) {
        if (direct)
            vf_stream_pair(out + 2 * i0, fs, fc);
        else
            vf_store_pair(out + 2 * i0, fs, fc);
    } else if (direct) {
        vf_stream(out + lay->sin_base + i0, fs);
        vf_stream(out + lay->cos_base + i0, fc);
    } else {
        vf_store(out + lay->sin_base + i0, fs);
        vf_store(out + lay->cos_base + i0, fc);
    }
    return flags;
}

/* amp * sincos(p * w) of the frequencies of vector v, the product exact: the values of
 * positions that are not split (fractional, huge). */
INLINE void direct_values(const trig_state *st, vd pv, int64_t v, vd *s, vd *c) {
    vd amp = v_load(st->amp + v * VW);
    v_sincos_product(pv, v_load(st->w + v * VW), s, c);
    *s = v_mul(*s, amp);
    *c = v_mul(*c, amp);
}

/* A float32 row of direct values again, the undecided ones replaced by their exact values. */
static __attribute__((noinline, cold)) void patch_direct_row(const trig_state *st, double p, float *row,
                                                             const posenc_layout *lay, int64_t n_sin,
                                                             int interleaved, int stream) {
    if (stream == STREAM_DIRECT)
        v_stream_fence(); /* the row's streamed stores before these ordinary ones */
    for (int64_t v = 0; v < st->n_vec; v++) {
        vd s, c;
        vf fs, fc;
        direct_values(st, v_set1(p), v, &s, &c);
        int lanes = f32_undecided(st, v * VW, s, c, &fs, &fc);
        if (lanes)
            write_exact_lanes(st, p, row, v * VW, lanes, lay, n_sin, interleaved);
    }
}

/* Row = amp * sincos(p * w), the product exact: positions that are not split (fractional, huge). */
INLINE void direct_row(const trig_state *st, double p, void *row, ROW_ARGS) {
    vd pv = v_set1(p);
    vf flags = vf_zero();
    for (int64_t v = 0; v < st->n_vec; v++) {
        vd s, c;
        direct_values(st, pv, v, &s, &c);
        flags = emit(st, row, v * VW, s, c, flags, lay, n_sin, interleaved, f32, stream);
    }
    if (f32 && __builtin_expect(vf_any(flags), 0))
        patch_direct_row(st, p, (float *)row, lay, n_sin, interleaved, stream);
}

/* The absolute parts of an integer position: p = coarse + 16*mid + fine. */
typedef struct {
    double coarse;
    int64_t mid, fine;
} split_parts;

INLINE split_parts split_of(double p) {
    split_parts sp;
    sp.coarse = floor(p * (1.0 / POSENC_SPLIT_COARSE)) * POSENC_SPLIT_COARSE;
    double rest = p - sp.coarse; /* exact: an integer in [0, 1024) */
    sp.mid = (int64_t)(rest * (1.0 / POSENC_SPLIT_FINE));
    sp.fine = (int64_t)rest - sp.mid * POSENC_SPLIT_FINE;
    return sp;
}

/* Rows computed per pass over the frequencies when they share an anchor: the anchor is loaded
 * once for all of them (the loop is bound by loads through L1). split_rows takes 1 to 4; a SIMD
 * layer may ask for fewer (V_ROWS_PER_PASS: simd_avx512.h). */
#ifdef V_ROWS_PER_PASS
#define ROWS_PER_PASS V_ROWS_PER_PASS
#else
#define ROWS_PER_PASS 4
#endif

/* The values of vector v of a row: the (coarse + mid) anchor (as, ac) advanced by the row's fine
 * part (one angle addition). */
INLINE void split_values(const trig_state *st, const double *fine, int64_t v, vd as, vd ac, vd *s, vd *c) {
    vd fs = v_load(fine + v * VW), fc = v_load(fine + st->padded + v * VW);
    *s = v_fmadd(as, fc, v_mul(ac, fs));
    *c = v_fmsub(ac, fc, v_mul(as, fs));
}

INLINE vf split_row_at(const trig_state *st, const double *fine, int64_t v, vd as, vd ac, char *row, vf flags,
                       ROW_ARGS) {
    vd s, c;
    split_values(st, fine, v, as, ac, &s, &c);
    return emit(st, row, v * VW, s, c, flags, lay, n_sin, interleaved, f32, stream);
}

/* split_rows' float32 rows again, the undecided values replaced by their exact values. */
static __attribute__((noinline, cold)) void patch_split_rows(const trig_state *st, const double *at,
                                                             const double *const *fine, int count, char *row,
                                                             size_t row_bytes, const posenc_layout *lay,
                                                             int64_t n_sin, int interleaved, int stream) {
    if (stream == STREAM_DIRECT)
        v_stream_fence(); /* the rows' streamed stores before these ordinary ones */
    for (int k = 0; k < count; k++)
        for (int64_t v = 0; v < st->n_vec; v++) {
            vd s, c;
            vf fs, fc;
            split_values(st, fine[k], v, v_load(st->as + v * VW), v_load(st->ac + v * VW), &s, &c);
            int lanes = f32_undecided(st, v * VW, s, c, &fs, &fc);
            if (lanes)
                write_exact_lanes(st, at[k], (float *)(row + (size_t)k * row_bytes), v * VW, lanes, lay, n_sin,
                                  interleaved);
        }
}

/* `count` rows of consecutive integer positions at[0..count) sharing one anchor. Written out row
 * by row, not as a loop over rows: the compiler would interchange such a loop with the one over
 * frequencies and load the anchor once per row again. */
INLINE void split_rows(trig_state *st, const double *at, const double *const *fine, int count, char *row,
                       size_t row_bytes, ROW_ARGS) {
    vf flags = vf_zero();
    for (int64_t v = 0; v < st->n_vec; v++) {
        vd as = v_load(st->as + v * VW), ac = v_load(st->ac + v * VW);
        flags = split_row_at(st, fine[0], v, as, ac, row, flags, lay, n_sin, interleaved, f32, stream);
        if (count > 1)
            flags = split_row_at(st, fine[1], v, as, ac, row + row_bytes, flags, lay, n_sin, interleaved, f32, stream);
        if (count > 2)
            flags = split_row_at(st, fine[2], v, as, ac, row + 2 * row_bytes, flags, lay, n_sin, interleaved, f32,
                                 stream);
        if (count > 3)
            flags = split_row_at(st, fine[3], v, as, ac, row + 3 * row_bytes, flags, lay, n_sin, interleaved, f32,
                                 stream);
    }
    if (f32 && __builtin_expect(vf_any(flags), 0))
        patch_split_rows(st, at, fine, count, row, row_bytes, lay, n_sin, interleaved, stream);
}

/* Positions split into parts: integers of magnitude below 2^53 (every integer float64 there). */
INLINE int is_split(double p) { return fabs(p) < 0x1p53 && p == floor(p); }

/* The tile's layout: the destination's, packed ([sin | cos] for blocks). */
static posenc_layout compact_layout(const posenc_layout *lay, int64_t n_sin) {
    posenc_layout t = {n_sin + lay->n_cos, 0, lay->interleaved ? 1 : n_sin, lay->n_cos, lay->interleaved, 0};
    return t;
}

/* Whether a layout's rows are whole and back to back: the n_rows * row_stride elements from
 * the output pointer are all written, so rows r0..r1 are one contiguous run of bytes (what
 * sincos_rows_crc checksums). */
static int rows_dense(const posenc_layout *lay, int64_t n_sin) {
    if (lay->row_stride != n_sin + lay->n_cos)
        return 0;
    if (lay->interleaved)
        return lay->n_cos >= n_sin - 1; /* at most one lone sin, in the last column */
    return (lay->sin_base == 0 && lay->cos_base == n_sin) || (lay->cos_base == 0 && lay->sin_base == lay->n_cos);
}

/* Stream tile rows out to rows row0.. of `out`: every sin part, then every cos part, so even
 * a layout with far-apart blocks (RoPE's [2, n, n_freq] pair) is written in long runs. */
static void flush_tile(const trig_state *st, int64_t count, char *out, int64_t row0, const posenc_layout *lay,
                       int64_t n_sin, size_t es) {
    size_t out_row = (size_t)lay->row_stride * es, tile_row = (size_t)(n_sin + lay->n_cos) * es;
    char *dst = out + (size_t)row0 * out_row;
    if (lay->interleaved) {
        for (int64_t r = 0; r < count; r++)
            v_stream_copy(dst + (size_t)r * out_row, st->tile + (size_t)r * tile_row, tile_row);
        return;
    }
    for (int64_t r = 0; r < count; r++)
        v_stream_copy(dst + (size_t)r * out_row + (size_t)lay->sin_base * es, st->tile + (size_t)r * tile_row,
                      (size_t)n_sin * es);
    for (int64_t r = 0; r < count; r++)
        v_stream_copy(dst + (size_t)r * out_row + (size_t)lay->cos_base * es,
                      st->tile + (size_t)r * tile_row + (size_t)n_sin * es, (size_t)lay->n_cos * es);
}

/* Rows are built in chunks of `tile_rows` when tiled or with crc, else in one pass. A tile of
 * dense rows is laid out as the destination, so it is the next bytes of the output and goes
 * out as one run; other layouts' tiles are compact and flush_tile scatters them.
 * crc (sincos_rows_crc; dense layouts only): each chunk, in the tile when streaming or in
 * place otherwise, is folded into the CRC while it is in cache (L1, or L2 for 96 KiB chunks). */
INLINE void sincos_loop(trig_state *st, const double *positions, int64_t n_rows, void *out,
                        posenc_shm_crc32c_stream *crc, ROW_ARGS) {
    int tiled = stream == STREAM_TILE;
    size_t es = elem_size(f32);
    posenc_layout tile_lay = compact_layout(lay, n_sin);
    int one_run = rows_dense(lay, n_sin); /* the tile is the next bytes of the output (always with crc) */
    const posenc_layout *row_lay = tiled && !one_run ? &tile_lay : lay;
    size_t row_bytes = (size_t)row_lay->row_stride * es;
    int64_t chunk = tiled || crc ? st->tile_rows : n_rows;
    for (int64_t r0 = 0; r0 < n_rows;) { /* one pass, or one per chunk */
        int64_t end = n_rows - r0 > chunk ? r0 + chunk : n_rows;
        char *base = tiled ? st->tile : (char *)out + (size_t)r0 * row_bytes;
        for (int64_t r = r0; r < end;) {
            double p = positions[r];
            char *row = base + (size_t)(r - r0) * row_bytes;
            if (!is_split(p)) {
                direct_row(st, p, row, row_lay, n_sin, interleaved, f32, stream);
                r += 1;
                continue;
            }
            /* a run of consecutive integers sharing this anchor (at most the 16 fine values) */
            split_parts sp = split_of(p);
            set_anchor(st, sp.coarse, sp.mid);
            int64_t run = 1, most = st->fine.slots > 1 ? POSENC_SPLIT_FINE - sp.fine : 1;
            while (run < most && r + run < end && positions[r + run] == p + (double)run)
                run++;
            const double *fine[POSENC_SPLIT_FINE];
            for (int64_t k = 0; k < run; k++)
                fine[k] = part_row(st, &st->fine, sp.fine + k);
            int64_t k = 0;
            for (; k + ROWS_PER_PASS <= run; k += ROWS_PER_PASS)
                split_rows(st, positions + r + k, fine + k, ROWS_PER_PASS, row + k * row_bytes, row_bytes, row_lay, n_sin,
                           interleaved, f32, stream);
            for (; k < run; k++)
                split_rows(st, positions + r + k, fine + k, 1, row + k * row_bytes, row_bytes, row_lay, n_sin, interleaved,
                           f32, stream);
            r += run;
        }
        if (crc)
            posenc_shm_crc32c_update(crc, base, (size_t)(end - r0) * row_bytes);
        if (tiled && one_run)
            v_stream_copy((char *)out + (size_t)r0 * row_bytes, st->tile, (size_t)(end - r0) * row_bytes);
        else if (tiled)
            flush_tile(st, end - r0, (char *)out, r0, lay, n_sin, es);
        r0 = end;
    }
}

/* Direct streaming for rows written front to back; the tile when sin and cos blocks lie
 * outside one row (see STREAM_TILE). */
static int sincos_stream_mode(const void *out, int64_t n_rows, int64_t n_sin, const posenc_layout *lay, int64_t es) {
    int64_t runs[] = {lay->row_stride * es, lay->sin_base * es, lay->cos_base * es, n_sin * es, lay->n_cos * es};
    size_t total = (size_t)(n_rows * (n_sin + lay->n_cos) * es);
    if (!can_stream(out, total, runs, lay->interleaved ? 1 : 5))
        return STREAM_OFF;
    if (V_TILE_BLOCK_ROWS && rows_dense(lay, n_sin))
        return STREAM_TILE;
    int in_row = lay->interleaved || (lay->sin_base + n_sin <= lay->row_stride && lay->cos_base + lay->n_cos <= lay->row_stride);
    return in_row ? STREAM_DIRECT : STREAM_TILE;
}

/* crc: NULL (sincos_rows), or the CRC-32C to continue over the rows (sincos_rows_crc). */
static int sincos_rows_into(const double *positions, int64_t n_rows, const double *freqs, const double *amp,
                            int64_t n_sin, const posenc_layout *lay, void *out, int dtype, uint32_t *crc) {
    if (n_rows < 0 || n_sin < 0 || !lay || lay->n_cos < 0 || lay->n_cos > n_sin || !valid_dtype(dtype))
        return POSENC_EINVAL;
    if (crc && !rows_dense(lay, n_sin))
        return POSENC_EINVAL;
    if (n_rows == 0 || n_sin == 0)
        return POSENC_OK;
    int f32 = dtype == POSENC_F32;
    int64_t es = (int64_t)elem_size(f32);
    int stream = sincos_stream_mode(out, n_rows, n_sin, lay, es);
    if (crc && stream == STREAM_DIRECT) /* rows are checksummed in L1 before they are streamed out */
        stream = STREAM_TILE;
    posenc_shm_crc32c_stream crc_stream;
    if (crc)
        posenc_shm_crc32c_begin(&crc_stream, *crc);
    /* Chunks at least the CRC's full-speed piece: with the crc32 instruction that is 96 KiB (three
     * 32 KiB lanes; in 8 KiB tiles it ran in one lane and the one pass took 1.5-1.9x as long as
     * rows and CRC apart on Zen 2), so the tile then lives in L2, which is still no memory pass. */
    trig_state st;
    int chunked = stream == STREAM_TILE || crc;
    int rc = trig_state_init(&st, freqs, amp, n_sin, chunked ? (size_t)((n_sin + lay->n_cos) * es) : 0,
                             crc ? posenc_shm_crc32c_piece(&crc_stream) : 0, out);
    if (rc != POSENC_OK)
        return rc;
    posenc_shm_crc32c_stream *cs = crc ? &crc_stream : NULL;
    /* one stamped loop per (layout, dtype, stream mode) */
#define SINCOS_LOOP(il, f, mode) sincos_loop(&st, positions, n_rows, out, cs, lay, n_sin, il, f, mode)
#define SINCOS_DTYPE(il, mode) (f32 ? SINCOS_LOOP(il, 1, mode) : SINCOS_LOOP(il, 0, mode))
#define SINCOS_MODES(il)                                                                                     \
    (stream == STREAM_OFF      ? SINCOS_DTYPE(il, STREAM_OFF)                                                \
     : stream == STREAM_DIRECT ? SINCOS_DTYPE(il, STREAM_DIRECT)                                             \
                               : SINCOS_DTYPE(il, STREAM_TILE))
    if (lay->interleaved)
        SINCOS_MODES(1);
    else
        SINCOS_MODES(0);
#undef SINCOS_MODES
#undef SINCOS_DTYPE
#undef SINCOS_LOOP
    if (stream != STREAM_OFF)
        v_stream_fence();
    if (crc)
        *crc = posenc_shm_crc32c_end(&crc_stream);
    free(st.block);
    return POSENC_OK;
}

static int sincos_rows(const double *positions, int64_t n_rows, const double *freqs, const double *amp,
                       int64_t n_sin, const posenc_layout *lay, void *out, int dtype) {
    return sincos_rows_into(positions, n_rows, freqs, amp, n_sin, lay, out, dtype, NULL);
}

static int sincos_rows_crc(const double *positions, int64_t n_rows, const double *freqs, const double *amp,
                           int64_t n_sin, const posenc_layout *lay, void *out, int dtype, uint32_t *crc) {
    return crc ? sincos_rows_into(positions, n_rows, freqs, amp, n_sin, lay, out, dtype, crc) : POSENC_EINVAL;
}

/* ---- plans: sincos_rows with its scratch and part caches kept between calls ---------------- */

/* One path's posenc_sincos_plan (posenc.h): the trig state of fixed frequencies and amplitudes,
 * kept with its 16 fine and 64 mid part rows and its last coarse part, so a call pays only for
 * what changed (a row of a random position: its coarse part's sincos and two angle additions).
 * Rows are stored with ordinary stores (no streaming: plans serve requests, not tables). */
typedef struct {
    trig_state st;
    int64_t n_sin;
} sincos_plan;

static void *sincos_plan_new(const double *freqs, const double *amp, int64_t n_sin) {
    sincos_plan *plan = n_sin >= 1 ? malloc(sizeof *plan) : NULL;
    if (!plan)
        return NULL;
    if (trig_state_init(&plan->st, freqs, amp, n_sin, 0, 0, NULL) != POSENC_OK) {
        free(plan);
        return NULL;
    }
    plan->n_sin = n_sin;
    return plan;
}

static int sincos_plan_rows(void *handle, const double *positions, int64_t n_rows, const posenc_layout *lay,
                            void *out, int dtype) {
    sincos_plan *plan = handle;
    int64_t n_sin = plan->n_sin;
    if (n_rows < 0 || !lay || lay->n_cos < 0 || lay->n_cos > n_sin || !valid_dtype(dtype))
        return POSENC_EINVAL;
    int f32 = dtype == POSENC_F32;
#define PLAN_LOOP(il, f) sincos_loop(&plan->st, positions, n_rows, out, NULL, lay, n_sin, il, f, STREAM_OFF)
    if (lay->interleaved)
        f32 ? PLAN_LOOP(1, 1) : PLAN_LOOP(1, 0);
    else
        f32 ? PLAN_LOOP(0, 1) : PLAN_LOOP(0, 0);
#undef PLAN_LOOP
    return POSENC_OK;
}

static void sincos_plan_free(void *handle) {
    sincos_plan *plan = handle;
    if (plan) {
        free(plan->st.block);
        free(plan);
    }
}

/* ---- RoPE rotation ------------------------------------------------------------------------ */

/* (a, b) -> (a cos - b sin, b cos + a sin), rounded as fma(-b, sin, a*cos), fma(a, sin, b*cos) on
 * every path (the tail loop below and kernels/rope.py too): a value never depends on its lane. */
INLINE void rotate_pair(vd a, vd b, vd c, vd s, vd *ra, vd *rb) {
    *ra = v_fnmadd(b, s, v_mul(a, c));
    *rb = v_fmadd(a, s, v_mul(b, c));
}

INLINE void rope_row(const void *x, void *out, const double *cos, const double *sin, int64_t n_freq,
                     int64_t head_dim, int interleaved, int f32) {
    size_t es = elem_size(f32);
    int64_t i = 0;
    for (; i + VW <= n_freq; i += VW) {
        vd a, b, ra, rb, c = v_load(cos + i), s = v_load(sin + i);
        if (interleaved) {
            load_pair_elems((const char *)x + (size_t)(2 * i) * es, &a, &b, f32);
            rotate_pair(a, b, c, s, &ra, &rb);
            store_pair_elems((char *)out + (size_t)(2 * i) * es, ra, rb, f32, 0);
        } else {
            a = load_elems((const char *)x + (size_t)i * es, f32);
            b = load_elems((const char *)x + (size_t)(i + n_freq) * es, f32);
            rotate_pair(a, b, c, s, &ra, &rb);
            store_elems((char *)out + (size_t)i * es, ra, f32, 0);
            store_elems((char *)out + (size_t)(i + n_freq) * es, rb, f32, 0);
        }
    }
    for (; i < n_freq; i++) { /* fewer than VW pairs left */
        double xa, xb;
        if (f32) {
            const float *xf = (const float *)x;
            xa = interleaved ? xf[2 * i] : xf[i];
            xb = interleaved ? xf[2 * i + 1] : xf[i + n_freq];
        } else {
            const double *xd = (const double *)x;
            xa = interleaved ? xd[2 * i] : xd[i];
            xb = interleaved ? xd[2 * i + 1] : xd[i + n_freq];
        }
        double ra = fma(-xb, sin[i], xa * cos[i]), rb = fma(xa, sin[i], xb * cos[i]); /* as rotate_pair */
        put_elem(out, interleaved ? 2 * i : i, ra, f32);
        put_elem(out, interleaved ? 2 * i + 1 : i + n_freq, rb, f32);
    }
    if (out != x && head_dim > 2 * n_freq)
        memcpy((char *)out + (size_t)(2 * n_freq) * es, (const char *)x + (size_t)(2 * n_freq) * es,
               (size_t)(head_dim - 2 * n_freq) * es);
}

INLINE void rope_loop(const void *x, void *out, int64_t batch, int64_t batch_stride, int64_t n_rows,
                      int64_t head_dim, const double *cos, const double *sin, int64_t n_freq, int interleaved,
                      int f32) {
    size_t es = elem_size(f32);
    for (int64_t r = 0; r < n_rows; r++) /* rows outer: one cos/sin row serves every batch entry */
        for (int64_t b = 0; b < batch; b++) {
            size_t offset = (size_t)(b * batch_stride + r * head_dim) * es;
            rope_row((const char *)x + offset, (char *)out + offset, cos + r * n_freq, sin + r * n_freq, n_freq,
                     head_dim, interleaved, f32);
        }
}

static int rope_rotate(const void *x, void *out, int64_t batch, int64_t batch_stride, int64_t n_rows,
                       int64_t head_dim, const double *cos, const double *sin, int64_t n_freq, int interleaved,
                       int dtype) {
    if (batch < 0 || n_rows < 0 || n_freq < 0 || 2 * n_freq > head_dim || !valid_dtype(dtype))
        return POSENC_EINVAL;
    int f32 = dtype == POSENC_F32;
    if (interleaved) {
        if (f32)
            rope_loop(x, out, batch, batch_stride, n_rows, head_dim, cos, sin, n_freq, 1, 1);
        else
            rope_loop(x, out, batch, batch_stride, n_rows, head_dim, cos, sin, n_freq, 1, 0);
    } else {
        if (f32)
            rope_loop(x, out, batch, batch_stride, n_rows, head_dim, cos, sin, n_freq, 0, 1);
        else
            rope_loop(x, out, batch, batch_stride, n_rows, head_dim, cos, sin, n_freq, 0, 0);
    }
    return POSENC_OK;
}

/* ---- ALiBi bias ---------------------------------------------------------------------------- */

INLINE vd alibi_value(vd i, vd j, vd neg_m, int mode) {
    if (mode == POSENC_ALIBI_CAUSAL)
        return v_select_le(j, i, v_mul(neg_m, v_sub(i, j)), v_set1(-INFINITY));
    if (mode == POSENC_ALIBI_SYMMETRIC)
        return v_mul(neg_m, v_abs(v_sub(i, j)));
    return v_mul(v_sub(v_set1(0.0), neg_m), j); /* bloom: m * j */
}

INLINE void alibi_loop(const double *slopes, int64_t n_heads, const double *q_pos, int64_t q_len,
                       const double *k_pos, int64_t k_len, void *out, int64_t head_stride, int mode, int f32,
                       int stream) {
    size_t es = elem_size(f32);
    for (int64_t h = 0; h < n_heads; h++) {
        vd neg_m = v_set1(-slopes[h]);
        for (int64_t a = 0; a < q_len; a++) {
            vd i = v_set1(q_pos[a]);
            char *row = (char *)out + (size_t)(h * head_stride + a * k_len) * es;
            int64_t b = 0;
            for (; b + VW <= k_len; b += VW)
                store_elems(row + (size_t)b * es, alibi_value(i, v_load(k_pos + b), neg_m, mode), f32, stream);
            if (b < k_len)
                store_partial(row + (size_t)b * es, alibi_value(i, load_partial(k_pos + b, k_len - b), neg_m, mode),
                              k_len - b, f32);
        }
    }
}

static int alibi_bias(const double *slopes, int64_t n_heads, const double *q_pos, int64_t q_len,
                      const double *k_pos, int64_t k_len, int mode, void *out, int64_t head_stride, int dtype) {
    if (n_heads < 0 || q_len < 0 || k_len < 0 || !valid_dtype(dtype))
        return POSENC_EINVAL;
    if (mode != POSENC_ALIBI_CAUSAL && mode != POSENC_ALIBI_SYMMETRIC && mode != POSENC_ALIBI_BLOOM)
        return POSENC_EINVAL;
    int f32 = dtype == POSENC_F32;
    int64_t es = (int64_t)elem_size(f32);
    int64_t runs[] = {k_len * es, head_stride * es};
    int stream = can_stream(out, (size_t)(n_heads * q_len * k_len * es), runs, 2); /* rows front to back: direct */
    /* one stamped loop per (mode, dtype, streaming) */
#define ALIBI_LOOP(m, f, st_) alibi_loop(slopes, n_heads, q_pos, q_len, k_pos, k_len, out, head_stride, m, f, st_)
#define ALIBI_MODES(f, st_)                                                                                  \
    (mode == POSENC_ALIBI_CAUSAL      ? ALIBI_LOOP(POSENC_ALIBI_CAUSAL, f, st_)                              \
     : mode == POSENC_ALIBI_SYMMETRIC ? ALIBI_LOOP(POSENC_ALIBI_SYMMETRIC, f, st_)                           \
                                      : ALIBI_LOOP(POSENC_ALIBI_BLOOM, f, st_))
    if (stream) {
        f32 ? ALIBI_MODES(1, 1) : ALIBI_MODES(0, 1);
        v_stream_fence();
    } else {
        f32 ? ALIBI_MODES(1, 0) : ALIBI_MODES(0, 0);
    }
#undef ALIBI_MODES
#undef ALIBI_LOOP
    return POSENC_OK;
}

/* ---- row gather ------------------------------------------------------------------------------ */

INLINE void copy_row(char *dst, const char *src, int64_t nbytes) {
    int64_t k = 0;
    for (; k + (int64_t)sizeof(vd) <= nbytes; k += (int64_t)sizeof(vd))
        v_store((double *)(dst + k), v_load((const double *)(src + k)));
    memcpy(dst + k, src + k, (size_t)(nbytes - k));
}

/* rows ahead to prefetch: random rows miss cache, so overlap their loads */
#define GATHER_PREFETCH 8

static int gather_rows(const void *table, int64_t n_table_rows, int64_t row_bytes, const int64_t *rows, int64_t n,
                       void *out, int64_t *bad_k) {
    if (n_table_rows < 0 || row_bytes < 0 || n < 0)
        return POSENC_EINVAL;
    for (int64_t k = 0; k < n; k++)
        if (rows[k] < 0 || rows[k] >= n_table_rows) {
            if (bad_k)
                *bad_k = k;
            return POSENC_ERANGE;
        }
    const char *src = (const char *)table;
    char *dst = (char *)out;
    for (int64_t k = 0; k < n; k++) {
        if (k + GATHER_PREFETCH < n)
            __builtin_prefetch(src + (size_t)(rows[k + GATHER_PREFETCH] * row_bytes));
        copy_row(dst + (size_t)(k * row_bytes), src + (size_t)(rows[k] * row_bytes), row_bytes);
    }
    return POSENC_OK;
}

#ifndef POSENC_KERNELS_VISIBILITY
#define POSENC_KERNELS_VISIBILITY "hidden"
#endif

__attribute__((visibility(POSENC_KERNELS_VISIBILITY))) const posenc_kernels POSENC_KERNELS = {
    POSENC_KERNELS_NAME, sincos_rows, rope_rotate, alibi_bias, gather_rows, sincos_rows_crc,
    sincos_plan_new, sincos_plan_rows, sincos_plan_free,
};
