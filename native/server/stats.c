#include "stats.h"

#include <stddef.h>
#include <string.h>

#include "json.h"
#include "loop.h"
#include "posenc.h"
#include "version.h"

static const char *const REQUEST_KEYS[POSENC_OP_MAX + 1] = {
    [POSENC_OP_PING] = "ping", [POSENC_OP_STATS] = "stats", [POSENC_OP_LIST_TABLES] = "list_tables",
    [POSENC_OP_RESOLVE] = "resolve", [POSENC_OP_ENCODE_TABLE] = "encode_table",
    [POSENC_OP_ENCODE_SPEC] = "encode_spec",
};

static const char *const ERROR_KEYS[POSENC_STATUS_MAX + 1] = {
    [POSENC_STATUS_BAD_FRAME] = "bad_frame", [POSENC_STATUS_BAD_VERSION] = "bad_version",
    [POSENC_STATUS_UNKNOWN_OPCODE] = "unknown_opcode", [POSENC_STATUS_FRAME_TOO_LARGE] = "frame_too_large",
    [POSENC_STATUS_TOO_MANY_POSITIONS] = "too_many_positions", [POSENC_STATUS_UNKNOWN_TABLE] = "unknown_table",
    [POSENC_STATUS_POSITION_OUT_OF_RANGE] = "position_out_of_range",
    [POSENC_STATUS_BAD_ARGUMENT] = "bad_argument", [POSENC_STATUS_OUTPUT_TOO_LARGE] = "output_too_large",
    [POSENC_STATUS_TOO_MANY_CONNECTIONS] = "too_many_connections",
    [POSENC_STATUS_SHUTTING_DOWN] = "shutting_down", [POSENC_STATUS_TABLE_UNAVAILABLE] = "table_unavailable",
    [POSENC_STATUS_INTERNAL] = "internal", [POSENC_STATUS_IDLE_TIMEOUT] = "idle_timeout",
};

/* Sum of one counter over all threads; `field` is its offset inside struct counters. */
static uint64_t total(struct server *srv, size_t field) {
    uint64_t sum = 0;
    for (int i = 0; i < srv->n_workers; i++)
        sum += counter_get((_Atomic uint64_t *)((char *)&srv->workers[i].counters + field));
    return sum;
}

#define TOTAL(srv, member) total((srv), offsetof(struct counters, member))

static int counter_map(struct server *srv, struct buf *json, const char *name, const char *const *keys, int n,
                       size_t first_field) {
    int rc = json_printf(json, ",\"%s\":{", name);
    for (int i = 1, sep = 0; i < n; i++, sep = 1)
        rc |= json_printf(json, "%s\"%s\":%llu", sep ? "," : "", keys[i],
                          (unsigned long long)total(srv, first_field + (size_t)i * sizeof(_Atomic uint64_t)));
    return rc | json_printf(json, "}");
}

int stats_json(struct server *srv, struct buf *json) {
    const struct server_config *cfg = &srv->cfg;
    const char *isa = posenc_isa();
    int rc = json_printf(json, "{\"server\":\"posenc-server\",\"version\":\"%s\",\"protocol\":%d,\"isa\":",
                         POSENC_SERVER_VERSION, POSENC_PROTO_VERSION);
    rc |= isa ? json_string(json, isa, strlen(isa)) : json_printf(json, "null");
    rc |= json_printf(json, ",\"io\":\"%s\",\"threads\":%d,\"busy_poll_us\":%u,\"uptime_s\":%.3f", srv->loop->name,
                      srv->n_workers,
                      cfg->busy_poll_us, (double)(monotonic_ms() - srv->started_ms) / 1000.0);
    rc |= json_printf(json, ",\"connections\":{\"open\":%u,\"accepted\":%llu,\"rejected\":%llu,\"closed\":%llu,"
                      "\"idle_closed\":%llu}",
                      atomic_load(&srv->connections), (unsigned long long)TOTAL(srv, accepted),
                      (unsigned long long)TOTAL(srv, rejected), (unsigned long long)TOTAL(srv, closed),
                      (unsigned long long)TOTAL(srv, idle_closed));
    uint64_t requests = 0, errors = 0;
    for (int i = 0; i <= POSENC_OP_MAX; i++)
        requests += TOTAL(srv, requests[i]);
    for (int i = 0; i <= POSENC_STATUS_MAX; i++)
        errors += TOTAL(srv, errors[i]);
    rc |= json_printf(json, ",\"requests_total\":%llu,\"errors_total\":%llu,\"positions\":%llu,\"bytes_in\":%llu,"
                      "\"bytes_out\":%llu",
                      (unsigned long long)requests, (unsigned long long)errors,
                      (unsigned long long)TOTAL(srv, positions), (unsigned long long)TOTAL(srv, bytes_in),
                      (unsigned long long)TOTAL(srv, bytes_out));
    rc |= counter_map(srv, json, "requests", REQUEST_KEYS, POSENC_OP_MAX + 1, offsetof(struct counters, requests));
    rc |= counter_map(srv, json, "errors", ERROR_KEYS, POSENC_STATUS_MAX + 1, offsetof(struct counters, errors));
    rc |= json_printf(json, ",\"tables\":{\"ids_given\":%u,\"shm_dir\":", atomic_load(&srv->names.count));
    rc |= json_string(json, cfg->shm_dir, strlen(cfg->shm_dir));
    rc |= json_printf(json, "},\"limits\":{\"max_frame_bytes\":%u,\"max_positions\":%u,\"max_response_bytes\":%llu,"
                      "\"max_connections\":%u,\"idle_timeout_ms\":%u,\"drain_timeout_ms\":%u,\"max_dim\":%u,"
                      "\"max_abs_position\":%llu,\"max_table_ids\":%u}}",
                      cfg->max_frame, cfg->max_positions, (unsigned long long)cfg->max_response,
                      cfg->max_connections, cfg->idle_timeout_ms, cfg->drain_timeout_ms, cfg->max_dim,
                      (unsigned long long)cfg->max_abs_position, cfg->max_table_ids);
    return rc ? -1 : 0;
}
