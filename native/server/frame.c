#include "frame.h"

#include <stdio.h>

static enum frame_result fatal(struct frame_error *err, uint8_t status, const char *message) {
    err->status = status;
    snprintf(err->message, sizeof err->message, "%s", message);
    return FRAME_FATAL;
}

enum frame_result frame_parse(const uint8_t *p, size_t avail, uint32_t max_frame,
                              struct posenc_request_header *h, size_t *need, struct frame_error *err) {
    char msg[sizeof err->message];
    *need = POSENC_HEADER_SIZE;
    if (avail < 4)
        return FRAME_NEED_MORE;
    uint32_t length = posenc_load_u32(p);
    if (length < POSENC_HEADER_SIZE) {
        snprintf(msg, sizeof msg, "length: %u is shorter than the %d-byte header", length, POSENC_HEADER_SIZE);
        return fatal(err, POSENC_STATUS_BAD_FRAME, msg);
    }
    if (length > max_frame) {
        snprintf(msg, sizeof msg, "length: %u is over the limit of %u bytes (--max-frame-bytes)", length,
                 max_frame);
        return fatal(err, POSENC_STATUS_FRAME_TOO_LARGE, msg);
    }
    if (avail >= 5 && p[4] != POSENC_PROTO_VERSION) {
        snprintf(msg, sizeof msg, "version: %u is not supported (this server speaks %d)", p[4],
                 POSENC_PROTO_VERSION);
        return fatal(err, POSENC_STATUS_BAD_VERSION, msg);
    }
    if (avail >= 6 && (p[5] == 0 || p[5] > POSENC_OP_MAX)) {
        snprintf(msg, sizeof msg, "opcode: %u is not an operation (1..%d)", p[5], POSENC_OP_MAX);
        return fatal(err, POSENC_STATUS_UNKNOWN_OPCODE, msg);
    }
    if (avail < POSENC_HEADER_SIZE)
        return FRAME_NEED_MORE;
    posenc_request_decode(p, h);
    if (h->reserved != 0) {
        snprintf(msg, sizeof msg, "reserved: must be 0, got %u", h->reserved);
        return fatal(err, POSENC_STATUS_BAD_FRAME, msg);
    }
    uint64_t expected = (uint64_t)POSENC_HEADER_SIZE + h->aux_len + 8 * (uint64_t)h->count;
    if (expected != length) {
        snprintf(msg, sizeof msg, "length: %u does not match 32 + aux_len %u + 8 * count %u", length,
                 h->aux_len, h->count);
        return fatal(err, POSENC_STATUS_BAD_FRAME, msg);
    }
    *need = length;
    return avail >= length ? FRAME_READY : FRAME_NEED_MORE;
}

size_t frame_describe_unanswered(const uint8_t *p, size_t avail, char *text, size_t cap) {
    size_t whole = 0;
    while (avail >= POSENC_HEADER_SIZE) {
        uint32_t length = posenc_load_u32(p);
        if (length < POSENC_HEADER_SIZE || length > avail)
            break;
        whole++;
        p += length;
        avail -= length;
    }
    int n;
    const char *sep = whole && avail ? " and " : "";
    char part[96] = "";
    if (avail >= 4)
        snprintf(part, sizeof part, "%zu of the %u bytes of a frame", avail, posenc_load_u32(p));
    else if (avail)
        snprintf(part, sizeof part, "%zu byte%s of a frame header", avail, avail == 1 ? "" : "s");
    if (whole)
        n = snprintf(text, cap, "%zu whole request%s%s%s", whole, whole == 1 ? "" : "s", sep, part);
    else
        n = snprintf(text, cap, "%s", avail ? part : "nothing");
    return n < 0 ? 0 : (size_t)n >= cap ? cap - 1 : (size_t)n;
}
