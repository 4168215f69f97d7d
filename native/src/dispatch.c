/* The one dispatch file: detect what the CPU and OS can run, pick a kernel table once at
 * load, and route the public entry points through it. Compiled for the baseline CPU (no
 * target attributes here), so it runs anywhere and never executes an instruction the CPU
 * lacks: the AVX2 and AVX-512 tables are only touched after the checks below.
 *
 * An ISA counts only if CPUID reports it AND the OS saves its registers on context switch
 * (XGETBV: XCR0 bits 1-2 for YMM, 5-7 for the AVX-512 mask and ZMM state). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc.h"

#if defined(__x86_64__) || defined(__i386__)
#define POSENC_X86 1
#include <cpuid.h>
#endif

extern const posenc_kernels posenc_kernels_scalar;
#ifdef POSENC_X86
extern const posenc_kernels posenc_kernels_avx2;
extern const posenc_kernels posenc_kernels_avx512;
#endif

typedef struct {
    int sse2, avx, avx2, fma, f16c, avx512f, avx512dq, avx512bw, avx512vl, os_ymm, os_zmm;
} cpu_features;

static cpu_features cpu;
static char feature_text[160];
static const posenc_kernels *active;
static char error_text[320];

#ifdef POSENC_X86
static unsigned long long read_xcr0(void) {
    unsigned int lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}
#endif

static cpu_features detect_cpu(void) {
    cpu_features f = {0};
#ifdef POSENC_X86
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return f;
    f.sse2 = (d >> 26) & 1;
    f.fma = (c >> 12) & 1;
    f.avx = (c >> 28) & 1;
    f.f16c = (c >> 29) & 1;
    int osxsave = (c >> 27) & 1;
    if (__get_cpuid_max(0, NULL) >= 7 && __get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        f.avx2 = (b >> 5) & 1;
        f.avx512f = (b >> 16) & 1;
        f.avx512dq = (b >> 17) & 1;
        f.avx512bw = (b >> 30) & 1;
        f.avx512vl = (b >> 31) & 1;
    }
    if (osxsave) {
        unsigned long long xcr0 = read_xcr0();
        f.os_ymm = (xcr0 & 0x6) == 0x6;
        f.os_zmm = (xcr0 & 0xE6) == 0xE6;
    }
#endif
    return f;
}

static void describe_cpu(const cpu_features *f, char *buf, size_t size) {
    const struct { const char *name; int on; } items[] = {
        {"sse2", f->sse2}, {"avx", f->avx}, {"avx2", f->avx2}, {"fma", f->fma}, {"f16c", f->f16c},
        {"avx512f", f->avx512f}, {"avx512dq", f->avx512dq}, {"avx512bw", f->avx512bw},
        {"avx512vl", f->avx512vl}, {"os-ymm", f->os_ymm}, {"os-zmm", f->os_zmm},
    };
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++)
        if (items[i].on && used < size)
            used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? " " : "", items[i].name);
}

/* Paths from best to worst, with what each needs. */
static const struct {
    const char *name;
    const char *needs;
} paths[] = {
    {"avx512", "avx512f, avx2 and fma with OS-enabled ZMM state"},
    {"avx2", "avx2 and fma with OS-enabled YMM state"},
    {"scalar", "nothing"},
};

static const posenc_kernels *table_if_runnable(const char *name) {
#ifdef POSENC_X86
    int avx2_ok = cpu.avx && cpu.avx2 && cpu.fma && cpu.os_ymm;
    if (strcmp(name, "avx512") == 0)
        return avx2_ok && cpu.avx512f && cpu.os_zmm ? &posenc_kernels_avx512 : NULL;
    if (strcmp(name, "avx2") == 0)
        return avx2_ok ? &posenc_kernels_avx2 : NULL;
#endif
    if (strcmp(name, "scalar") == 0)
        return &posenc_kernels_scalar;
    return NULL;
}

static void choose(const char *forced) {
    size_t n_paths = sizeof paths / sizeof paths[0];
    if (!forced || !*forced || strcmp(forced, "auto") == 0) {
        for (size_t i = 0; i < n_paths && !active; i++)
            active = table_if_runnable(paths[i].name);
        return;
    }
    for (size_t i = 0; i < n_paths; i++) {
        if (strcmp(forced, paths[i].name) != 0)
            continue;
        active = table_if_runnable(forced);
        if (!active)
            snprintf(error_text, sizeof error_text,
                     "POSENC_ISA=%s asks for a path this CPU cannot run (%s needs %s; detected: %s)", forced,
                     forced, paths[i].needs, feature_text[0] ? feature_text : "none");
        return;
    }
    snprintf(error_text, sizeof error_text, "POSENC_ISA=%.40s is not a path; use one of avx512, avx2, scalar, auto",
             forced);
}

__attribute__((constructor)) static void posenc_dispatch_init(void) {
    cpu = detect_cpu();
    describe_cpu(&cpu, feature_text, sizeof feature_text);
    const char *forced = getenv("POSENC_ISA");
    choose(forced);
    const char *debug = getenv("POSENC_DEBUG");
    if (debug && *debug && strcmp(debug, "0") != 0) {
        if (active)
            fprintf(stderr, "posenc: native kernels: %s path (POSENC_ISA=%s; cpu: %s)\n", active->name,
                    forced && *forced ? forced : "auto", feature_text);
        else
            fprintf(stderr, "posenc: native kernels: no path: %s\n", error_text);
    }
}

const char *posenc_isa(void) { return active ? active->name : NULL; }
const char *posenc_dispatch_error(void) { return error_text; }
const char *posenc_cpu_features(void) { return feature_text; }
const posenc_kernels *posenc_kernels_for(const char *isa) { return isa ? table_if_runnable(isa) : NULL; }
const posenc_kernels *posenc_active_kernels(void) { return active; }
int posenc_abi_version(void) { return POSENC_ABI_VERSION; }

int posenc_sincos_rows(const double *positions, int64_t n_rows, const double *freqs, const double *amp,
                       int64_t n_sin, const posenc_layout *layout, void *out, int dtype) {
    return active ? active->sincos_rows(positions, n_rows, freqs, amp, n_sin, layout, out, dtype) : POSENC_ENOISA;
}

int posenc_sincos_rows_crc(const double *positions, int64_t n_rows, const double *freqs, const double *amp,
                           int64_t n_sin, const posenc_layout *layout, void *out, int dtype, uint32_t *crc) {
    return active ? active->sincos_rows_crc(positions, n_rows, freqs, amp, n_sin, layout, out, dtype, crc)
                  : POSENC_ENOISA;
}

/* A plan remembers the path that made it: a later POSENC_ISA cannot change it under its scratch. */
struct posenc_sincos_plan {
    const posenc_kernels *kernels;
    void *impl;
};

posenc_sincos_plan *posenc_sincos_plan_new(const double *freqs, const double *amp, int64_t n_sin) {
    const posenc_kernels *k = posenc_active_kernels();
    posenc_sincos_plan *plan = k ? malloc(sizeof *plan) : NULL;
    if (!plan)
        return NULL;
    plan->kernels = k;
    plan->impl = k->sincos_plan_new(freqs, amp, n_sin);
    if (!plan->impl) {
        free(plan);
        return NULL;
    }
    return plan;
}

int posenc_sincos_plan_rows(posenc_sincos_plan *plan, const double *positions, int64_t n_rows,
                            const posenc_layout *layout, void *out, int dtype) {
    return plan ? plan->kernels->sincos_plan_rows(plan->impl, positions, n_rows, layout, out, dtype)
                : POSENC_EINVAL;
}

void posenc_sincos_plan_free(posenc_sincos_plan *plan) {
    if (plan) {
        plan->kernels->sincos_plan_free(plan->impl);
        free(plan);
    }
}

int posenc_rope_rotate(const void *x, void *out, int64_t batch, int64_t batch_stride, int64_t n_rows,
                       int64_t head_dim, const double *cos, const double *sin, int64_t n_freq, int interleaved,
                       int dtype) {
    return active ? active->rope_rotate(x, out, batch, batch_stride, n_rows, head_dim, cos, sin, n_freq,
                                        interleaved, dtype)
                  : POSENC_ENOISA;
}

int posenc_alibi_bias(const double *slopes, int64_t n_heads, const double *q_pos, int64_t q_len,
                      const double *k_pos, int64_t k_len, int mode, void *out, int64_t head_stride, int dtype) {
    return active ? active->alibi_bias(slopes, n_heads, q_pos, q_len, k_pos, k_len, mode, out, head_stride, dtype)
                  : POSENC_ENOISA;
}

int posenc_gather_rows(const void *table, int64_t n_table_rows, int64_t row_bytes, const int64_t *rows, int64_t n,
                       void *out, int64_t *bad_k) {
    return active ? active->gather_rows(table, n_table_rows, row_bytes, rows, n, out, bad_k) : POSENC_ENOISA;
}
