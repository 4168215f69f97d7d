/* A stand-in for libFuzzer where clang is not installed: the same command line
 * (posenc-fuzz [-max_total_time=S] [-runs=N] CORPUS_DIR...), mutating the corpus files
 * (bit flips, byte stores, inserts, deletes, splices, length-field edits) for S seconds.
 * Not coverage-guided, so clang's libFuzzer finds more; both run under ASan + UBSan. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INPUT_MAX 4096

struct corpus {
    uint8_t **items;
    size_t *sizes;
    size_t n, cap;
};

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t next_random(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void add(struct corpus *c, const uint8_t *data, size_t size) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->items = realloc(c->items, c->cap * sizeof *c->items);
        c->sizes = realloc(c->sizes, c->cap * sizeof *c->sizes);
    }
    c->items[c->n] = malloc(size ? size : 1);
    memcpy(c->items[c->n], data, size);
    c->sizes[c->n++] = size;
}

static void load_dir(struct corpus *c, const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        uint8_t buf[INPUT_MAX];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        if (n)
            add(c, buf, n);
    }
    if (d)
        closedir(d);
}

static void insert(uint8_t *buf, size_t *n, size_t at, const uint8_t *src, size_t len) {
    if (*n + len > INPUT_MAX)
        return;
    memmove(buf + at + len, buf + at, *n - at);
    memcpy(buf + at, src, len);
    *n += len;
}

/* One to four random edits of `buf` (size *n, capacity INPUT_MAX). */
static void mutate(uint8_t *buf, size_t *n, const struct corpus *c) {
    static const uint32_t interesting[] = {0, 1, 31, 32, 33, 65536, 0x7fffffff, 0x80000000, 0xffffffff};
    int edits = 1 + (int)(next_random() % 4);
    for (int k = 0; k < edits; k++) {
        size_t at = *n ? next_random() % *n : 0;
        uint8_t byte = (uint8_t)next_random();
        switch (next_random() % 7) {
        case 0: /* flip a bit */
            if (*n)
                buf[at] ^= (uint8_t)(1u << (next_random() % 8));
            break;
        case 1: /* store a byte */
            if (*n)
                buf[at] = byte;
            break;
        case 2: /* a little-endian u32 that matters as a length or count */
            if (*n >= at + 4) {
                uint32_t v = interesting[next_random() % (sizeof interesting / sizeof *interesting)];
                memcpy(buf + at, &v, 4);
            }
            break;
        case 3: /* insert a byte */
            insert(buf, n, at, &byte, 1);
            break;
        case 4: /* delete a run */
            if (*n) {
                size_t len = 1 + next_random() % (*n - at);
                memmove(buf + at, buf + at + len, *n - at - len);
                *n -= len;
            }
            break;
        case 5: { /* splice in part of another input */
            size_t i = next_random() % c->n;
            insert(buf, n, at, c->items[i], c->sizes[i] ? next_random() % c->sizes[i] : 0);
            break;
        }
        case 6: /* truncate */
            *n = at;
            break;
        }
    }
}

int main(int argc, char **argv) {
    double seconds = 10;
    long long runs = -1;
    struct corpus c = {0};
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "-max_total_time=", 16) == 0)
            seconds = atof(argv[i] + 16);
        else if (strncmp(argv[i], "-runs=", 6) == 0)
            runs = atoll(argv[i] + 6);
        else if (argv[i][0] != '-')
            load_dir(&c, argv[i]);
    }
    if (!c.n)
        add(&c, (const uint8_t *)"\0", 1);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long long done = 0;
    for (size_t i = 0; i < c.n; i++, done++)
        LLVMFuzzerTestOneInput(c.items[i], c.sizes[i]);
    uint8_t buf[INPUT_MAX];
    for (;; done++) {
        if (runs >= 0 && done >= runs)
            break;
        if ((done & 255) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 >= seconds)
                break;
        }
        size_t i = next_random() % c.n, n = c.sizes[i] < INPUT_MAX ? c.sizes[i] : INPUT_MAX;
        memcpy(buf, c.items[i], n);
        mutate(buf, &n, &c);
        LLVMFuzzerTestOneInput(buf, n);
    }
    printf("Done %lld runs (posenc fuzz driver, %zu corpus inputs)\n", done, c.n);
    for (size_t i = 0; i < c.n; i++)
        free(c.items[i]);
    free(c.items);
    free(c.sizes);
    return 0;
}
