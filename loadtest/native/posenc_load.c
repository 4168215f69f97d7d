/* posenc-load: a native load generator for the posenc binary protocol (docs/protocol.md).
 *
 * One thread, one epoll set, N connections. Closed loop (default): each connection keeps P
 * requests in flight and sends a new one per reply. Open loop (--rate R): requests are
 * scheduled at R per second in total, whatever the replies do, and each latency is measured
 * from the request's *scheduled* time, so queueing inside the server or the client is
 * counted (no coordinated omission). Bounded by a request count and a duration; prints
 * requests/s and P50/P99/P99.9 from an HDR-style histogram (see hdr.h).
 *
 * What it sends (one kind per run): ENCODE_TABLE (--table), ENCODE_SPEC (--spec-dim), PING with
 * an N-byte payload echoed back (--ping N: the protocol's own cost, no encoding work), or, with
 * --resp, redis's `GET key` in RESP, so that the same generator (same connections, same
 * schedule, same histogram) measures redis and posenc alike.
 *
 * Positions are drawn uniformly at random from the table's rows, [0, 131072) for an inline spec,
 * or from --positions LO:HI (say millisecond timestamps, as a caller keyed by time sends them);
 * --seed gives each of several generators its own draw.
 *
 * Run it on its own core (taskset): in open-loop mode it spins between sends. Several generators
 * sharing one core pass --yield: each spins but gives the core up whenever nothing arrived, where
 * a plain spinning one would hold it for a whole scheduler slice (milliseconds) while the others'
 * requests fell due, and a sleeping one would wait for the idle CPU to wake (a VM's halted vCPU:
 * tens of microseconds). --histogram adds the latency histogram to the JSON line, so that the
 * reports of several generators can be merged into one distribution. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "hdr.h"
#define POSENC_PROTO_WANT_FREQS
#include "posenc_proto.h"

struct options {
    const char *host, *unix_path, *table, *dtype_name, *resp_key;
    int port, connections, depth, batch, spec_dim, ping_bytes;
    uint64_t requests;
    double seconds, warmup, rate;
    int json, resp, histogram, yield;
    int64_t pos_lo, pos_hi; /* --positions; pos_hi > pos_lo when given */
    uint64_t seed;
    int seeded;
};

/* Send times of the requests in flight on one connection, oldest first (replies come in order). */
struct fifo {
    uint64_t *at;
    size_t head, len, cap;
};

struct conn {
    int fd;
    uint8_t *in;
    size_t in_len, in_cap;
    uint8_t *out;
    size_t out_pos, out_len, out_cap;
    struct fifo sent;
    uint64_t next_id, expect_id;
};

struct load {
    struct options opt;
    struct conn *conns;
    int epfd;
    uint8_t *request;       /* one request frame; id and positions patched per send */
    size_t request_len;
    int n_positions;        /* positions patched per send: --batch for encodes, 0 for PING and GET */
    uint8_t dtype;
    int resp;               /* --resp: redis GET, replies matched by order (RESP has no ids) */
    uint32_t table_id, width;
    int64_t pos_lo, pos_hi; /* positions drawn uniformly from [lo, hi): --positions, else the table's */
    uint64_t rng;
    uint64_t t_start, t_measure, t_end; /* ns: started, warm-up over, stop sending */
    uint64_t t_last;                    /* ns: the last measured reply */
    int sending;
    uint64_t sent, completed, measured, errors, in_flight;
    uint64_t status_counts[POSENC_STATUS_MAX + 1];
    char first_error[256];
    struct hdr hist;
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "posenc-load: %s\n", what);
    exit(2);
}

static void die_errno(const char *what) {
    fprintf(stderr, "posenc-load: %s: %s\n", what, strerror(errno));
    exit(2);
}

static void *xrealloc(void *p, size_t n) {
    p = realloc(p, n);
    if (!p)
        die("out of memory");
    return p;
}

static uint64_t next_random(struct load *L) { /* xorshift64* */
    L->rng ^= L->rng >> 12;
    L->rng ^= L->rng << 25;
    L->rng ^= L->rng >> 27;
    return L->rng * 2685821657736338717ull;
}

/* splitmix64's finaliser: a seed to a well-spread xorshift state, never 0 (xorshift's fixed point). */
static uint64_t mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z ? z : 0x9E3779B97F4A7C15ull;
}

static void fifo_push(struct fifo *f, uint64_t t) {
    if (f->len == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 64;
        uint64_t *at = xrealloc(NULL, cap * sizeof *at);
        for (size_t i = 0; i < f->len; i++)
            at[i] = f->at[(f->head + i) % (f->cap ? f->cap : 1)];
        free(f->at);
        f->at = at;
        f->head = 0;
        f->cap = cap;
    }
    f->at[(f->head + f->len++) % f->cap] = t;
}

static uint64_t fifo_pop(struct fifo *f) {
    uint64_t t = f->at[f->head];
    f->head = (f->head + 1) % f->cap;
    f->len--;
    return t;
}

/* ---- connections ------------------------------------------------------------------------ */

static int dial(const struct options *o) {
    int fd;
    if (o->unix_path) {
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        snprintf(a.sun_path, sizeof a.sun_path, "%s", o->unix_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
            die_errno(o->unix_path);
        return fd;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai;
    char port[8];
    snprintf(port, sizeof port, "%d", o->port);
    if (getaddrinfo(o->host, port, &hints, &ai) != 0)
        die("--host: cannot resolve");
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0)
        die_errno("connect");
    freeaddrinfo(ai);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void read_exact(int fd, uint8_t *buf, size_t n) {
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0)
            die("the server closed the connection during set-up");
        got += (size_t)r;
    }
}

/* One blocking request/reply on a set-up connection; returns the reply body (malloc'd). */
static uint8_t *round_trip(int fd, const uint8_t *frame, size_t len, struct posenc_response_header *h) {
    if (write(fd, frame, len) != (ssize_t)len)
        die_errno("write");
    uint8_t head[POSENC_HEADER_SIZE];
    read_exact(fd, head, sizeof head);
    posenc_response_decode(head, h);
    uint8_t *body = xrealloc(NULL, h->length - POSENC_HEADER_SIZE + 1);
    read_exact(fd, body, h->length - POSENC_HEADER_SIZE);
    body[h->length - POSENC_HEADER_SIZE] = 0;
    if (h->status != POSENC_STATUS_OK) {
        fprintf(stderr, "posenc-load: set-up request failed (status %u): %s\n", h->status, (char *)body);
        exit(2);
    }
    return body;
}

static int64_t json_int(const char *json, const char *key) {
    const char *p = strstr(json, key);
    if (!p)
        die("RESOLVE reply without the expected fields");
    return strtoll(p + strlen(key), NULL, 10);
}

/* RESOLVE the table: its id, width and position range. */
static void resolve_table(struct load *L, int fd) {
    size_t n = strlen(L->opt.table);
    uint8_t frame[POSENC_HEADER_SIZE + POSENC_TABLE_NAME_MAX];
    if (n < 1 || n > POSENC_TABLE_NAME_MAX)
        die("--table: name must be 1..64 characters");
    struct posenc_request_header h = {.length = (uint32_t)(POSENC_HEADER_SIZE + n), .version = POSENC_PROTO_VERSION,
                                      .opcode = POSENC_OP_RESOLVE, .aux_len = (uint32_t)n};
    posenc_request_encode(frame, &h);
    memcpy(frame + POSENC_HEADER_SIZE, L->opt.table, n);
    struct posenc_response_header r;
    char *json = (char *)round_trip(fd, frame, POSENC_HEADER_SIZE + n, &r);
    L->table_id = r.table_id;
    L->width = r.width;
    L->pos_lo = json_int(json, "\"start\":");
    L->pos_hi = json_int(json, "\"stop\":");
    free(json);
}

/* The request every send copies: ENCODE_TABLE, ENCODE_SPEC for a Vaswani interleaved sinusoid
 * of --spec-dim (frequencies as the library computes them: posenc_vaswani_freq), PING with
 * --ping bytes, or RESP `GET key`. */
static void build_request(struct load *L) {
    const struct options *o = &L->opt;
    if (L->resp) {
        size_t n = strlen(o->resp_key);
        L->request = xrealloc(NULL, n + 32);
        L->request_len = (size_t)sprintf((char *)L->request, "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n", n, o->resp_key);
        return;
    }
    size_t aux = 0;
    uint8_t opcode = POSENC_OP_ENCODE_TABLE;
    L->n_positions = o->batch;
    if (o->ping_bytes) {
        aux = (size_t)o->ping_bytes;
        opcode = POSENC_OP_PING;
        L->n_positions = 0;
    } else if (!o->table) {
        uint32_t n_freq = (uint32_t)(o->spec_dim + 1) / 2;
        aux = POSENC_SPEC_PREFIX_SIZE + 8 * (size_t)n_freq;
        opcode = POSENC_OP_ENCODE_SPEC;
        L->width = (uint32_t)o->spec_dim;
        L->pos_lo = 0;
        L->pos_hi = 131072;
    }
    L->request_len = POSENC_HEADER_SIZE + aux + 8 * (size_t)L->n_positions;
    L->request = xrealloc(NULL, L->request_len);
    int encodes = opcode != POSENC_OP_PING;
    struct posenc_request_header h = {
        .length = (uint32_t)L->request_len, .version = POSENC_PROTO_VERSION, .opcode = opcode,
        .dtype = encodes ? L->dtype : 0, .position_kind = POSENC_POSITIONS_INT64,
        .table_id = opcode == POSENC_OP_ENCODE_TABLE ? L->table_id : 0, .count = (uint32_t)L->n_positions,
        .aux_len = (uint32_t)aux,
    };
    posenc_request_encode(L->request, &h);
    if (opcode == POSENC_OP_PING) {
        memset(L->request + POSENC_HEADER_SIZE, 'x', aux);
    } else if (opcode == POSENC_OP_ENCODE_SPEC) {
        uint32_t n_freq = (uint32_t)(o->spec_dim + 1) / 2;
        struct posenc_spec_prefix s = {.n_freq = n_freq, .row_width = (uint32_t)o->spec_dim,
                                       .n_cos = (uint32_t)o->spec_dim / 2, .flags = POSENC_SPEC_INTERLEAVED,
                                       .amplitude = 1.0};
        posenc_spec_prefix_encode(L->request + POSENC_HEADER_SIZE, &s);
        for (uint32_t i = 0; i < n_freq; i++)
            posenc_store_f64(L->request + POSENC_HEADER_SIZE + POSENC_SPEC_PREFIX_SIZE + 8 * i,
                             posenc_vaswani_freq(10000.0, i, (uint32_t)o->spec_dim));
    }
}

static void conn_watch(struct load *L, struct conn *c, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (epoll_ctl(L->epfd, EPOLL_CTL_MOD, c->fd, &ev) != 0)
        die_errno("epoll_ctl");
}

static void open_connections(struct load *L) {
    L->conns = calloc((size_t)L->opt.connections, sizeof *L->conns);
    if (!L->conns)
        die("out of memory");
    L->epfd = epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < L->opt.connections; i++) {
        struct conn *c = &L->conns[i];
        c->fd = dial(&L->opt);
        if (i == 0 && L->opt.table)
            resolve_table(L, c->fd);
        fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
        c->next_id = c->expect_id = 1;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(L->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0)
            die_errno("epoll_ctl");
    }
}

/* ---- sending and receiving -------------------------------------------------------------- */

static void queue_request(struct load *L, struct conn *c, uint64_t scheduled) {
    if (c->out_len + L->request_len > c->out_cap) {
        if (c->out_pos) {
            memmove(c->out, c->out + c->out_pos, c->out_len - c->out_pos);
            c->out_len -= c->out_pos;
            c->out_pos = 0;
        }
        if (c->out_len + L->request_len > c->out_cap) {
            c->out_cap = 2 * (c->out_len + L->request_len);
            c->out = xrealloc(c->out, c->out_cap);
        }
    }
    uint8_t *f = c->out + c->out_len;
    memcpy(f, L->request, L->request_len);
    if (!L->resp)
        posenc_store_u64(f + 8, c->next_id++);
    uint8_t *pos = f + L->request_len - 8 * (size_t)L->n_positions;
    uint64_t span = (uint64_t)L->pos_hi - (uint64_t)L->pos_lo;
    for (int k = 0; k < L->n_positions; k++)
        posenc_store_u64(pos + 8 * k, (uint64_t)L->pos_lo + next_random(L) % span);
    c->out_len += L->request_len;
    fifo_push(&c->sent, scheduled);
    L->sent++;
    L->in_flight++;
}

static void flush(struct load *L, struct conn *c) {
    while (c->out_pos < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_pos, c->out_len - c->out_pos, MSG_NOSIGNAL);
        if (n > 0) {
            c->out_pos += (size_t)n;
        } else if (n < 0 && errno == EAGAIN) {
            conn_watch(L, c, EPOLLIN | EPOLLOUT);
            return;
        } else if (!(n < 0 && errno == EINTR)) {
            die_errno("send");
        }
    }
    c->out_pos = c->out_len = 0;
}

static void record(struct load *L, uint64_t scheduled, uint64_t now) {
    L->completed++;
    L->in_flight--;
    if (scheduled >= L->t_measure && L->measured < L->opt.requests) {
        hdr_record(&L->hist, now - scheduled);
        L->measured++;
        L->t_last = now;
    }
}

/* One reply, whatever the protocol: whether it is what was asked for, and why not. */
struct reply {
    size_t length;      /* bytes it takes in the stream */
    int ok;
    char why[256];
};

static void on_reply(struct load *L, struct conn *c, const struct reply *r, uint64_t now) {
    record(L, fifo_pop(&c->sent), now);
    if (!r->ok) {
        L->errors++;
        if (!L->first_error[0])
            snprintf(L->first_error, sizeof L->first_error, "%s", r->why);
    }
    if (L->opt.rate <= 0 && L->sending) /* closed loop: one out, one in */
        queue_request(L, c, now);
}

/* The posenc reply at p (avail bytes): 0 when it has not fully arrived, else its length. */
static size_t posenc_reply(struct load *L, struct conn *c, const uint8_t *p, size_t avail, struct reply *r) {
    if (avail < POSENC_HEADER_SIZE)
        return 0;
    struct posenc_response_header h;
    posenc_response_decode(p, &h);
    if (h.length < POSENC_HEADER_SIZE)
        die("malformed reply");
    if (avail < h.length)
        return 0;
    if (h.request_id != c->expect_id)
        die("a reply's request id is not the oldest request in flight on its connection");
    c->expect_id++;
    uint32_t rows = L->opt.ping_bytes ? 0 : (uint32_t)L->opt.batch, width = L->opt.ping_bytes ? 0 : L->width;
    uint32_t aux = L->opt.ping_bytes ? (uint32_t)L->opt.ping_bytes : 0;
    r->ok = h.status == POSENC_STATUS_OK && h.rows == rows && h.width == width && h.aux_len == aux;
    if (!r->ok) {
        L->status_counts[h.status <= POSENC_STATUS_MAX ? h.status : 0]++;
        snprintf(r->why, sizeof r->why, "status %u, %ux%u rows, aux %u: %.*s", h.status, h.rows, h.width, h.aux_len,
                 h.status ? (int)(h.aux_len < 200 ? h.aux_len : 200) : 0, (const char *)p + POSENC_HEADER_SIZE);
    }
    return h.length;
}

/* The RESP reply at p: a bulk string ($N\r\n...\r\n) is a hit; nil ($-1), an error (-...) or
 * any other type is counted as an error. 0 when it has not fully arrived. */
static size_t resp_reply(const uint8_t *p, size_t avail, struct reply *r) {
    const uint8_t *eol = avail ? memchr(p, '\n', avail) : NULL;
    if (!eol)
        return 0;
    size_t line = (size_t)(eol - p) + 1;
    if (line < 3 || p[line - 2] != '\r')
        die("malformed RESP reply");
    if (p[0] != '$' || p[1] == '-') {
        r->ok = 0;
        snprintf(r->why, sizeof r->why, "redis: %.*s", (int)(line - 2 < 200 ? line - 2 : 200), (const char *)p);
        return line;
    }
    size_t n = (size_t)strtoull((const char *)p + 1, NULL, 10), total = line + n + 2;
    if (avail < total)
        return 0;
    r->ok = 1;
    return total;
}

static void on_readable(struct load *L, struct conn *c) {
    if (c->in_cap - c->in_len < 65536) {
        c->in_cap = c->in_cap ? 2 * c->in_cap : 1 << 17;
        c->in = xrealloc(c->in, c->in_cap);
    }
    ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
    if (n == 0)
        die("the server closed a connection");
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return;
        die_errno("read");
    }
    c->in_len += (size_t)n;
    uint64_t now = now_ns(); /* one timestamp for every reply this read brought */
    size_t at = 0, length;
    struct reply r;
    while ((length = L->resp ? resp_reply(c->in + at, c->in_len - at, &r)
                             : posenc_reply(L, c, c->in + at, c->in_len - at, &r)) != 0) {
        on_reply(L, c, &r, now);
        at += length;
    }
    if (!L->resp && c->in_len - at >= POSENC_HEADER_SIZE && posenc_load_u32(c->in + at) > c->in_cap) {
        c->in_cap = posenc_load_u32(c->in + at) + 65536; /* room for one large reply */
        c->in = xrealloc(c->in, c->in_cap);
    }
    memmove(c->in, c->in + at, c->in_len - at);
    c->in_len -= at;
    if (L->opt.rate <= 0)
        flush(L, c);
}

/* Open loop: queue every request whose scheduled time has come, round-robin over connections. */
static void schedule(struct load *L, uint64_t now, uint64_t *next_due, int *rr) {
    const double interval = 1e9 / L->opt.rate;
    while (L->sending && *next_due <= now) {
        struct conn *c = &L->conns[*rr];
        *rr = (*rr + 1) % L->opt.connections;
        queue_request(L, c, *next_due);
        *next_due = L->t_start + (uint64_t)((double)L->sent * interval);
    }
    for (int i = 0; i < L->opt.connections; i++)
        if (L->conns[i].out_len > L->conns[i].out_pos)
            flush(L, &L->conns[i]);
}

static void run(struct load *L) {
    struct epoll_event events[256];
    uint64_t next_due;
    int rr = 0;
    L->t_start = now_ns();
    L->t_measure = L->t_start + (uint64_t)(L->opt.warmup * 1e9);
    L->t_end = L->t_measure + (uint64_t)(L->opt.seconds * 1e9);
    L->sending = 1;
    next_due = L->t_start;
    if (L->opt.rate <= 0) {
        for (int i = 0; i < L->opt.connections; i++) {
            for (int k = 0; k < L->opt.depth; k++)
                queue_request(L, &L->conns[i], L->t_start);
            flush(L, &L->conns[i]);
        }
    }
    for (;;) {
        uint64_t now = now_ns();
        if (L->sending && (now >= L->t_end || L->measured >= L->opt.requests))
            L->sending = 0;
        if (!L->sending && (L->in_flight == 0 || now >= L->t_end + 2000000000ull))
            break; /* replies still missing 2 s after the end are counted as lost */
        if (L->opt.rate > 0)
            schedule(L, now, &next_due, &rr);
        int n = epoll_wait(L->epfd, events, 256, L->opt.rate > 0 ? 0 : 10);
        if (n < 0 && errno != EINTR)
            die_errno("epoll_wait");
        if (n == 0 && L->opt.rate > 0 && L->opt.yield)
            sched_yield(); /* nothing arrived: let the other generators on this CPU have a turn */
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            if (events[i].events & EPOLLOUT) {
                conn_watch(L, c, EPOLLIN);
                flush(L, c);
            }
            if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                on_readable(L, c);
        }
    }
}

/* ---- options and report ----------------------------------------------------------------- */

static void usage(FILE *out) {
    fprintf(out,
            "usage: posenc-load [--host H --port P | --unix PATH] (--table NAME | --spec-dim D | --ping N | --resp)\n"
            "                   [options]\n"
            "      --table NAME      ENCODE_TABLE requests for a published table\n"
            "      --spec-dim D      ENCODE_SPEC requests for a D-wide Vaswani sinusoid\n"
            "      --ping N          PING requests with N payload bytes (echoed: an N-byte reply)\n"
            "      --resp            redis: RESP `GET key` (--key, default key:__rand_int__)\n"
            "  -c, --connections N   connections (default 50)\n"
            "  -P, --pipeline N      requests in flight per connection, closed loop (default 1)\n"
            "  -b, --batch N         positions per request (default 1)\n"
            "  -n, --requests N      stop after N measured replies (default 1000000)\n"
            "  -d, --seconds S       ... or after S seconds of measurement (default 10)\n"
            "  -w, --warmup S        seconds before measuring (default 1)\n"
            "  -r, --rate R          open loop: R requests/s in total, latency from the scheduled time\n"
            "      --yield           open loop: give up the CPU (sched_yield) whenever nothing arrived,\n"
            "                        so that several generators sharing one CPU take turns\n"
            "      --positions LO:HI draw positions uniformly from the int64 range [LO, HI) (default: the\n"
            "                        table's rows; [0, 131072) for --spec-dim)\n"
            "      --seed N          seed of the position draw (default: one fixed seed)\n"
            "      --dtype T         float32 | float16 | bfloat16 | float64 (default float32)\n"
            "      --json            one JSON line instead of text\n"
            "      --histogram       with --json: add the latency histogram, [[bucket top ns, count], ...]\n"
            "                        (for merging the reports of several generators)\n");
}

static double number(const char *flag, const char *text, double lo) {
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v >= lo)) {
        fprintf(stderr, "posenc-load: --%s: must be a number >= %g, got '%s'\n", flag, lo, text);
        exit(2);
    }
    return v;
}

/* A whole decimal int64 (strtoll's range), else exit naming the flag. */
static int64_t integer(const char *flag, const char *text) {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end || errno) {
        fprintf(stderr, "posenc-load: --%s: must be a whole number within int64, got '%s'\n", flag, text);
        exit(2);
    }
    return (int64_t)v;
}

/* --positions LO:HI, LO < HI. */
static void parse_positions(struct options *o, const char *text) {
    char lo[32];
    const char *colon = strchr(text, ':');
    if (!colon || (size_t)(colon - text) >= sizeof lo)
        die("--positions: must be LO:HI, e.g. 1700000000000:1800000000000");
    memcpy(lo, text, (size_t)(colon - text));
    lo[colon - text] = 0;
    o->pos_lo = integer("positions", lo);
    o->pos_hi = integer("positions", colon + 1);
    if (o->pos_hi <= o->pos_lo)
        die("--positions: LO must be below HI");
}

static void parse(struct options *o, int argc, char **argv) {
    static const struct option longs[] = {
        {"host", required_argument, 0, 'H'}, {"port", required_argument, 0, 'p'},
        {"unix", required_argument, 0, 'u'}, {"table", required_argument, 0, 't'},
        {"spec-dim", required_argument, 0, 'D'}, {"connections", required_argument, 0, 'c'},
        {"pipeline", required_argument, 0, 'P'}, {"batch", required_argument, 0, 'b'},
        {"requests", required_argument, 0, 'n'}, {"seconds", required_argument, 0, 'd'},
        {"warmup", required_argument, 0, 'w'}, {"rate", required_argument, 0, 'r'},
        {"dtype", required_argument, 0, 'T'}, {"json", no_argument, 0, 'j'}, {"help", no_argument, 0, 'h'},
        {"ping", required_argument, 0, 'G'}, {"resp", no_argument, 0, 'R'}, {"key", required_argument, 0, 'K'},
        {"positions", required_argument, 0, 'X'}, {"seed", required_argument, 0, 'S'},
        {"histogram", no_argument, 0, 'g'}, {"yield", no_argument, 0, 'Y'},
        {0, 0, 0, 0},
    };
    *o = (struct options){.host = "127.0.0.1", .port = POSENC_DEFAULT_PORT, .dtype_name = "float32",
                          .connections = 50, .depth = 1, .batch = 1, .requests = 1000000, .seconds = 10,
                          .warmup = 1, .resp_key = "key:__rand_int__"};
    int ch;
    while ((ch = getopt_long(argc, argv, "c:P:b:n:d:w:r:h", longs, NULL)) != -1) {
        switch (ch) {
        case 'H': o->host = optarg; break;
        case 'p': o->port = (int)number("port", optarg, 1); break;
        case 'u': o->unix_path = optarg; break;
        case 't': o->table = optarg; break;
        case 'D': o->spec_dim = (int)number("spec-dim", optarg, 1); break;
        case 'c': o->connections = (int)number("connections", optarg, 1); break;
        case 'P': o->depth = (int)number("pipeline", optarg, 1); break;
        case 'b': o->batch = (int)number("batch", optarg, 1); break;
        case 'n': o->requests = (uint64_t)number("requests", optarg, 1); break;
        case 'd': o->seconds = number("seconds", optarg, 0.001); break;
        case 'w': o->warmup = number("warmup", optarg, 0); break;
        case 'r': o->rate = number("rate", optarg, 1); break;
        case 'T': o->dtype_name = optarg; break;
        case 'j': o->json = 1; break;
        case 'G': o->ping_bytes = (int)number("ping", optarg, 1); break;
        case 'R': o->resp = 1; break;
        case 'K': o->resp_key = optarg; break;
        case 'X': parse_positions(o, optarg); break;
        case 'S': o->seed = (uint64_t)integer("seed", optarg); o->seeded = 1; break;
        case 'g': o->histogram = 1; break;
        case 'Y': o->yield = 1; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if ((o->table != NULL) + (o->spec_dim != 0) + (o->ping_bytes != 0) + o->resp != 1)
        die("give exactly one of --table NAME, --spec-dim D, --ping N and --resp");
    if (o->pos_hi > o->pos_lo && !o->table && !o->spec_dim)
        die("--positions needs --table or --spec-dim");
    if (o->histogram && !o->json)
        die("--histogram needs --json");
    if (o->yield && o->rate <= 0)
        die("--yield needs --rate (a closed loop waits in epoll anyway)");
    if (o->ping_bytes > (1 << 20))
        die("--ping: at most 1 MiB");
    if (o->connections > 100000 || o->depth > 65536 || o->batch > 1000000)
        die("--connections, --pipeline or --batch is beyond what a load test needs");
}

static uint8_t parse_dtype(const char *name) {
    static const char *const names[] = {"float32", "float16", "bfloat16", "float64"};
    for (uint8_t i = 0; i < 4; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    die("--dtype: must be float32, float16, bfloat16 or float64");
    return 0;
}

/* ,"histogram":[[top,count],...]: each non-empty bucket's largest value (ns, as hdr_percentile
 * reports it) and count, so that merged histograms give the percentiles one generator would. */
static void print_histogram(const struct hdr *h) {
    const char *sep = "";
    printf(",\"histogram\":[");
    for (size_t i = 0; i < HDR_BUCKETS; i++) {
        if (h->counts[i]) {
            printf("%s[%llu,%llu]", sep, (unsigned long long)hdr_bucket_top(i),
                   (unsigned long long)h->counts[i]);
            sep = ",";
        }
    }
    printf("]");
}

static void report(const struct load *L) {
    double seconds = L->t_last > L->t_measure ? (double)(L->t_last - L->t_measure) / 1e9 : 0;
    double rps = seconds > 0 ? (double)L->measured / seconds : 0;
    const struct hdr *h = &L->hist;
    double p50 = hdr_percentile(h, 50) / 1e3, p95 = hdr_percentile(h, 95) / 1e3, p99 = hdr_percentile(h, 99) / 1e3;
    double p999 = hdr_percentile(h, 99.9) / 1e3, max = h->max_ns / 1e3;
    double mean = h->total ? h->sum_ns / (double)h->total / 1e3 : 0;
    unsigned long long lost = L->in_flight, errors = L->errors, measured = L->measured;
    if (L->opt.json) {
        printf("{\"requests\":%llu,\"completed\":%llu,\"seconds\":%.3f,\"rps\":%.1f,\"errors\":%llu,\"lost\":%llu,\"p50_us\":%.2f,"
               "\"p95_us\":%.2f,\"p99_us\":%.2f,\"p999_us\":%.2f,\"max_us\":%.2f,\"mean_us\":%.2f,\"connections\":%d,"
               "\"pipeline\":%d,\"batch\":%d,\"rate\":%.1f",
               measured, (unsigned long long)L->completed, seconds, rps, errors, lost, p50, p95, p99, p999, max, mean, L->opt.connections, L->opt.depth,
               L->opt.batch, L->opt.rate);
        if (L->opt.histogram)
            print_histogram(h);
        printf("}\n");
    } else {
        printf("%llu requests in %.3f s: %.0f req/s (%s, %d connections, %s %d, batch %d)\n", measured, seconds, rps,
               L->resp ? "redis GET" : L->opt.ping_bytes ? "ping" : L->opt.table ? "table" : "inline spec",
               L->opt.connections,
               L->opt.rate > 0 ? "open loop, rate" : "pipeline", L->opt.rate > 0 ? (int)L->opt.rate : L->opt.depth,
               L->opt.batch);
        printf("latency us: p50 %.1f  p95 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  mean %.1f\n", p50, p95, p99, p999,
               max, mean);
        printf("errors %llu, lost %llu\n", errors, lost);
    }
    if (L->first_error[0])
        fprintf(stderr, "posenc-load: first error: %s\n", L->first_error);
}

int main(int argc, char **argv) {
    static struct load L; /* the histogram is large */
    parse(&L.opt, argc, argv);
    L.dtype = parse_dtype(L.opt.dtype_name);
    L.rng = L.opt.seeded ? mix(L.opt.seed) : 0x9E3779B97F4A7C15ull;
    L.resp = L.opt.resp;
    open_connections(&L);
    build_request(&L);
    if (L.opt.pos_hi > L.opt.pos_lo) {
        L.pos_lo = L.opt.pos_lo;
        L.pos_hi = L.opt.pos_hi;
    }
    if (L.n_positions && L.pos_hi <= L.pos_lo)
        die("the table has no rows");
    run(&L);
    report(&L);
    return L.errors || L.in_flight ? 1 : 0;
}
