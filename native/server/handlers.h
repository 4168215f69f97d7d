/* One function per opcode: check the request's fields, answer it into the connection's
 * output. Frame-level checks (length, version, opcode) were done by frame_parse. */
#ifndef POSENC_SERVER_HANDLERS_H
#define POSENC_SERVER_HANDLERS_H

#include <stdint.h>

#include "posenc_proto.h"
#include "server.h"

/* aux points at h->aux_len bytes, positions at 8*h->count bytes (both inside the frame). */
void handle_request(struct worker *w, struct conn *c, const struct posenc_request_header *h, const uint8_t *aux,
                    const uint8_t *positions);

/* Before answering the frames of one read: start loading the table rows their ENCODE_TABLE
 * requests will copy, so that the cache misses of a pipelined batch overlap instead of
 * stalling one request after another (random rows of a large table are DRAM misses). Only
 * looks: frames and positions are checked when they are answered. */
void prefetch_table_rows(struct worker *w, const uint8_t *p, size_t avail);

#endif
