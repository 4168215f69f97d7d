/* Per-thread counters. Each is written by its own event-loop thread only (a relaxed load and
 * store, no lock prefix on the hot path) and read by whichever thread answers STATS. */
#ifndef POSENC_SERVER_COUNTERS_H
#define POSENC_SERVER_COUNTERS_H

#include <stdatomic.h>
#include <stdint.h>

#include "posenc_proto.h"

struct counters {
    _Atomic uint64_t requests[POSENC_OP_MAX + 1]; /* by opcode */
    _Atomic uint64_t errors[POSENC_STATUS_MAX + 1]; /* by status */
    _Atomic uint64_t positions;     /* positions encoded */
    _Atomic uint64_t bytes_in;
    _Atomic uint64_t bytes_out;
    _Atomic uint64_t accepted;      /* connections */
    _Atomic uint64_t rejected;      /* over --max-connections */
    _Atomic uint64_t closed;
    _Atomic uint64_t idle_closed;   /* closed by --idle-timeout-ms */
};

static inline void counter_add(_Atomic uint64_t *c, uint64_t n) {
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

static inline uint64_t counter_get(_Atomic uint64_t *c) {
    return atomic_load_explicit(c, memory_order_relaxed);
}

#endif
