#include "reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

uint8_t *reply_reserve(struct worker *w, struct conn *c, size_t body) {
    if (buf_reserve(&c->out, POSENC_HEADER_SIZE + body, conn_out_limit(&w->srv->cfg)) != 0)
        return NULL;
    return c->out.data + c->out.len;
}

static void queue(struct worker *w, struct conn *c, uint8_t *at, const struct posenc_response_header *h) {
    posenc_response_encode(at, h);
    c->out.len += h->length;
    counter_add(&w->counters.bytes_out, h->length);
}

void reply_commit(struct worker *w, struct conn *c, uint8_t *at, const struct posenc_request_header *req,
                  uint8_t dtype, uint32_t rows, uint32_t width, uint32_t aux_len, uint32_t table_id,
                  size_t body) {
    struct posenc_response_header h = {
        .length = (uint32_t)(POSENC_HEADER_SIZE + body),
        .version = POSENC_PROTO_VERSION,
        .opcode = req->opcode,
        .status = POSENC_STATUS_OK,
        .dtype = dtype,
        .request_id = req->request_id,
        .rows = rows,
        .width = width,
        .aux_len = aux_len,
        .table_id = table_id,
    };
    queue(w, c, at, &h);
}

void reply_aux(struct worker *w, struct conn *c, const struct posenc_request_header *req, const void *aux,
               size_t aux_len, uint32_t table_id, uint32_t rows, uint32_t width, uint8_t dtype) {
    uint8_t *at = reply_reserve(w, c, aux_len);
    if (!at) {
        reply_fail(w, c, req, POSENC_STATUS_INTERNAL, "reply: %zu bytes do not fit in memory", aux_len);
        return;
    }
    memcpy(at + POSENC_HEADER_SIZE, aux, aux_len);
    reply_commit(w, c, at, req, dtype, rows, width, (uint32_t)aux_len, table_id, aux_len);
}

size_t error_frame(uint8_t *dst, uint8_t opcode, uint64_t request_id, uint8_t status, const char *text,
                   size_t len) {
    struct posenc_response_header h = {
        .length = (uint32_t)(POSENC_HEADER_SIZE + len),
        .version = POSENC_PROTO_VERSION,
        .opcode = opcode,
        .status = status,
        .request_id = request_id,
        .aux_len = (uint32_t)len,
    };
    posenc_response_encode(dst, &h);
    memcpy(dst + POSENC_HEADER_SIZE, text, len);
    return POSENC_HEADER_SIZE + len;
}

void reply_error(struct worker *w, struct conn *c, uint8_t opcode, uint64_t request_id, uint8_t status,
                 const char *fmt, ...) {
    char text[ERROR_TEXT_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n >= sizeof text ? sizeof text - 1 : (size_t)n;
    counter_add(&w->counters.errors[status], 1);
    if (posenc_status_closes(status))
        c->state = CONN_CLOSING;
    uint8_t *at = reply_reserve(w, c, len);
    if (!at) { /* cannot even say why: drop the connection */
        c->state = CONN_CLOSING;
        return;
    }
    size_t size = error_frame(at, opcode, request_id, status, text, len);
    c->out.len += size;
    counter_add(&w->counters.bytes_out, size);
}
