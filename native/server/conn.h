/* A connection's request stream, without sockets: frames in `in` become replies in `out`.
 * The event loop calls this after every read; the fuzz harness calls it on arbitrary bytes. */
#ifndef POSENC_SERVER_CONN_H
#define POSENC_SERVER_CONN_H

#include "server.h"

enum process_result {
    PROCESS_IDLE,   /* every complete frame is answered (a partial one may wait in `in`) */
    PROCESS_PAUSED, /* stopped at OUT_HIGH_WATERMARK with complete frames left */
    PROCESS_CLOSED  /* a frame-level error: the connection is CONN_CLOSING */
};

enum process_result conn_process(struct worker *w, struct conn *c);

/* conn_process for an event loop: once the peer has finished sending (INPUT_EOF) and every
 * complete frame is answered, say what arrived unanswered (a partial frame) and start closing. */
enum process_result conn_answer(struct worker *w, struct conn *c);

/* Reply bytes not yet sent: queued in `out` and handed to a send in progress. */
static inline size_t conn_unsent(const struct conn *c) { return buf_pending(&c->out) + c->out_sending; }

/* Input buffer bound: one frame of max_frame bytes plus what a read may bring in after it. */
size_t conn_in_limit(const struct server_config *cfg);

#endif
