/* Replays golden vectors through every kernel path a CPU runs, the way a user's process does:
 * dlopen the shipped libposenc (its dispatcher picks the path at load), then run each vector
 * through the active entry points and through every path table posenc_kernels_for() offers,
 * and compare the bytes with the expected ones (written by tests/native/kernel_vectors.py from
 * the numba kernels, or from orjson for JSON text). The same source runs natively, under
 * qemu-x86_64 on emulated CPU models and under qemu-aarch64, so one file checks them all.
 *
 * usage: kernel_vectors LIBPOSENC VECTORS
 * Prints `dispatch: ...` (what the library chose or why it chose nothing), one
 * `path NAME: N vectors bit-identical` or `path NAME: not runnable` line per path, the same
 * for the JSON writers and CRC-32C kernels, and `mismatch ...` lines; exits 1 on any mismatch,
 * 2 on a usage or file error, 3 when the dispatcher refused (POSENC_ISA names a path the CPU
 * lacks: the message is printed and nothing else runs).
 *
 * Vector file: little-endian records until EOF, each
 *   u32 kind, u32 n_params, i64 params[n_params], u32 n_arrays, then n_arrays x (u64 size, bytes)
 * with the expected output last. Kinds and their params and arrays:
 *   1 sincos: n_rows n_sin row_stride sin_base cos_base n_cos interleaved dtype dense
 *             | positions freqs amp expected    (dense: the rows' CRC-32C is checked too)
 *   2 rope:   batch n_rows head_dim n_freq interleaved dtype | x cos sin expected
 *   3 alibi:  n_heads q_len k_len mode dtype | slopes q_pos k_pos expected
 *   4 json:   ndim shape... | float32 values, expected text (no NUL)
 *   5 crc32c: seed crc | data, expected crc (u32) */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc.h"

#define MAX_ARRAYS 8
#define MAX_PARAMS 16
#define FILL 0x7F /* bytes a layout leaves alone keep this in both the expected and the actual output */

typedef struct {
    uint32_t kind, n_params, n_arrays;
    int64_t p[MAX_PARAMS];
    uint64_t size[MAX_ARRAYS];
    unsigned char *data[MAX_ARRAYS];
} vector;

typedef struct {
    const posenc_kernels *(*kernels_for)(const char *);
    const char *(*isa)(void);
    const char *(*dispatch_error)(void);
    const char *(*cpu_features)(void);
    const posenc_kernels *(*active)(void);
    int64_t (*json_by)(const char *, const float *, const int64_t *, int, char *, int64_t);
    int64_t (*json_capacity)(const int64_t *, int);
    int (*crc_by)(const char *, uint32_t, const void *, size_t, uint32_t *);
} library;

static int read_exact(FILE *f, void *p, size_t n) { return fread(p, 1, n, f) == n; }

/* 1 = a vector read, 0 = clean EOF, -1 = a malformed file */
static int read_vector(FILE *f, vector *v) {
    memset(v, 0, sizeof *v);
    if (!read_exact(f, &v->kind, 4)) return feof(f) ? 0 : -1;
    if (!read_exact(f, &v->n_params, 4) || v->n_params > MAX_PARAMS) return -1;
    if (!read_exact(f, v->p, 8 * (size_t)v->n_params)) return -1;
    if (!read_exact(f, &v->n_arrays, 4) || v->n_arrays > MAX_ARRAYS) return -1;
    for (uint32_t i = 0; i < v->n_arrays; i++) {
        if (!read_exact(f, &v->size[i], 8) || v->size[i] > (1u << 30)) return -1;
        v->data[i] = malloc(v->size[i] ? v->size[i] : 1);
        if (!v->data[i] || !read_exact(f, v->data[i], v->size[i])) return -1;
    }
    return 1;
}

static void free_vector(vector *v) {
    for (uint32_t i = 0; i < v->n_arrays; i++) free(v->data[i]);
}

/* The vector's expected output against `got`; prints where they first differ. */
static int same(const vector *v, int index, const char *path, const void *got, uint64_t size) {
    const unsigned char *want = v->data[v->n_arrays - 1];
    if (size != v->size[v->n_arrays - 1]) {
        printf("mismatch vector %d kind %u path %s: %llu bytes, expected %llu\n", index, v->kind, path,
               (unsigned long long)size, (unsigned long long)v->size[v->n_arrays - 1]);
        return 0;
    }
    for (uint64_t i = 0; i < size; i++)
        if (((const unsigned char *)got)[i] != want[i]) {
            printf("mismatch vector %d kind %u path %s: byte %llu is 0x%02x, expected 0x%02x\n", index, v->kind, path,
                   (unsigned long long)i, ((const unsigned char *)got)[i], want[i]);
            return 0;
        }
    return 1;
}

static uint32_t crc32c_bitwise(uint32_t crc, const unsigned char *p, uint64_t n) {
    crc = ~crc;
    for (uint64_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* One kernel vector (kinds 1-3) through one path's table; 1 when bit-identical. */
static int run_kernel(const posenc_kernels *k, const vector *v, int index) {
    uint64_t out_size = v->size[v->n_arrays - 1];
    unsigned char *out = malloc(out_size ? out_size : 1);
    if (!out) return 0;
    memset(out, FILL, out_size);
    int rc = POSENC_EINVAL, ok = 1;
    const int64_t *p = v->p;
    if (v->kind == 1) {
        posenc_layout layout = {p[2], p[3], p[4], p[5], (int32_t)p[6], 0};
        rc = k->sincos_rows((const double *)v->data[0], p[0], (const double *)v->data[1],
                            (const double *)v->data[2], p[1], &layout, out, (int)p[7]);
        if (rc == POSENC_OK && p[8]) { /* dense rows: the fused checksum is the CRC-32C of the bytes */
            unsigned char *again = malloc(out_size ? out_size : 1);
            uint32_t crc = 0;
            if (!again) { free(out); return 0; }
            int rc2 = k->sincos_rows_crc((const double *)v->data[0], p[0], (const double *)v->data[1],
                                         (const double *)v->data[2], p[1], &layout, again, (int)p[7], &crc);
            uint32_t want = crc32c_bitwise(0, v->data[3], out_size);
            if (rc2 != POSENC_OK || crc != want) {
                printf("mismatch vector %d kind 1 path %s: sincos_rows_crc rc %d crc %08x, expected %08x\n", index,
                       k->name, rc2, crc, want);
                ok = 0;
            } else
                ok = same(v, index, k->name, again, out_size);
            free(again);
        }
    } else if (v->kind == 2) {
        rc = k->rope_rotate(v->data[0], out, p[0], p[1] * p[2], p[1], p[2], (const double *)v->data[1],
                            (const double *)v->data[2], p[3], (int)p[4], (int)p[5]);
    } else if (v->kind == 3) {
        rc = k->alibi_bias((const double *)v->data[0], p[0], (const double *)v->data[1], p[1],
                           (const double *)v->data[2], p[2], (int)p[3], out, p[1] * p[2], (int)p[4]);
    }
    if (rc != POSENC_OK) {
        printf("mismatch vector %d kind %u path %s: returned %d\n", index, v->kind, k->name, rc);
        ok = 0;
    } else
        ok = same(v, index, k->name, out, out_size) && ok;
    free(out);
    return ok;
}

static int run_json(const library *lib, const char *path, const vector *v, int index) {
    int ndim = (int)v->p[0];
    int64_t capacity = lib->json_capacity(v->p + 1, ndim);
    char *text = malloc((size_t)capacity + 1);
    if (!text) return 0;
    int64_t n = lib->json_by(path, (const float *)v->data[0], v->p + 1, ndim, text, capacity);
    int ok = n >= 0 && same(v, index, path, text, (uint64_t)n);
    if (n < 0) printf("mismatch vector %d kind 4 path %s: returned %lld\n", index, path, (long long)n);
    free(text);
    return ok;
}

static int run_crc(const library *lib, const char *kernel, const vector *v, int index) {
    uint32_t got = 0;
    int rc = lib->crc_by(kernel, (uint32_t)v->p[0], v->data[0], v->size[0], &got);
    return rc == 0 && same(v, index, kernel, &got, 4);
}

static int load(const char *path, library *lib) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "kernel_vectors: %s\n", dlerror());
        return 0;
    }
#define SYM(field, name) *(void **)&lib->field = dlsym(h, name)
    SYM(kernels_for, "posenc_kernels_for");
    SYM(isa, "posenc_isa");
    SYM(dispatch_error, "posenc_dispatch_error");
    SYM(cpu_features, "posenc_cpu_features");
    SYM(active, "posenc_active_kernels");
    SYM(json_by, "posenc_json_f32_by");
    SYM(json_capacity, "posenc_json_f32_capacity");
    SYM(crc_by, "posenc_crc32c_by");
#undef SYM
    if (!lib->kernels_for || !lib->isa || !lib->active || !lib->json_by || !lib->crc_by) {
        fprintf(stderr, "kernel_vectors: %s lacks a posenc symbol\n", path);
        return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: kernel_vectors LIBPOSENC VECTORS\n");
        return 2;
    }
    library lib;
    if (!load(argv[1], &lib)) return 2;
    if (!lib.isa()) {
        printf("dispatch: refused: %s\n", lib.dispatch_error());
        return 3;
    }
    printf("dispatch: %s (cpu: %s)\n", lib.isa(), lib.cpu_features()[0] ? lib.cpu_features() : "baseline");
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        perror(argv[2]);
        return 2;
    }
    static const char *paths[] = {"scalar", "avx2", "avx512"};
    static const char *json_paths[] = {"scalar", "avx2", "avx512"};
    static const char *crc_kernels[] = {"table", "sse4.2", "vpclmulqdq256", "vpclmulqdq"};
    int counts[3] = {0}, json_counts[3] = {0}, crc_counts[4] = {0}, active_count = 0, failures = 0, index = 0;
    vector v;
    int status;
    for (; (status = read_vector(f, &v)) == 1; index++, free_vector(&v)) {
        if (v.kind >= 1 && v.kind <= 3) {
            for (int i = 0; i < 3; i++) {
                const posenc_kernels *k = lib.kernels_for(paths[i]);
                if (k) counts[i] += run_kernel(k, &v, index) ? 1 : (failures++, 0);
            }
            active_count += run_kernel(lib.active(), &v, index) ? 1 : (failures++, 0);
        } else if (v.kind == 4) {
            for (int i = 0; i < 3; i++) {
                float none = 0;
                char text[256];
                int64_t shape = 0; /* an empty array: tells whether this writer runs here */
                if (lib.json_by(json_paths[i], &none, &shape, 1, text, sizeof text) == POSENC_ENOISA) continue;
                json_counts[i] += run_json(&lib, json_paths[i], &v, index) ? 1 : (failures++, 0);
            }
        } else if (v.kind == 5) {
            for (int i = 0; i < 4; i++) {
                uint32_t probe;
                if (lib.crc_by(crc_kernels[i], 0, "", 0, &probe) != 0) continue;
                crc_counts[i] += run_crc(&lib, crc_kernels[i], &v, index) ? 1 : (failures++, 0);
            }
        } else {
            fprintf(stderr, "kernel_vectors: vector %d has unknown kind %u\n", index, v.kind);
            return 2;
        }
    }
    fclose(f);
    if (status < 0) {
        fprintf(stderr, "kernel_vectors: %s is malformed at vector %d\n", argv[2], index);
        return 2;
    }
    for (int i = 0; i < 3; i++)
        if (lib.kernels_for(paths[i]))
            printf("path %s: %d vectors bit-identical\n", paths[i], counts[i]);
        else
            printf("path %s: not runnable\n", paths[i]);
    printf("active %s: %d vectors bit-identical\n", lib.active()->name, active_count);
    for (int i = 0; i < 3; i++) printf("json %s: %d vectors\n", json_paths[i], json_counts[i]);
    for (int i = 0; i < 4; i++) printf("crc32c %s: %d vectors\n", crc_kernels[i], crc_counts[i]);
    printf("%d vectors, %d mismatches\n", index, failures);
    return failures ? 1 : 0;
}
