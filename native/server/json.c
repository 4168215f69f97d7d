#include "json.h"

#include <stdarg.h>
#include <stdio.h>

int json_printf(struct buf *b, const char *fmt, ...) {
    for (size_t room = 256;; room *= 2) {
        if (buf_reserve(b, room, JSON_LIMIT) != 0)
            return -1;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf((char *)b->data + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0)
            return -1;
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return 0;
        }
        room = (size_t)n + 1;
    }
}

int json_string(struct buf *b, const char *s, size_t n) {
    if (buf_reserve(b, 6 * n + 2, JSON_LIMIT) != 0)
        return -1;
    char *out = (char *)b->data + b->len;
    char *p = out;
    *p++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            *p++ = '\\';
            *p++ = (char)ch;
        } else if (ch < 0x20 || ch >= 0x7f) { /* keep the text ASCII whatever the bytes were */
            p += sprintf(p, "\\u%04x", ch);
        } else {
            *p++ = (char)ch;
        }
    }
    *p++ = '"';
    b->len += (size_t)(p - out);
    return 0;
}
