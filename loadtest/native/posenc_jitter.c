/* posenc-jitter: how much of a CPU this process really gets. It spins reading the clock and
 * counts the gaps (time the process did not run: interrupts, other tasks, the hypervisor).
 * A latency target below the gaps this reports cannot be met on the machine, whatever the
 * server does; `posenc bench qps` runs it on both CPUs next to its latency rows.
 *
 *   posenc-jitter [SECONDS]   ->  one JSON line */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    if (!(seconds > 0 && seconds <= 600)) {
        fprintf(stderr, "posenc-jitter: SECONDS must be in (0, 600]\n");
        return 2;
    }
    const uint64_t start = now_ns(), end = start + (uint64_t)(seconds * 1e9);
    uint64_t prev = start, over_50us = 0, over_500us = 0, lost = 0, worst = 0;
    for (uint64_t t = start; t < end; prev = t) {
        t = now_ns();
        uint64_t gap = t - prev;
        if (gap > 50000) {
            over_50us++;
            lost += gap;
        }
        over_500us += gap > 500000;
        worst = gap > worst ? gap : worst;
    }
    printf("{\"seconds\":%.3f,\"stalls_over_50us\":%llu,\"stalls_over_500us\":%llu,\"max_stall_us\":%.1f,"
           "\"lost_percent\":%.3f}\n",
           seconds, (unsigned long long)over_50us, (unsigned long long)over_500us, worst / 1e3,
           100.0 * (double)lost / (double)(prev - start));
    return 0;
}
