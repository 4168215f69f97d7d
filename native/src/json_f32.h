/* Internal to libposenc's float32 -> JSON printer (json_f32.c, json_lanes.h, json_f32_avx2.c,
 * json_f32_avx512.c). */
#ifndef POSENC_JSON_F32_H
#define POSENC_JSON_F32_H

#include <stdint.h>

/* The scale of one binary exponent (json_tables.h, made by native/tools/gen_json_tables.py). */
typedef struct {
    uint64_t g; /* 10^-k as 63 bits, rounded up */
    int32_t k;  /* the decimal scale */
    int32_t h;  /* the shift of 4c before the product */
} json_scale;

/* [biased exponent][a power of two above the smallest normal, whose interval is narrower below] */
extern const json_scale posenc_json_scales[255][2];
/* The vector writers' 16-byte shuffles, one per notation case (json_tables.h, same script). */
#define JSON_PLAIN_CASES 171 /* then 162 scientific ones */
#define JSON_SHUFFLES 333
extern const uint8_t posenc_json_shuffles[JSON_SHUFFLES][16];

/* Writes n numbers of a row (float32 bit patterns), each followed by ',', at p; returns the end.
 * Each number's stores reach at most JSON_ROW_REACH bytes past its start. */
typedef char *(*json_row_fn)(char *p, const uint32_t *bits, int64_t n);
#define JSON_ROW_REACH 32

char *posenc_json_row_scalar(char *p, const uint32_t *bits, int64_t n);
#if defined(__x86_64__)
char *posenc_json_row_avx2(char *p, const uint32_t *bits, int64_t n);
char *posenc_json_row_avx512(char *p, const uint32_t *bits, int64_t n);
#endif

/* The text of a zero ("0.0", after the sign) or a non-finite value ("null", no sign) at p. */
static inline char *posenc_json_special(char *p, uint32_t bits)
{
    if ((bits & 0x7FFFFFFF) >= 0x7F800000) {
        __builtin_memcpy(p, "null", 4);
        return p + 4;
    }
    *p = '-';
    p += bits >> 31;
    __builtin_memcpy(p, "0.0", 4); /* 4: the NUL is overwritten by what follows */
    return p + 3;
}

static inline int posenc_json_is_special(uint32_t bits)
{
    uint32_t magnitude = bits & 0x7FFFFFFF;
    return magnitude == 0 || magnitude >= 0x7F800000;
}

#endif
