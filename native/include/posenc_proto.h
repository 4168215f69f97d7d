/* posenc binary protocol, version 1: the wire contract shared by the server, the load
 * generator, the fuzz harness and (mirrored in service/posenc/client/protocol.py, checked by a
 * test) the Python client. docs/protocol.md describes every byte; this header is its C form.
 *
 * Every integer on the wire is little-endian. The encode/decode helpers below go through
 * byte loads and stores, so they are correct on any host and compile to plain moves on x86. */
#ifndef POSENC_PROTO_H
#define POSENC_PROTO_H

#include <stdint.h>
#include <string.h>

#define POSENC_PROTO_VERSION 1
#define POSENC_HEADER_SIZE 32          /* request and response headers are both 32 bytes */
#define POSENC_DEFAULT_PORT 8001          /* [server] binary_port in posenc.config */
#define POSENC_TABLE_NAME_MAX 64        /* table names: 1..64 chars of [A-Za-z0-9_.-] */
#define POSENC_SPEC_PREFIX_SIZE 32      /* fixed part of an ENCODE_SPEC aux block */

enum posenc_opcode {
    POSENC_OP_PING = 1,          /* aux echoed back */
    POSENC_OP_STATS = 2,         /* reply aux: JSON counters and limits */
    POSENC_OP_LIST_TABLES = 3,   /* reply aux: JSON array of the registered tables */
    POSENC_OP_RESOLVE = 4,       /* aux: table name; reply: table_id + JSON description */
    POSENC_OP_ENCODE_TABLE = 5,  /* table_id + positions -> rows gathered from the shm table */
    POSENC_OP_ENCODE_SPEC = 6,   /* aux: inline spec + positions -> computed rows */
    POSENC_OP_MAX = 6
};

enum posenc_wire_dtype {
    POSENC_DTYPE_FLOAT32 = 0,
    POSENC_DTYPE_FLOAT16 = 1,
    POSENC_DTYPE_BFLOAT16 = 2,
    POSENC_DTYPE_FLOAT64 = 3,
    POSENC_DTYPE_MAX = 3
};

enum posenc_position_kind {
    POSENC_POSITIONS_INT64 = 0,
    POSENC_POSITIONS_FLOAT64 = 1,
    POSENC_POSITIONS_MAX = 1
};

/* Response status. Codes marked "closes" end the connection after the error frame: the
 * stream can no longer be trusted (or the server is leaving). The others answer one request. */
enum posenc_status {
    POSENC_STATUS_OK = 0,
    POSENC_STATUS_BAD_FRAME = 1,            /* closes: length < 32, length != 32+aux+8*count, reserved != 0 */
    POSENC_STATUS_BAD_VERSION = 2,          /* closes */
    POSENC_STATUS_UNKNOWN_OPCODE = 3,       /* closes */
    POSENC_STATUS_FRAME_TOO_LARGE = 4,      /* closes: length > max frame */
    POSENC_STATUS_TOO_MANY_POSITIONS = 5,   /* count > max positions per request */
    POSENC_STATUS_UNKNOWN_TABLE = 6,        /* no such table name / id */
    POSENC_STATUS_POSITION_OUT_OF_RANGE = 7,
    POSENC_STATUS_BAD_ARGUMENT = 8,         /* a field is invalid; the message names it */
    POSENC_STATUS_OUTPUT_TOO_LARGE = 9,     /* rows*width*itemsize > max response */
    POSENC_STATUS_TOO_MANY_CONNECTIONS = 10, /* closes: sent right after accept */
    POSENC_STATUS_SHUTTING_DOWN = 11,       /* closes: the server is draining */
    POSENC_STATUS_TABLE_UNAVAILABLE = 12,   /* the table exists but its segment failed validation */
    POSENC_STATUS_INTERNAL = 13,            /* out of memory and the like */
    POSENC_STATUS_IDLE_TIMEOUT = 14,        /* closes: no traffic for --idle-timeout-ms */
    POSENC_STATUS_MAX = 14
};

static inline int posenc_status_closes(unsigned status) {
    return status == POSENC_STATUS_BAD_FRAME || status == POSENC_STATUS_BAD_VERSION ||
           status == POSENC_STATUS_UNKNOWN_OPCODE || status == POSENC_STATUS_FRAME_TOO_LARGE ||
           status == POSENC_STATUS_TOO_MANY_CONNECTIONS || status == POSENC_STATUS_SHUTTING_DOWN ||
           status == POSENC_STATUS_IDLE_TIMEOUT;
}

/* ENCODE_SPEC flags. */
#define POSENC_SPEC_INTERLEAVED 1u     /* sin at 2i, cos at 2i+1 (else sin_base+i / cos_base+i) */
#define POSENC_SPEC_ZERO_LAST 2u       /* the last column is an explicit zero (odd-dim t2t) */
#define POSENC_SPEC_COLUMN_SCALE 4u    /* float64[row_width] per-column multipliers follow the freqs */
#define POSENC_SPEC_FLAGS_ALL 7u

struct posenc_request_header {
    uint32_t length;      /* whole frame: 32 + aux_len + 8*count */
    uint8_t version;      /* POSENC_PROTO_VERSION */
    uint8_t opcode;       /* enum posenc_opcode */
    uint8_t dtype;        /* enum posenc_wire_dtype of the reply rows */
    uint8_t position_kind; /* enum posenc_position_kind */
    uint64_t request_id;  /* echoed in the reply */
    uint32_t table_id;    /* ENCODE_TABLE: from RESOLVE */
    uint32_t count;       /* number of positions after the aux block */
    uint32_t aux_len;
    uint32_t reserved;    /* must be 0 */
};

struct posenc_response_header {
    uint32_t length;      /* whole frame: 32 + aux_len + rows*width*itemsize(dtype) */
    uint8_t version;
    uint8_t opcode;       /* the request's opcode (0 if the request header was unreadable) */
    uint8_t status;       /* enum posenc_status */
    uint8_t dtype;        /* dtype of the rows */
    uint64_t request_id;
    uint32_t rows;
    uint32_t width;
    uint32_t aux_len;     /* JSON, echoed PING bytes, or the error text "field: message" */
    uint32_t table_id;    /* RESOLVE / ENCODE_TABLE: the table's id, else 0 */
};

/* The fixed 32-byte prefix of an ENCODE_SPEC aux block; then float64 freqs[n_freq] and, with
 * POSENC_SPEC_COLUMN_SCALE, float64 scale[row_width]. Row r, frequency i gets
 * amplitude*sin(p_r*freq_i) and (i < n_cos) amplitude*cos(p_r*freq_i). */
struct posenc_spec_prefix {
    uint32_t n_freq;
    uint32_t row_width;
    uint32_t sin_base;
    uint32_t cos_base;
    uint32_t n_cos;
    uint32_t flags;       /* POSENC_SPEC_* */
    double amplitude;
};

static inline uint32_t posenc_load_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t posenc_load_u64(const uint8_t *p) {
    return (uint64_t)posenc_load_u32(p) | (uint64_t)posenc_load_u32(p + 4) << 32;
}

static inline double posenc_load_f64(const uint8_t *p) {
    uint64_t bits = posenc_load_u64(p);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

static inline void posenc_store_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

static inline void posenc_store_u64(uint8_t *p, uint64_t v) {
    posenc_store_u32(p, (uint32_t)v);
    posenc_store_u32(p + 4, (uint32_t)(v >> 32));
}

static inline void posenc_store_f64(uint8_t *p, double d) {
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    posenc_store_u64(p, bits);
}

static inline void posenc_request_decode(const uint8_t *p, struct posenc_request_header *h) {
    h->length = posenc_load_u32(p);
    h->version = p[4]; h->opcode = p[5]; h->dtype = p[6]; h->position_kind = p[7];
    h->request_id = posenc_load_u64(p + 8);
    h->table_id = posenc_load_u32(p + 16);
    h->count = posenc_load_u32(p + 20);
    h->aux_len = posenc_load_u32(p + 24);
    h->reserved = posenc_load_u32(p + 28);
}

static inline void posenc_request_encode(uint8_t *p, const struct posenc_request_header *h) {
    posenc_store_u32(p, h->length);
    p[4] = h->version; p[5] = h->opcode; p[6] = h->dtype; p[7] = h->position_kind;
    posenc_store_u64(p + 8, h->request_id);
    posenc_store_u32(p + 16, h->table_id);
    posenc_store_u32(p + 20, h->count);
    posenc_store_u32(p + 24, h->aux_len);
    posenc_store_u32(p + 28, h->reserved);
}

static inline void posenc_response_decode(const uint8_t *p, struct posenc_response_header *h) {
    h->length = posenc_load_u32(p);
    h->version = p[4]; h->opcode = p[5]; h->status = p[6]; h->dtype = p[7];
    h->request_id = posenc_load_u64(p + 8);
    h->rows = posenc_load_u32(p + 16);
    h->width = posenc_load_u32(p + 20);
    h->aux_len = posenc_load_u32(p + 24);
    h->table_id = posenc_load_u32(p + 28);
}

static inline void posenc_response_encode(uint8_t *p, const struct posenc_response_header *h) {
    posenc_store_u32(p, h->length);
    p[4] = h->version; p[5] = h->opcode; p[6] = h->status; p[7] = h->dtype;
    posenc_store_u64(p + 8, h->request_id);
    posenc_store_u32(p + 16, h->rows);
    posenc_store_u32(p + 20, h->width);
    posenc_store_u32(p + 24, h->aux_len);
    posenc_store_u32(p + 28, h->table_id);
}

static inline void posenc_spec_prefix_decode(const uint8_t *p, struct posenc_spec_prefix *s) {
    s->n_freq = posenc_load_u32(p);
    s->row_width = posenc_load_u32(p + 4);
    s->sin_base = posenc_load_u32(p + 8);
    s->cos_base = posenc_load_u32(p + 12);
    s->n_cos = posenc_load_u32(p + 16);
    s->flags = posenc_load_u32(p + 20);
    s->amplitude = posenc_load_f64(p + 24);
}

static inline void posenc_spec_prefix_encode(uint8_t *p, const struct posenc_spec_prefix *s) {
    posenc_store_u32(p, s->n_freq);
    posenc_store_u32(p + 4, s->row_width);
    posenc_store_u32(p + 8, s->sin_base);
    posenc_store_u32(p + 12, s->cos_base);
    posenc_store_u32(p + 16, s->n_cos);
    posenc_store_u32(p + 20, s->flags);
    posenc_store_f64(p + 24, s->amplitude);
}

/* The frequencies posenc's sinusoidal specs send (docs/protocol.md, "Frequencies"), in the
 * library's operation order: the exponent (2i)/dim rounded to float64 first, then pow correctly
 * rounded (posenc_crmath.h, as posenc.crmath: not the C library's pow, which differs between
 * CPUs), then 1.0 divided by it. Needs posenc_crmath.h beside this header, and -lm. */
#ifdef POSENC_PROTO_WANT_FREQS
#include "posenc_crmath.h"
static inline double posenc_vaswani_freq(double base, uint32_t i, uint32_t dim) {
    return 1.0 / posenc_cr_pow(base, (2.0 * (double)i) / (double)dim);
}

/* tensor2tensor timescales: log_inc = log(max_ts / min_ts) / max(n - 1, 1), n = dim / 2, with
 * log and exp correctly rounded. */
static inline double posenc_t2t_freq(double min_ts, double max_ts, uint32_t i, uint32_t dim) {
    uint32_t n = dim / 2;
    double log_inc = posenc_cr_log(max_ts / min_ts) / (double)(n > 1 ? n - 1 : 1);
    return min_ts * posenc_cr_exp((double)i * -log_inc);
}
#endif

static inline unsigned posenc_dtype_size(unsigned dtype) {
    switch (dtype) {
    case POSENC_DTYPE_FLOAT32: return 4;
    case POSENC_DTYPE_FLOAT16: return 2;
    case POSENC_DTYPE_BFLOAT16: return 2;
    case POSENC_DTYPE_FLOAT64: return 8;
    default: return 0;
    }
}

#endif /* POSENC_PROTO_H */
