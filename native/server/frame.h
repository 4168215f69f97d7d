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

struct frame_error {
    uint8_t status;  /* POSENC_STATUS_* that closes the connection */
    uint8_t opcode;  /* the request's opcode when it was readable, else 0 */
    uint64_t request_id; /* when it was readable, else 0 */
    char message[160];
};

/* Look at the bytes at the front of a connection's input. A length over max_frame, a bad
 * version or an unknown opcode is reported as soon as those bytes arrive, without waiting
 * for the rest of the frame. */
enum frame_result frame_parse(const uint8_t *p, size_t avail, uint32_t max_frame,
                              struct posenc_request_header *h, size_t *need, struct frame_error *err);

#endif
