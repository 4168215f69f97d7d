/* Registered tables, served from the shared-memory store through posenc_shm.h.
 *
 * Table ids are the server's: a name gets the next id the first time any connection
 * resolves it, and keeps it for the life of the process (the id still answers after the
 * table is replaced by a new generation). Each event-loop thread maps the segments it uses
 * itself, so no mapping is ever shared between threads and a thread can drop a replaced
 * generation without coordinating with the others. */
#ifndef POSENC_SERVER_TABLES_H
#define POSENC_SERVER_TABLES_H

#include "posenc_shm.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "inline_spec.h"

/* Most distinct table names one server process can give ids to (--max-table-ids). */
#define TABLE_IDS_MAX 4096
/* How often a thread checks that the generations it maps are still the current ones. */
#define TABLE_CHECK_MS 100

struct table_name {
    char name[POSENC_SHM_NAME_MAX + 1];
    _Atomic uint64_t verified_generation; /* data CRC checked by one thread already */
};

struct table_names { /* shared by all threads; append-only */
    pthread_mutex_t lock;
    uint32_t limit;            /* --max-table-ids, <= TABLE_IDS_MAX */
    uint32_t max_dim;          /* --max-dim: a computed table's spec is held to it like an inline one */
    _Atomic uint32_t count;
    struct table_name entries[TABLE_IDS_MAX];
};

/* What a thread holds for one table id: the mapping and, for a named computed encoding
 * (POSENC_SHM_SPEC), its spec block parsed once per mapped generation (pointing into the mapping). */
struct served_table {
    posenc_shm_table shm; /* first: functions below hand out &served->shm */
    struct inline_spec spec;
    double position_offset; /* added to each position before the sin/cos (a sinusoid's offset) */
    uint8_t default_dtype;  /* POSENC_DTYPE_FLOAT32 or _FLOAT64: the spec's dtype, what RESOLVE reports */
    posenc_sincos_plan *plan; /* the spec's frequencies with their part caches, kept between requests */
};

struct table_cache { /* one per thread */
    struct served_table *by_id[TABLE_IDS_MAX + 1];
    uint64_t next_check_ms;
};

void table_names_init(struct table_names *names, uint32_t limit, uint32_t max_dim);

/* The wire dtype a table's rows come in unless asked otherwise: how a stored table holds them, a
 * computed table's spec's dtype. */
static inline uint8_t tables_wire_dtype(const posenc_shm_table *table) {
    if (table->dtype == POSENC_SHM_SPEC)
        return ((const struct served_table *)table)->default_dtype;
    return table->dtype == POSENC_SHM_FLOAT64 ? POSENC_DTYPE_FLOAT64 : POSENC_DTYPE_FLOAT32;
}

/* The parsed spec of a computed table (table->dtype == POSENC_SHM_SPEC) from tables_get or
 * tables_resolve, valid while the table is. */
static inline const struct served_table *tables_served(const posenc_shm_table *table) {
    return (const struct served_table *)table;
}

/* The id of a valid, currently published table name (assigning one on first use) and its
 * mapping in this thread. Returns 0 or a POSENC_STATUS_* with `err` naming the field. */
int tables_resolve(struct table_names *names, struct table_cache *cache, const char *dir, const char *name,
                   uint32_t *id, const posenc_shm_table **table, char *err, size_t errlen);

/* The mapping of table `id` in this thread, attaching (or re-attaching a replaced
 * generation) when needed. Same return convention. */
int tables_get(struct table_names *names, struct table_cache *cache, const char *dir, uint32_t id,
               const posenc_shm_table **table, char *err, size_t errlen);

/* Drop mappings whose segment file is gone (the table was replaced or removed); they are
 * attached again on next use. Cheap when not due (every TABLE_CHECK_MS). */
void tables_check(struct table_cache *cache, const char *dir, uint64_t now_ms);

/* Whether the table holds given values (a learned table: its spec's encoding has "kind":"learned")
 * rather than rows computed from a spec. The server has no JSON parser: this scans the spec's
 * tokens, skipping strings whole (so no tensor name can fake the key), for the one "kind" key an
 * accepted spec has. A kind spelled with escapes ("\u006bind") is not recognised: the table is then
 * treated as computed, which refuses 16-bit rows from float32 (never a wrong answer). */
int tables_is_learned(const posenc_shm_table *table);

/* JSON object describing one attached table. */
int tables_describe(const posenc_shm_table *table, uint32_t id, struct buf *json);

/* JSON array with every published table `dir` holds (resolving each). */
int tables_list(struct table_names *names, struct table_cache *cache, const char *dir, struct buf *json,
                char *err, size_t errlen);

void tables_release(struct table_cache *cache);

#endif
