/* Appending JSON text to a buffer (STATS, LIST_TABLES, RESOLVE). */
#ifndef POSENC_SERVER_JSON_H
#define POSENC_SERVER_JSON_H

#include <stddef.h>

#include "buf.h"

/* Largest JSON reply body. */
#define JSON_LIMIT (4u << 20)

/* printf-style append; returns -1 (and leaves a truncated but unused buffer) on overflow. */
int json_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A quoted, escaped JSON string of n bytes. */
int json_string(struct buf *b, const char *s, size_t n);

#endif
