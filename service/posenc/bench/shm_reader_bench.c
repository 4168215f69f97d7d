/*
 * `posenc bench shm` case (c): random single-row lookups through native/include/posenc_shm.h
 * from a second process, next to a plain memcpy of the same rows from the same mapping.
 *
 *   shm_reader_bench DIR NAME LOOKUPS REPEATS
 *
 * Prints "attach_ms X", "timer_ns P50", then "api|memcpy ROWS_PER_S P50_NS P99_NS" lines
 * (rows/s: the median of REPEATS untimed passes).
 * Per-lookup latency is lfence+rdtsc around each lookup on x86-64 (clock_gettime elsewhere),
 * so it includes the timer's own cost (reported as timer_ns).
 */
#include "posenc_shm.h"

#include <stdlib.h>

#if defined(__x86_64__)
#include <x86intrin.h>
static inline uint64_t ticks(void) { _mm_lfence(); uint64_t t = __rdtsc(); _mm_lfence(); return t; }
#else
static inline uint64_t ticks(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#endif

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Nanoseconds per tick, measured against CLOCK_MONOTONIC over 200 ms. */
static double ns_per_tick(void)
{
    double t0 = now_s();
    uint64_t c0 = ticks();
    while (now_s() - t0 < 0.2) {
    }
    return (now_s() - t0) * 1e9 / (double)(ticks() - c0);
}

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

#define RING 64 /* destination rows, reused: a caller's buffer stays in cache */
#define BARRIER() __asm__ __volatile__("" ::: "memory")

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *label, const posenc_shm_table *t, const int64_t *pos, size_t n, uint8_t *out,
                   uint64_t *cycles, double tick_ns, int use_api, int repeats)
{
    size_t row_bytes = t->row_bytes;
    double rates[64];
    for (int r = 0; r < repeats; r++) {
        double t0 = now_s();
        for (size_t i = 0; i < n; i++) {
            const void *src = use_api ? posenc_shm_row(t, pos[i]) : t->data + (size_t)(pos[i] - t->start) * row_bytes;
            if (src == NULL) abort();
            memcpy(out + (i % RING) * row_bytes, src, row_bytes);
            BARRIER();
        }
        rates[r] = (double)n / (now_s() - t0);
    }
    qsort(rates, (size_t)repeats, sizeof *rates, by_double);
    for (size_t i = 0; i < n; i++) {
        uint64_t c0 = ticks();
        const void *src = use_api ? posenc_shm_row(t, pos[i]) : t->data + (size_t)(pos[i] - t->start) * row_bytes;
        if (src == NULL) abort();
        memcpy(out + (i % RING) * row_bytes, src, row_bytes);
        BARRIER();
        cycles[i] = ticks() - c0;
    }
    qsort(cycles, n, sizeof *cycles, by_value);
    printf("%s %.0f %.1f %.1f\n", label, rates[repeats / 2], cycles[n / 2] * tick_ns, cycles[n * 99 / 100] * tick_ns);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s DIR NAME LOOKUPS REPEATS\n", argv[0]);
        return 2;
    }
    size_t n = (size_t)strtoull(argv[3], NULL, 10);
    int repeats = atoi(argv[4]);
    if (n < 100 || repeats < 1 || repeats > 64) {
        fprintf(stderr, "LOOKUPS must be >= 100 and REPEATS 1..64\n");
        return 2;
    }
    posenc_shm_table t;
    double t0 = now_s();
    int rc = posenc_shm_attach(&t, argv[1], argv[2], POSENC_SHM_VERIFY);
    if (rc != POSENC_SHM_OK) {
        fprintf(stderr, "%s\n", t.error);
        return 3;
    }
    printf("attach_ms %.2f\n", (now_s() - t0) * 1e3);
    int64_t *pos = malloc(n * sizeof *pos);
    uint64_t *cycles = malloc(n * sizeof *cycles);
    uint8_t *out = aligned_alloc(64, RING * t.row_bytes);
    if (!pos || !cycles || !out) return 4;
    uint64_t x = 0x9E3779B97F4A7C15u;
    for (size_t i = 0; i < n; i++) { /* xorshift64*: uniform random rows */
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        pos[i] = t.start + (int64_t)((x * 0x2545F4914F6CDD1Du) % t.rows);
    }
    double tick_ns = ns_per_tick();
    for (size_t i = 0; i < n; i++) {
        uint64_t c0 = ticks();
        cycles[i] = ticks() - c0;
    }
    qsort(cycles, n, sizeof *cycles, by_value);
    printf("timer_ns %.1f\n", cycles[n / 2] * tick_ns);
    report("api", &t, pos, n, out, cycles, tick_ns, 1, repeats);
    report("memcpy", &t, pos, n, out, cycles, tick_ns, 0, repeats);
    posenc_shm_detach(&t);
    free(pos);
    free(cycles);
    free(out);
    return 0;
}
