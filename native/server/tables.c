#include "tables.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json.h"
#include "posenc_proto.h"

void table_names_init(struct table_names *names, uint32_t limit, uint32_t max_dim) {
    pthread_mutex_init(&names->lock, NULL);
    names->limit = limit;
    names->max_dim = max_dim;
    atomic_init(&names->count, 0);
}

static uint32_t find_id(struct table_names *names, const char *name) {
    uint32_t count = atomic_load_explicit(&names->count, memory_order_acquire);
    for (uint32_t i = 0; i < count; i++)
        if (strcmp(names->entries[i].name, name) == 0)
            return i + 1;
    return 0;
}

/* The id of `name`, giving it the next one if it has none; 0 when the id space is full. */
static uint32_t assign_id(struct table_names *names, const char *name) {
    uint32_t id = find_id(names, name);
    if (id)
        return id;
    pthread_mutex_lock(&names->lock);
    id = find_id(names, name);
    uint32_t count = atomic_load_explicit(&names->count, memory_order_relaxed);
    if (!id && count < names->limit) {
        struct table_name *entry = &names->entries[count];
        strcpy(entry->name, name);
        atomic_store_explicit(&entry->verified_generation, 0, memory_order_relaxed);
        atomic_store_explicit(&names->count, count + 1, memory_order_release); /* publishes the name */
        id = count + 1;
    }
    pthread_mutex_unlock(&names->lock);
    return id;
}

/* Map the current generation of table `name` into t. The data CRC is checked unless
 * `verified` says a thread already checked this generation (segments never change once
 * READY); then *verified records it. */
static int attach(const char *name, _Atomic uint64_t *verified, posenc_shm_table *t, const char *dir,
                  const char *field, char *err, size_t errlen) {
    int rc = posenc_shm_attach(t, dir, name, 0);
    if (rc == POSENC_SHM_OK && atomic_load_explicit(verified, memory_order_acquire) != t->generation) {
        if (posenc_shm_verify(t) == POSENC_SHM_OK) {
            atomic_store_explicit(verified, t->generation, memory_order_release);
        } else {
            unsigned long long generation = (unsigned long long)t->generation;
            posenc_shm_detach(t); /* clears t, error text included */
            snprintf(t->error, sizeof t->error, "generation %llu: data checksum mismatch", generation);
            rc = POSENC_SHM_ECHECKSUM;
        }
    }
    switch (rc) {
    case POSENC_SHM_OK:
        return 0;
    case POSENC_SHM_ENOTFOUND:
        snprintf(err, errlen, "%s: no published table named '%s' in %s", field, name, dir);
        return POSENC_STATUS_UNKNOWN_TABLE;
    default:
        snprintf(err, errlen, "%s: table '%s' cannot be served: %s", field, name, t->error);
        return POSENC_STATUS_TABLE_UNAVAILABLE;
    }
}

/* This thread's slot for `id` (allocated on first use), or NULL when memory is short. */
static struct served_table *slot(struct table_cache *cache, uint32_t id) {
    if (!cache->by_id[id])
        cache->by_id[id] = calloc(1, sizeof(struct served_table));
    return cache->by_id[id];
}

/* Let go of a slot's mapping (and a computed table's plan, made for that generation's spec). */
static void served_detach(struct served_table *s) {
    posenc_shm_detach(&s->shm);
    posenc_sincos_plan_free(s->plan);
    s->plan = NULL;
}

/* A computed table's spec block parsed into s (docs/shm-format.md, "Computed tables"): the prefix's
 * reserved bytes zero, the offset within 2^53, the inline spec valid and as wide as the header says.
 * 0, or TABLE_UNAVAILABLE (the table detached) with `err` saying why. Stored tables: nothing to do. */
static int parse_computed(struct served_table *s, uint32_t max_dim, const char *field, char *err, size_t errlen) {
    posenc_shm_table *t = &s->shm;
    if (t->dtype != POSENC_SHM_SPEC)
        return 0;
    int64_t offset = (int64_t)posenc_load_u64(t->data);
    uint32_t dtype = posenc_load_u32(t->data + 8);
    char why[200] = "";
    if (!posenc_shm__zero(t->data + 12, POSENC_SHM_SPEC_PREFIX - 12) || offset > (1LL << 53) ||
        offset < -(1LL << 53) || (dtype != POSENC_DTYPE_FLOAT32 && dtype != POSENC_DTYPE_FLOAT64))
        snprintf(why, sizeof why, "a bad spec block prefix");
    else if (t->data_nbytes - POSENC_SHM_SPEC_PREFIX > UINT32_MAX) /* an aux block's length is a u32 */
        snprintf(why, sizeof why, "a spec block of %llu bytes", (unsigned long long)t->data_nbytes);
    else if (inline_spec_parse(t->data + POSENC_SHM_SPEC_PREFIX, (uint32_t)(t->data_nbytes - POSENC_SHM_SPEC_PREFIX),
                               max_dim, &s->spec, why, sizeof why) != 0)
        ; /* why says it */
    else if (s->spec.p.row_width != t->width)
        snprintf(why, sizeof why, "its spec block's rows are %u wide, its header says %llu", s->spec.p.row_width,
                 (unsigned long long)t->width);
    if (!why[0]) {
        s->position_offset = (double)offset;
        s->default_dtype = (uint8_t)dtype;
        s->plan = inline_spec_plan(&s->spec);
        if (s->plan)
            return 0;
        snprintf(err, errlen, "%s: no memory to serve computed table '%s'", field, t->name);
        served_detach(s);
        return POSENC_STATUS_INTERNAL;
    }
    snprintf(err, errlen, "%s: computed table '%s' cannot be served: %s", field, t->name, why);
    served_detach(s);
    return POSENC_STATUS_TABLE_UNAVAILABLE;
}

static int out_of_memory(const char *field, char *err, size_t errlen) {
    snprintf(err, errlen, "%s: out of memory", field);
    return POSENC_STATUS_INTERNAL;
}

/* This thread's mapping of `id`, attached if it was not. */
static int ensure_attached(struct table_names *names, struct table_cache *cache, const char *dir, uint32_t id,
                           const char *field, const posenc_shm_table **table, char *err, size_t errlen) {
    struct served_table *s = slot(cache, id);
    if (!s)
        return out_of_memory(field, err, errlen);
    if (!s->shm.base) {
        struct table_name *entry = &names->entries[id - 1];
        int rc = attach(entry->name, &entry->verified_generation, &s->shm, dir, field, err, errlen);
        if (!rc)
            rc = parse_computed(s, names->max_dim, field, err, errlen);
        if (rc)
            return rc;
    }
    *table = &s->shm;
    return 0;
}

/* Whether the segment file t was mapped from still exists: a publisher unlinks a
 * generation's file after pointing the registry at its successor (or removing the name). */
static int still_published(const posenc_shm_table *t, const char *dir) {
    char path[PATH_MAX + 96];
    struct stat st;
    snprintf(path, sizeof path, "%s/posenc.%s.%llu", dir, t->name, (unsigned long long)t->generation);
    return stat(path, &st) == 0 || errno != ENOENT;
}

int tables_resolve(struct table_names *names, struct table_cache *cache, const char *dir, const char *name,
                   uint32_t *id, const posenc_shm_table **table, char *err, size_t errlen) {
    if (!posenc_shm_valid_name(name)) {
        snprintf(err, errlen, "name: must be 1..%d characters of [A-Za-z0-9_.-], without '..'", POSENC_SHM_NAME_MAX);
        return POSENC_STATUS_BAD_ARGUMENT;
    }
    *id = find_id(names, name);
    if (*id) { /* known name: re-check the generation now rather than at the next tables_check */
        struct served_table *s = cache->by_id[*id];
        if (s && s->shm.base && !still_published(&s->shm, dir))
            served_detach(s);
        return ensure_attached(names, cache, dir, *id, "name", table, err, errlen);
    }
    /* a new name gets an id only once its table has been attached */
    posenc_shm_table fresh;
    _Atomic uint64_t verified = 0;
    int rc = attach(name, &verified, &fresh, dir, "name", err, errlen);
    if (rc)
        return rc;
    *id = assign_id(names, name);
    struct served_table *s = *id ? slot(cache, *id) : NULL;
    if (!s) {
        posenc_shm_detach(&fresh);
        if (*id)
            return out_of_memory("name", err, errlen);
        snprintf(err, errlen, "name: this server has given out all %u table ids (--max-table-ids); restart it",
                 names->limit);
        return POSENC_STATUS_INTERNAL;
    }
    atomic_store_explicit(&names->entries[*id - 1].verified_generation, fresh.generation, memory_order_release);
    served_detach(s); /* another thread may have given this name its id meanwhile */
    s->shm = fresh;
    rc = parse_computed(s, names->max_dim, "name", err, errlen);
    if (rc)
        return rc;
    *table = &s->shm;
    return 0;
}

int tables_get(struct table_names *names, struct table_cache *cache, const char *dir, uint32_t id,
               const posenc_shm_table **table, char *err, size_t errlen) {
    struct served_table *s = id <= TABLE_IDS_MAX ? cache->by_id[id] : NULL;
    if (s && s->shm.base) { /* the hot path */
        *table = &s->shm;
        return 0;
    }
    if (id == 0 || id > atomic_load_explicit(&names->count, memory_order_acquire)) {
        snprintf(err, errlen, "table_id: %u is not an id this server gave out (RESOLVE the table's name first)",
                 id);
        return POSENC_STATUS_UNKNOWN_TABLE;
    }
    return ensure_attached(names, cache, dir, id, "table_id", table, err, errlen);
}

void tables_check(struct table_cache *cache, const char *dir, uint64_t now_ms) {
    if (now_ms < cache->next_check_ms)
        return;
    cache->next_check_ms = now_ms + TABLE_CHECK_MS;
    for (uint32_t id = 1; id <= TABLE_IDS_MAX; id++) {
        struct served_table *s = cache->by_id[id];
        if (s && s->shm.base && !still_published(&s->shm, dir))
            served_detach(s);
    }
}

static size_t skip_json_space(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

int tables_is_learned(const posenc_shm_table *t) {
    const char *s = t->spec_json;
    size_t n = t->spec_json_len;
    for (size_t i = 0; i < n;) {
        if (s[i++] != '"')
            continue;
        size_t first = i; /* a string token: to its closing quote, escapes skipped whole */
        while (i < n && s[i] != '"')
            i += s[i] == '\\' ? 2 : 1;
        if (i >= n)
            return 0;
        size_t len = i++ - first;
        size_t colon = skip_json_space(s, n, i);
        if (len != 4 || memcmp(s + first, "kind", 4) != 0 || colon >= n || s[colon] != ':')
            continue; /* a value, or another key */
        size_t value = skip_json_space(s, n, colon + 1);
        return n - value >= 9 && memcmp(s + value, "\"learned\"", 9) == 0;
    }
    return 0;
}

int tables_describe(const posenc_shm_table *t, uint32_t id, struct buf *json) {
    int rc = json_printf(json, "{\"id\":%u,\"name\":", id);
    rc |= json_string(json, t->name, strlen(t->name));
    rc |= json_printf(json,
                      ",\"generation\":%llu,\"dtype\":\"%s\",\"computed\":%s,\"rows\":%llu,\"width\":%llu,"
                      "\"start\":%lld,\"stop\":%lld,\"spec_hash\":",
                      (unsigned long long)t->generation, tables_wire_dtype(t) == POSENC_DTYPE_FLOAT64 ? "float64"
                                                                                             : "float32",
                      t->dtype == POSENC_SHM_SPEC ? "true" : "false",
                      (unsigned long long)t->rows, (unsigned long long)t->width, (long long)t->start,
                      (long long)t->stop);
    rc |= json_string(json, t->spec_hash, strlen(t->spec_hash));
    rc |= json_printf(json, ",\"created_ns\":%lld,\"writer_pid\":%u,\"spec\":", (long long)t->created_ns,
                      t->writer_pid);
    /* canonical JSON written by the store; the header CRC covers it */
    rc |= buf_append(json, t->spec_json, t->spec_json_len, JSON_LIMIT);
    rc |= json_printf(json, "}");
    return rc ? -1 : 0;
}

/* The table name in a segment file name "posenc.<name>.<generation>", or 0. */
static int segment_name(const char *file, char name[POSENC_SHM_NAME_MAX + 1]) {
    if (strncmp(file, "posenc.", 7) != 0)
        return 0;
    const char *rest = file + 7, *dot = strrchr(rest, '.');
    if (!dot || dot == rest || (size_t)(dot - rest) > POSENC_SHM_NAME_MAX || dot[1] < '1' || dot[1] > '9')
        return 0;
    for (const char *p = dot + 1; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    memcpy(name, rest, (size_t)(dot - rest));
    name[dot - rest] = 0;
    return posenc_shm_valid_name(name);
}

static int compare_names(const void *a, const void *b) { return strcmp(a, b); }

int tables_list(struct table_names *names, struct table_cache *cache, const char *dir, struct buf *json,
                char *err, size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "shm_dir: cannot list %s: %s", dir, strerror(errno));
        return POSENC_STATUS_TABLE_UNAVAILABLE;
    }
    typedef char name_t[POSENC_SHM_NAME_MAX + 1];
    name_t *found = malloc(TABLE_IDS_MAX * sizeof *found);
    size_t n = 0;
    struct dirent *e;
    while (found && n < TABLE_IDS_MAX && (e = readdir(d)) != NULL)
        n += segment_name(e->d_name, found[n]);
    closedir(d);
    if (!found) {
        snprintf(err, errlen, "shm_dir: out of memory");
        return POSENC_STATUS_INTERNAL;
    }
    qsort(found, n, sizeof *found, compare_names);
    int rc = json_printf(json, "[");
    int first = 1;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (i > 0 && strcmp(found[i], found[i - 1]) == 0)
            continue; /* an older generation not yet unlinked */
        uint32_t id;
        const posenc_shm_table *t;
        char why[256];
        int status = tables_resolve(names, cache, dir, found[i], &id, &t, why, sizeof why);
        if (status == POSENC_STATUS_UNKNOWN_TABLE)
            continue; /* still being built, or removed while we looked */
        rc |= json_printf(json, first ? "" : ",");
        first = 0;
        if (status == 0) {
            rc |= tables_describe(t, id, json);
        } else {
            rc |= json_printf(json, "{\"name\":");
            rc |= json_string(json, found[i], strlen(found[i]));
            rc |= json_printf(json, ",\"error\":");
            rc |= json_string(json, why, strlen(why));
            rc |= json_printf(json, "}");
        }
    }
    free(found);
    rc |= json_printf(json, "]");
    if (rc) {
        snprintf(err, errlen, "tables: the listing is over %u bytes", JSON_LIMIT);
        return POSENC_STATUS_INTERNAL;
    }
    return 0;
}

void tables_release(struct table_cache *cache) {
    for (uint32_t id = 0; id <= TABLE_IDS_MAX; id++) {
        if (cache->by_id[id]) {
            served_detach(cache->by_id[id]);
            free(cache->by_id[id]);
            cache->by_id[id] = NULL;
        }
    }
}
