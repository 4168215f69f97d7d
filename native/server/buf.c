#include "buf.h"

#include <stdlib.h>
#include <string.h>

int buf_reserve(struct buf *b, size_t extra, size_t limit) {
    if (b->cap - b->len >= extra)
        return 0;
    if (b->pos > 0) { /* slide the unconsumed bytes to the front before growing */
        memmove(b->data, b->data + b->pos, b->len - b->pos);
        b->len -= b->pos;
        b->pos = 0;
        if (b->cap - b->len >= extra)
            return 0;
    }
    size_t need = b->len + extra;
    if (need < b->len || need > limit)
        return -1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < need)
        cap = cap > limit / 2 ? limit : cap * 2;
    uint8_t *data = realloc(b->data, cap);
    if (!data)
        return -1;
    b->data = data;
    b->cap = cap;
    return 0;
}

void buf_settle(struct buf *b, size_t keep_cap) {
    if (b->pos < b->len)
        return;
    b->pos = b->len = 0;
    if (b->cap > keep_cap) {
        free(b->data);
        b->data = NULL;
        b->cap = 0;
    }
}

void buf_free(struct buf *b) {
    free(b->data);
    b->data = NULL;
    b->pos = b->len = b->cap = 0;
}

int buf_append(struct buf *b, const void *src, size_t n, size_t limit) {
    if (buf_reserve(b, n, limit) != 0)
        return -1;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}
