/* Writing reply frames straight into a connection's output buffer. */
#ifndef POSENC_SERVER_REPLY_H
#define POSENC_SERVER_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "posenc_proto.h"
#include "server.h"

/* Room for a reply whose header is followed by `body` bytes; returns where the header goes
 * (the body starts 32 bytes later), or NULL when memory is short (the caller gives up on
 * the connection: reply_error would fail the same way). */
uint8_t *reply_reserve(struct worker *w, struct conn *c, size_t body);
/* Fill in the header at `at` (from reply_reserve) and queue header + body. */
void reply_commit(struct worker *w, struct conn *c, uint8_t *at, const struct posenc_request_header *req,
                  uint8_t dtype, uint32_t rows, uint32_t width, uint32_t aux_len, uint32_t table_id,
                  size_t body);
/* A success reply whose body is exactly `aux` (PING echo, JSON). */
void reply_aux(struct worker *w, struct conn *c, const struct posenc_request_header *req, const void *aux,
               size_t aux_len, uint32_t table_id, uint32_t rows, uint32_t width, uint8_t dtype);
/* Longest error text. */
#define ERROR_TEXT_MAX 256

/* Write an error frame (header + len bytes of text) to dst, which has room; returns its size. */
size_t error_frame(uint8_t *dst, uint8_t opcode, uint64_t request_id, uint8_t status, const char *text,
                   size_t len);
/* An error frame "field: message" for request `req` (opcode/id 0 when NULL). Statuses that
 * close (posenc_status_closes) put the connection in CONN_CLOSING. Always counted. */
void reply_error(struct worker *w, struct conn *c, uint8_t opcode, uint64_t request_id, uint8_t status,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Shorthand for an error about request `req`. */
#define reply_fail(w, c, req, status, ...) \
    reply_error((w), (c), (req)->opcode, (req)->request_id, (status), __VA_ARGS__)

#endif
