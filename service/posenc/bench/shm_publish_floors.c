/* The memory and tmpfs floors of publishing a table, for `posenc bench shm` (shm_publish.py).
 *
 * Each floor is one way this machine has to put NBYTES into a new file of DIR (or into warm
 * memory, the ceiling), with nothing computed and nothing checksummed, timed in C so no
 * Python call overhead is in it; the fastest safe one bounds what a publish can reach. Usage: shm_publish_floors DIR NBYTES REPEATS BLOCK_BYTES.
 * Prints one line per floor: "key median_seconds". The file is created and unlinked untimed.
 *
 *   memcpy_warm           memcpy between two warm anonymous buffers: the memory-speed ceiling
 *   memset_warm           memset of a warm anonymous buffer
 *   fallocate             posix_fallocate of a new file (tmpfs allocates every page)
 *   fault_memset          ftruncate + mmap MAP_SHARED + memset: each page faulted in,
 *                         allocated and zeroed, then overwritten
 *   fallocate_fault_memset    fallocate first, then the same (the faults zero, not allocate)
 *   fallocate_populate        fallocate + mmap MAP_POPULATE alone (zeroes and maps every page)
 *   fallocate_populate_memcpy the same, then memcpy from a warm buffer
 *   pwrite                pwrite of one cache-hot BLOCK_BYTES block per slot, no fallocate
 *   fallocate_pwrite      fallocate, then the same pwrites (the writer's own path, minus rows and CRC)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static char path[4096];
static size_t nbytes, block;
static unsigned char *source, *target, *hot;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static int new_file(void)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) die("open");
    return fd;
}

static void drop_file(int fd)
{
    close(fd);
    unlink(path);
}

static void reserve(int fd)
{
    if (posix_fallocate(fd, 0, (off_t)nbytes) != 0) die("posix_fallocate");
}

static unsigned char *map(int fd, int flags)
{
    void *p = mmap(NULL, nbytes, PROT_READ | PROT_WRITE, MAP_SHARED | flags, fd, 0);
    if (p == MAP_FAILED) die("mmap");
    return p;
}

static void pwrite_blocks(int fd)
{
    for (size_t off = 0; off < nbytes; off += block) {
        size_t n = nbytes - off < block ? nbytes - off : block;
        for (size_t done = 0; done < n;) {
            ssize_t w = pwrite(fd, hot + done, n - done, (off_t)(off + done));
            if (w <= 0) die("pwrite");
            done += (size_t)w;
        }
    }
}

/* One timed run of a floor; `fd` is a new empty file (ftruncate'd to nbytes where mapped). */
static double run(const char *key, int fd)
{
    double t0 = now();
    if (!strcmp(key, "memcpy_warm")) {
        memcpy(target, source, nbytes);
    } else if (!strcmp(key, "memset_warm")) {
        memset(target, 7, nbytes);
    } else if (!strcmp(key, "fallocate")) {
        reserve(fd);
    } else if (!strcmp(key, "pwrite")) {
        pwrite_blocks(fd);
    } else if (!strcmp(key, "fallocate_pwrite")) {
        reserve(fd);
        pwrite_blocks(fd);
    } else {
        int populate = strstr(key, "populate") != NULL;
        if (!strncmp(key, "fallocate", 9)) reserve(fd);
        else if (ftruncate(fd, (off_t)nbytes) != 0) die("ftruncate");
        unsigned char *p = map(fd, populate ? MAP_POPULATE : 0);
        if (strstr(key, "memset")) memset(p, 7, nbytes);
        else if (strstr(key, "memcpy")) memcpy(p, source, nbytes);
        double t = now() - t0;
        munmap(p, nbytes);
        return t;
    }
    return now() - t0;
}

static int compare(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s DIR NBYTES REPEATS BLOCK_BYTES\n", argv[0]);
        return 2;
    }
    snprintf(path, sizeof path, "%s/floors-%d", argv[1], (int)getpid());
    nbytes = strtoull(argv[2], NULL, 10);
    int repeats = atoi(argv[3]);
    block = strtoull(argv[4], NULL, 10);
    if (nbytes == 0 || repeats < 1 || repeats > 1000 || block == 0) return 2;
    source = malloc(nbytes);
    target = malloc(nbytes);
    hot = malloc(block);
    if (!source || !target || !hot) die("malloc");
    memset(source, 1, nbytes);
    memset(target, 2, nbytes);
    memset(hot, 3, block);
    static const char *keys[] = {"memcpy_warm", "memset_warm", "fallocate", "fault_memset",
                                 "fallocate_fault_memset", "fallocate_populate", "fallocate_populate_memcpy", "pwrite", "fallocate_pwrite"};
    double *times = malloc(sizeof(double) * (size_t)repeats);
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        for (int r = 0; r < repeats; r++) {
            int fd = new_file();
            times[r] = run(keys[k], fd);
            drop_file(fd);
        }
        qsort(times, (size_t)repeats, sizeof *times, compare);
        printf("%s %.9f\n", keys[k], times[repeats / 2]);
    }
    return 0;
}
