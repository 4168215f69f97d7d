/* An HDR-style latency histogram: exact below 2048 ns, then 1024 buckets per power of two
 * (0.1% relative precision) up to 2^36 ns (~69 s). Constant-time record, no allocation. */
#ifndef POSENC_LOAD_HDR_H
#define POSENC_LOAD_HDR_H

#include <stdint.h>
#include <string.h>

#define HDR_SUB_BITS 11
#define HDR_SUB (1u << HDR_SUB_BITS)
#define HDR_HALF (HDR_SUB / 2)
#define HDR_MAX_SHIFT 26
#define HDR_BUCKETS (HDR_SUB + HDR_MAX_SHIFT * HDR_HALF)

struct hdr {
    uint64_t counts[HDR_BUCKETS];
    uint64_t total;
    uint64_t max_ns;
    double sum_ns;
};

static inline size_t hdr_index(uint64_t ns) {
    if (ns < HDR_SUB)
        return (size_t)ns;
    int shift = 63 - __builtin_clzll(ns) - (HDR_SUB_BITS - 1); /* ns >> shift in [HALF, SUB) */
    if (shift > HDR_MAX_SHIFT)
        return HDR_BUCKETS - 1;
    return HDR_SUB + (size_t)(shift - 1) * HDR_HALF + (size_t)((ns >> shift) - HDR_HALF);
}

/* The largest value that lands in bucket i (what a percentile reports, as HdrHistogram does). */
static inline uint64_t hdr_bucket_top(size_t i) {
    if (i < HDR_SUB)
        return i;
    size_t k = i - HDR_SUB;
    unsigned shift = (unsigned)(k / HDR_HALF) + 1;
    uint64_t mantissa = k % HDR_HALF + HDR_HALF;
    return ((mantissa + 1) << shift) - 1;
}

static inline void hdr_record(struct hdr *h, uint64_t ns) {
    h->counts[hdr_index(ns)]++;
    h->total++;
    h->sum_ns += (double)ns;
    if (ns > h->max_ns)
        h->max_ns = ns;
}

/* Value at or below which `percent` of the recorded values fall (0 when empty). */
static inline uint64_t hdr_percentile(const struct hdr *h, double percent) {
    if (!h->total)
        return 0;
    uint64_t target = (uint64_t)(percent / 100.0 * (double)h->total + 0.999999);
    if (target < 1)
        target = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < HDR_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= target)
            return hdr_bucket_top(i) < h->max_ns ? hdr_bucket_top(i) : h->max_ns;
    }
    return h->max_ns;
}

#endif
