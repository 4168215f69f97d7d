#include "handlers.h"

#include <string.h>

#include "convert.h"
#include "inline_spec.h"
#include "json.h"
#include "positions.h"
#include "reply.h"
#include "stats.h"

static const char *const OPCODE_NAMES[POSENC_OP_MAX + 1] = {
    [POSENC_OP_PING] = "PING", [POSENC_OP_STATS] = "STATS", [POSENC_OP_LIST_TABLES] = "LIST_TABLES",
    [POSENC_OP_RESOLVE] = "RESOLVE", [POSENC_OP_ENCODE_TABLE] = "ENCODE_TABLE",
    [POSENC_OP_ENCODE_SPEC] = "ENCODE_SPEC",
};

/* Header fields an operation does not use must be zero, so a client bug is not silently
 * ignored (docs/protocol.md, "Fields an operation does not use"). */
enum field_use { USES_AUX = 1, USES_POSITIONS = 2, USES_DTYPE = 4, USES_TABLE_ID = 8 };

static int unused_fields_zero(struct worker *w, struct conn *c, const struct posenc_request_header *h,
                              unsigned uses) {
    uint32_t unused = ((uses & USES_POSITIONS) ? 0 : h->count | h->position_kind) | ((uses & USES_AUX) ? 0 : h->aux_len) |
                      ((uses & USES_DTYPE) ? 0 : h->dtype) | ((uses & USES_TABLE_ID) ? 0 : h->table_id);
    if (unused == 0)
        return 1; /* the common case: one test per request */
    const struct {
        unsigned use;
        const char *name;
        uint32_t value;
    } fields[] = {
        {USES_POSITIONS, "count", h->count},
        {USES_AUX, "aux_len", h->aux_len},
        {USES_DTYPE, "dtype", h->dtype},
        {USES_POSITIONS, "position_kind", h->position_kind},
        {USES_TABLE_ID, "table_id", h->table_id},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (!(uses & fields[i].use) && fields[i].value) {
            reply_fail(w, c, h, POSENC_STATUS_BAD_ARGUMENT, "%s: must be 0 for %s, got %u", fields[i].name,
                       OPCODE_NAMES[h->opcode], fields[i].value);
            return 0;
        }
    }
    return 1;
}

/* dtype, position kind, count and output size of an encode request; 0 = rejected. */
static int encode_args_ok(struct worker *w, struct conn *c, const struct posenc_request_header *h,
                          uint64_t width) {
    const struct server_config *cfg = &w->srv->cfg;
    if (h->dtype > POSENC_DTYPE_MAX) {
        reply_fail(w, c, h, POSENC_STATUS_BAD_ARGUMENT,
                   "dtype: %u is not a dtype (0 float32, 1 float16, 2 bfloat16, 3 float64)", h->dtype);
        return 0;
    }
    if (h->position_kind > POSENC_POSITIONS_MAX) {
        reply_fail(w, c, h, POSENC_STATUS_BAD_ARGUMENT, "position_kind: %u is not 0 (int64) or 1 (float64)",
                   h->position_kind);
        return 0;
    }
    if (h->count > cfg->max_positions) {
        reply_fail(w, c, h, POSENC_STATUS_TOO_MANY_POSITIONS, "count: %u positions, over the limit of %u "
                   "(--max-positions)", h->count, cfg->max_positions);
        return 0;
    }
    uint64_t bytes = (uint64_t)h->count * width * posenc_dtype_size(h->dtype);
    if (bytes > cfg->max_response) {
        reply_fail(w, c, h, POSENC_STATUS_OUTPUT_TOO_LARGE, "count: %u rows of width %llu would be %llu bytes, "
                   "over the limit of %llu (--max-response-bytes)", h->count, (unsigned long long)width,
                   (unsigned long long)bytes, (unsigned long long)cfg->max_response);
        return 0;
    }
    return 1;
}

/* Scratch room for n 8-byte values (row indices or float64 positions). */
static void *scratch_values(struct worker *w, uint32_t n) {
    w->values.pos = w->values.len = 0;
    return buf_reserve(&w->values, 8 * (size_t)n + 8, SIZE_MAX) == 0 ? w->values.data : NULL;
}

static void reply_json(struct worker *w, struct conn *c, const struct posenc_request_header *h, uint32_t table_id,
                       uint32_t rows, uint32_t width, uint8_t dtype) {
    reply_aux(w, c, h, w->json.data, w->json.len, table_id, rows, width, dtype);
}

static void handle_stats(struct worker *w, struct conn *c, const struct posenc_request_header *h) {
    w->json.pos = w->json.len = 0;
    if (stats_json(w->srv, &w->json) != 0) {
        reply_fail(w, c, h, POSENC_STATUS_INTERNAL, "stats: out of memory");
        return;
    }
    reply_json(w, c, h, 0, 0, 0, 0);
}

static void handle_list(struct worker *w, struct conn *c, const struct posenc_request_header *h) {
    char err[256];
    w->json.pos = w->json.len = 0;
    int status = tables_list(&w->srv->names, &w->tables, w->srv->cfg.shm_dir, &w->json, err, sizeof err);
    if (status) {
        reply_fail(w, c, h, status, "%s", err);
        return;
    }
    reply_json(w, c, h, 0, 0, 0, 0);
}

static void handle_resolve(struct worker *w, struct conn *c, const struct posenc_request_header *h,
                           const uint8_t *aux) {
    char name[POSENC_SHM_NAME_MAX + 1], err[256];
    if (h->aux_len < 1 || h->aux_len > POSENC_SHM_NAME_MAX || memchr(aux, 0, h->aux_len)) {
        reply_fail(w, c, h, POSENC_STATUS_BAD_ARGUMENT, "name: must be 1..%d characters (aux_len %u)",
                   POSENC_SHM_NAME_MAX, h->aux_len);
        return;
    }
    memcpy(name, aux, h->aux_len);
    name[h->aux_len] = 0;
    uint32_t id;
    const posenc_shm_table *t;
    int status = tables_resolve(&w->srv->names, &w->tables, w->srv->cfg.shm_dir, name, &id, &t, err, sizeof err);
    if (status) {
        reply_fail(w, c, h, status, "%s", err);
        return;
    }
    w->json.pos = w->json.len = 0;
    if (tables_describe(t, id, &w->json) != 0) {
        reply_fail(w, c, h, POSENC_STATUS_INTERNAL, "name: out of memory");
        return;
    }
    reply_json(w, c, h, id, 0, (uint32_t)t->width, tables_wire_dtype(t)); /* rows: none follow */
}

/* The rows of an inline spec (ENCODE_SPEC), or of a named computed table `t` (ENCODE_TABLE: its
 * positions must also lie in [start, stop), and `offset` is added to each before the sin/cos). */
static void encode_computed(struct worker *w, struct conn *c, const struct posenc_request_header *h,
                            const struct inline_spec *spec, const uint8_t *positions, const posenc_shm_table *t,
                            double offset, posenc_sincos_plan *plan) {
    char err[256];
    double *values = scratch_values(w, h->count);
    if (!values) {
        reply_fail(w, c, h, POSENC_STATUS_INTERNAL, "count: no memory for %u positions", h->count);
        return;
    }
    int status = positions_to_f64(positions, h->count, h->position_kind, w->srv->cfg.max_abs_position, values, err,
                                  sizeof err);
    if (status == 0 && t)
        status = positions_in_table(values, h->count, t->start, t->stop, offset, w->srv->cfg.max_abs_position, err,
                                    sizeof err);
    if (status == 0)
        status = inline_spec_check_range(spec, values, h->count, h->dtype, err, sizeof err);
    if (status) {
        reply_fail(w, c, h, status, "%s", err);
        return;
    }
    size_t body = (size_t)h->count * spec->p.row_width * posenc_dtype_size(h->dtype);
    uint8_t *at = reply_reserve(w, c, body);
    if (!at || inline_spec_rows(spec, values, h->count, h->dtype, at + POSENC_HEADER_SIZE, &w->rows, plan) != 0) {
        reply_fail(w, c, h, POSENC_STATUS_INTERNAL, "count: no memory to compute %u rows", h->count);
        return;
    }
    counter_add(&w->counters.positions, h->count);
    reply_commit(w, c, at, h, h->dtype, h->count, spec->p.row_width, 0, h->table_id, body);
}

static void handle_encode_table(struct worker *w, struct conn *c, const struct posenc_request_header *h,
                                const uint8_t *positions) {
    char err[256];
    const posenc_shm_table *t;
    int status = tables_get(&w->srv->names, &w->tables, w->srv->cfg.shm_dir, h->table_id, &t, err, sizeof err);
    if (status) {
        reply_fail(w, c, h, status, "%s", err);
        return;
    }
    if (!encode_args_ok(w, c, h, t->width))
        return;
    if (t->dtype == POSENC_SHM_SPEC) {
        const struct served_table *s = tables_served(t);
        encode_computed(w, c, h, &s->spec, positions, t, s->position_offset, s->plan);
        return;
    }
    if (t->dtype == POSENC_SHM_FLOAT32 && (h->dtype == POSENC_DTYPE_FLOAT16 || h->dtype == POSENC_DTYPE_BFLOAT16) &&
        !tables_is_learned(t)) {
        /* Computed rows stored in float32 carry one rounding already: where a value sits exactly on a
         * 16-bit midpoint, the stored bits cannot say which way the exact value lies, and the server
         * has no kernels for the spec to recompute it (HTTP does). Refused for every request, not only
         * those that hit a midpoint, so that a client does not fail at a rare position in production.
         * A learned table's float32 values are the weights themselves: one cast is one rounding. */
        reply_fail(w, c, h, POSENC_STATUS_BAD_ARGUMENT,
                   "dtype: %s rows from a computed float32 table would be rounded twice; ask float32, "
                   "publish the table in float64, use ENCODE_SPEC, or ask HTTP (it recomputes the rows "
                   "on a 16-bit midpoint)", h->dtype == POSENC_DTYPE_FLOAT16 ? "float16" : "bfloat16");
        return;
    }
    int64_t *rows = scratch_values(w, h->count);
    if (!rows) {
        reply_fail(w, c, h, POSENC_STATUS_INTERNAL, "count: no memory for %u positions", h->count);
        return;
    }
    status = positions_to_rows(positions, h->count, h->position_kind, t->start, (int64_t)t->rows, rows, err,
                               sizeof err);
    if (status) {
        reply_fail(w, c, h, status, "%s", err);
        return;
    }
    size_t out_row = t->width * posenc_dtype_size(h->dtype), body = h->count * out_row;
    uint8_t *at = reply_reserve(w, c, body);
    if (!at) {
        reply_fail(w, c, h, POSENC_STATUS_INTERNAL, "count: no memory for a %zu-byte reply", body);
        return;
    }
    uint8_t *dst = at + POSENC_HEADER_SIZE;
    int same = h->dtype == tables_wire_dtype(t);
    for (uint32_t k = 0; k < h->count; k++) {
        const uint8_t *row = t->data + (size_t)rows[k] * t->row_bytes;
        if (same)
            memcpy(dst + k * out_row, row, out_row);
        else
            convert_values(row, t->dtype == POSENC_SHM_FLOAT64, dst + k * out_row, h->dtype, t->width);
    }
    counter_add(&w->counters.positions, h->count);
    reply_commit(w, c, at, h, h->dtype, h->count, (uint32_t)t->width, 0, h->table_id, body);
}

static void handle_encode_spec(struct worker *w, struct conn *c, const struct posenc_request_header *h,
                               const uint8_t *aux, const uint8_t *positions) {
    char err[256];
    struct inline_spec spec;
    int status = inline_spec_parse(aux, h->aux_len, w->srv->cfg.max_dim, &spec, err, sizeof err);
    if (status) {
        reply_fail(w, c, h, status, "%s", err);
        return;
    }
    if (encode_args_ok(w, c, h, spec.p.row_width))
        encode_computed(w, c, h, &spec, positions, NULL, 0.0, NULL);
}

/* Frames looked at and rows prefetched per read at most, and cache lines per row: enough to
 * cover a pipelined batch without evicting what the first rows brought in. */
#define PREFETCH_FRAMES 256
#define PREFETCH_ROWS 64
#define PREFETCH_LINES_PER_ROW 16

void prefetch_table_rows(struct worker *w, const uint8_t *p, size_t avail) {
    unsigned budget = PREFETCH_ROWS;
    for (unsigned frames = 0; avail >= POSENC_HEADER_SIZE && budget && frames < PREFETCH_FRAMES; frames++) {
        uint32_t length = posenc_load_u32(p);
        if (length < POSENC_HEADER_SIZE || length > avail)
            return;
        struct posenc_request_header h;
        posenc_request_decode(p, &h);
        const struct served_table *s = h.table_id <= TABLE_IDS_MAX ? w->tables.by_id[h.table_id] : NULL;
        const posenc_shm_table *t = s ? &s->shm : NULL;
        if (h.opcode == POSENC_OP_ENCODE_TABLE && h.position_kind == POSENC_POSITIONS_INT64 && t && t->base &&
            t->row_bytes &&
            (uint64_t)POSENC_HEADER_SIZE + h.aux_len + 8 * (uint64_t)h.count == length) {
            const uint8_t *positions = p + POSENC_HEADER_SIZE + h.aux_len;
            for (uint32_t k = 0; k < h.count && budget; k++, budget--) {
                uint64_t row = (uint64_t)posenc_load_u64(positions + 8 * (size_t)k) - (uint64_t)t->start;
                if (row >= t->rows)
                    continue;
                const uint8_t *at = t->data + row * t->row_bytes;
                for (size_t line = 0; line < t->row_bytes && line < 64 * PREFETCH_LINES_PER_ROW; line += 64)
                    __builtin_prefetch(at + line);
            }
        }
        p += length;
        avail -= length;
    }
}

void handle_request(struct worker *w, struct conn *c, const struct posenc_request_header *h, const uint8_t *aux,
                    const uint8_t *positions) {
    counter_add(&w->counters.requests[h->opcode], 1);
    switch (h->opcode) {
    case POSENC_OP_PING:
        if (unused_fields_zero(w, c, h, USES_AUX))
            reply_aux(w, c, h, aux, h->aux_len, 0, 0, 0, 0);
        break;
    case POSENC_OP_STATS:
        if (unused_fields_zero(w, c, h, 0))
            handle_stats(w, c, h);
        break;
    case POSENC_OP_LIST_TABLES:
        if (unused_fields_zero(w, c, h, 0))
            handle_list(w, c, h);
        break;
    case POSENC_OP_RESOLVE:
        if (unused_fields_zero(w, c, h, USES_AUX))
            handle_resolve(w, c, h, aux);
        break;
    case POSENC_OP_ENCODE_TABLE:
        if (unused_fields_zero(w, c, h, USES_POSITIONS | USES_DTYPE | USES_TABLE_ID))
            handle_encode_table(w, c, h, positions);
        break;
    case POSENC_OP_ENCODE_SPEC:
        if (unused_fields_zero(w, c, h, USES_AUX | USES_POSITIONS | USES_DTYPE))
            handle_encode_spec(w, c, h, aux, positions);
        break;
    }
}
