/* Fuzz target: arbitrary bytes as one connection's input stream, fed in chunks to the same
 * conn_process the event loop runs (frame parser, every handler, replies). After each chunk
 * every reply the server queued must be a well-formed frame. Sanitizers catch the rest.
 *
 * Input: byte 0 picks the chunk size (1..64 bytes, or whole when 0), the rest is the stream.
 * POSENC_FUZZ_SHM_DIR names a table store holding a table "fuzz" (table id 1) and a computed one,
 * "fuzz-any" (table id 2), so ENCODE_TABLE reaches real rows and computed ones; without it, table
 * requests exercise the unknown-table paths. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "conn.h"
#include "loop.h"
#include "posenc_proto.h"
#include "server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct server srv;
static struct worker w;

static void setup(void) {
    static char *argv[] = {"posenc-fuzz", "--max-frame-bytes", "65536", "--max-positions", "512",
                           "--max-response-bytes", "1048576", "--max-dim", "1024", NULL};
    config_parse(&srv.cfg, 9, argv);
    const char *dir = getenv("POSENC_FUZZ_SHM_DIR");
    if (dir)
        snprintf(srv.cfg.shm_dir, sizeof srv.cfg.shm_dir, "%s", dir);
    table_names_init(&srv.names, srv.cfg.max_table_ids, srv.cfg.max_dim);
    srv.loop = &loop_epoll; /* what STATS names; no loop runs here */
    srv.n_workers = 1;
    srv.workers = &w;
    w.srv = &srv;
    uint32_t id;
    const posenc_shm_table *t;
    char err[256];
    tables_resolve(&srv.names, &w.tables, srv.cfg.shm_dir, "fuzz", &id, &t, err, sizeof err);
    tables_resolve(&srv.names, &w.tables, srv.cfg.shm_dir, "fuzz-any", &id, &t, err, sizeof err);
}

/* Every queued reply is a complete frame with a consistent header. */
static void check_replies(const struct buf *out) {
    size_t at = out->pos;
    while (at < out->len) {
        assert(out->len - at >= POSENC_HEADER_SIZE);
        struct posenc_response_header h;
        posenc_response_decode(out->data + at, &h);
        assert(h.version == POSENC_PROTO_VERSION && h.length >= POSENC_HEADER_SIZE);
        assert(h.length <= out->len - at && h.aux_len <= h.length - POSENC_HEADER_SIZE);
        uint64_t rows_bytes = (uint64_t)h.rows * h.width * posenc_dtype_size(h.dtype);
        if (h.status == POSENC_STATUS_OK)
            assert(h.length == POSENC_HEADER_SIZE + h.aux_len + rows_bytes);
        else
            assert(h.status <= POSENC_STATUS_MAX && h.rows == 0 && h.aux_len > 0);
        at += h.length;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!w.srv)
        setup();
    if (size < 1)
        return 0;
    size_t chunk = data[0] % 65 ? data[0] % 65 : size;
    struct conn c;
    memset(&c, 0, sizeof c);
    c.need = POSENC_HEADER_SIZE;
    for (size_t at = 1; at < size && c.state == CONN_OPEN; at += chunk) {
        size_t n = size - at < chunk ? size - at : chunk;
        if (buf_append(&c.in, data + at, n, conn_in_limit(&srv.cfg)) != 0)
            break;
        conn_process(&w, &c);
        check_replies(&c.out);
        c.out.pos = c.out.len;
        buf_settle(&c.out, 0);
        buf_settle(&c.in, 0);
    }
    buf_free(&c.in);
    buf_free(&c.out);
    return 0;
}
