/* A growable byte buffer with a consumed prefix: connection input (pos = parsed up to) and
 * output (pos = sent up to), and scratch space for JSON replies. */
#ifndef POSENC_SERVER_BUF_H
#define POSENC_SERVER_BUF_H

#include <stddef.h>
#include <stdint.h>

struct buf {
    uint8_t *data;
    size_t len; /* bytes stored */
    size_t pos; /* bytes consumed from the front */
    size_t cap;
};

/* Make room for `extra` more bytes after len (compacting the consumed prefix first);
 * 0 on success, -1 if it would exceed `limit` total capacity or memory is short. */
int buf_reserve(struct buf *b, size_t extra, size_t limit);
/* Bytes stored but not yet consumed. */
static inline size_t buf_pending(const struct buf *b) { return b->len - b->pos; }
/* Forget consumed bytes; return a big, empty buffer's memory (a burst should not pin it). */
void buf_settle(struct buf *b, size_t keep_cap);
void buf_free(struct buf *b);
int buf_append(struct buf *b, const void *src, size_t n, size_t limit);

#endif
