/* Frame boundaries and the checks that decide whether a stream can still be trusted.
 * Pure functions over a byte range: the event loop and the fuzz harness share them. */
#ifndef POSENC_SERVER_FRAME_H
#define POSENC_SERVER_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "posenc_proto.h"

enum frame_result {
    FRAME_NEED_MORE, /* *need = bytes the frame (or its header) needs in total */
    FRAME_READY,     /* a whole, well-formed frame of h->length bytes is available */
    FRAME_FATAL      /* the stream is unusable: reply with err and close */
};

/* A frame-level error: its reply echoes no opcode or request_id (both 0), since the bytes are
 * not a request, and so never depends on how much of the header had arrived. */
struct frame_error {
    uint8_t status;  /* POSENC_STATUS_* that closes the connection */
    char message[160];
};

/* Look at the bytes at the front of a connection's input. A length over max_frame, a bad
 * version or an unknown opcode is reported as soon as those bytes arrive, without waiting
 * for the rest of the frame. */
enum frame_result frame_parse(const uint8_t *p, size_t avail, uint32_t max_frame,
                              struct posenc_request_header *h, size_t *need, struct frame_error *err);

/* Describe bytes that were received but will not be answered (at EOF, at shutdown, at the
 * idle timeout): how many whole frames they hold and how far the last one got, e.g.
 * "2 whole requests and 20 of the 1056 bytes of a frame". Returns the text length. */
size_t frame_describe_unanswered(const uint8_t *p, size_t avail, char *text, size_t cap);

#endif
