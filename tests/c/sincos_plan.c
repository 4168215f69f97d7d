/* Every kernel path's sincos plan (posenc.h: the part caches kept between calls) against the same
 * path's sincos_rows, bit for bit: positions drawn to hit and miss every cache (random integers up
 * to 2^53 of both signs, runs of consecutive integers, repeats of one coarse part, fractional and
 * huge values), batches of 1 to 40 rows in a row on one plan, float32 and float64, interleaved and
 * block layouts with lone sins, widths from 1 to past the kernels' cache limit of 2048 frequencies.
 * Prints "path NAME: N rows" per path this CPU runs and exits 1 on the first difference. */
#include "posenc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

/* A position of one of the kinds above; `last` lets runs and repeats follow the previous one. */
static double draw(double last) {
    switch (next() % 6) {
    case 0: return (double)(next() % (1ull << 53)) * ((next() & 1) ? 1.0 : -1.0);
    case 1: return last + 1.0; /* consecutive: the fine cache and the anchor */
    case 2: return floor(last / 1024.0) * 1024.0 + (double)(next() % 1024); /* same coarse part */
    case 3: return 1.7e12 + (double)(next() % 100000000000ull);            /* millisecond timestamps */
    case 4: return (double)(next() % 100000) + (double)(next() % 1000) / 1000.0; /* fractional */
    default: return (next() & 1) ? 0x1p60 : -(double)(next() % 4096);
    }
}

static int check(const posenc_kernels *k, int64_t n_sin, int interleaved, int dtype, long *rows) {
    int64_t n_cos = n_sin - (int64_t)(next() % 2); /* an odd width now and then: a lone sin */
    int64_t width = n_sin + n_cos;
    /* interleaved, or [cos | sin] blocks (the RoPE table order) */
    posenc_layout lay = {width, interleaved ? 0 : n_cos, 0, n_cos, interleaved, 0};
    double *freqs = malloc(sizeof(double) * (size_t)n_sin), *amp = malloc(sizeof(double) * (size_t)n_sin);
    for (int64_t i = 0; i < n_sin; i++) {
        freqs[i] = 1.0 / pow(10000.0, (2.0 * (double)i) / (double)(2 * n_sin));
        amp[i] = 0.5 + (double)(next() % 1000) / 1000.0;
    }
    void *plan = k->sincos_plan_new(freqs, amp, n_sin);
    size_t es = dtype == POSENC_F32 ? 4 : 8, row_bytes = (size_t)width * es;
    char *a = malloc(40 * row_bytes), *b = malloc(40 * row_bytes);
    double positions[40], last = 0.0;
    int bad = !plan;
    for (int call = 0; call < 60 && !bad; call++) {
        int64_t n = 1 + (int64_t)(next() % 40);
        for (int64_t r = 0; r < n; r++)
            positions[r] = last = draw(last);
        bad = k->sincos_rows(positions, n, freqs, amp, n_sin, &lay, a, dtype) != POSENC_OK ||
              k->sincos_plan_rows(plan, positions, n, &lay, b, dtype) != POSENC_OK ||
              memcmp(a, b, (size_t)n * row_bytes) != 0;
        if (bad)
            printf("path %s: n_sin %lld interleaved %d dtype %d call %d differs\n", k->name, (long long)n_sin,
                   interleaved, dtype, call);
        *rows += n;
    }
    k->sincos_plan_free(plan);
    free(freqs), free(amp), free(a), free(b);
    return bad;
}

int main(void) {
    static const char *const paths[] = {"scalar", "avx2", "avx512"};
    static const int64_t widths[] = {1, 3, 7, 8, 64, 100, 2049};
    int failed = 0;
    for (size_t p = 0; p < sizeof paths / sizeof *paths; p++) {
        const posenc_kernels *k = posenc_kernels_for(paths[p]);
        if (!k)
            continue;
        long rows = 0;
        for (size_t w = 0; w < sizeof widths / sizeof *widths; w++)
            for (int interleaved = 0; interleaved < 2; interleaved++)
                for (int dtype = 0; dtype < 2; dtype++)
                    failed |= check(k, widths[w], interleaved, dtype ? POSENC_F64 : POSENC_F32, &rows);
        printf("path %s: %ld rows\n", k->name, rows);
    }
    if (posenc_sincos_plan_new(NULL, NULL, 0) != NULL) {
        printf("a plan of no frequencies was made\n");
        failed = 1;
    }
    return failed;
}
