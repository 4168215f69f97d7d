#include "conn.h"

#include "frame.h"
#include "handlers.h"
#include "reply.h"

size_t conn_in_limit(const struct server_config *cfg) { return (size_t)cfg->max_frame + 4 * READ_CHUNK; }

size_t conn_out_limit(const struct server_config *cfg) {
    return OUT_HIGH_WATERMARK + (size_t)cfg->max_response + POSENC_HEADER_SIZE + (4u << 20);
}

enum process_result conn_process(struct worker *w, struct conn *c) {
    const uint32_t max_frame = w->srv->cfg.max_frame;
    prefetch_table_rows(w, c->in.data + c->in.pos, buf_pending(&c->in));
    while (c->state == CONN_OPEN) {
        if (conn_unsent(c) >= OUT_HIGH_WATERMARK)
            return PROCESS_PAUSED;
        if (buf_pending(&c->in) == 0) {
            c->need = POSENC_HEADER_SIZE;
            return PROCESS_IDLE;
        }
        const uint8_t *p = c->in.data + c->in.pos;
        struct posenc_request_header h;
        struct frame_error err;
        switch (frame_parse(p, buf_pending(&c->in), max_frame, &h, &c->need, &err)) {
        case FRAME_NEED_MORE:
            return PROCESS_IDLE;
        case FRAME_FATAL:
            reply_error(w, c, 0, 0, err.status, "%s", err.message);
            c->in.pos = c->in.len; /* nothing after a bad frame can be trusted */
            return PROCESS_CLOSED;
        case FRAME_READY:
            handle_request(w, c, &h, p + POSENC_HEADER_SIZE, p + POSENC_HEADER_SIZE + h.aux_len);
            c->in.pos += h.length;
            c->need = POSENC_HEADER_SIZE;
            break;
        }
    }
    return PROCESS_CLOSED;
}

enum process_result conn_answer(struct worker *w, struct conn *c) {
    enum process_result r = conn_process(w, c);
    if (r == PROCESS_IDLE && c->final_input == INPUT_EOF) { /* everything that arrived is answered */
        size_t partial = buf_pending(&c->in);
        if (partial) {
            char what[160];
            frame_describe_unanswered(c->in.data + c->in.pos, partial, what, sizeof what);
            reply_error(w, c, 0, 0, POSENC_STATUS_BAD_FRAME, "length: the stream ended after %s", what);
        }
        c->state = CONN_CLOSING;
    }
    return r;
}
