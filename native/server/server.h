/* The server's shared state, its event-loop threads and their connections. */
#ifndef POSENC_SERVER_SERVER_H
#define POSENC_SERVER_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "buf.h"
#include "config.h"
#include "counters.h"
#include "tables.h"

/* What an event points at (epoll data, io_uring user_data): a listener, the shutdown eventfd,
 * or a connection. */
enum tag_kind { TAG_LISTENER, TAG_SHUTDOWN, TAG_CONN };
struct poll_tag {
    enum tag_kind kind;
    int fd;
};

enum conn_state {
    CONN_OPEN,    /* reading requests, writing replies */
    CONN_CLOSING, /* no more requests: send what is queued, then half-close */
    CONN_LINGER   /* half-closed: discard input until the peer closes (so it reads our last frame) */
};

enum final_input {
    INPUT_OPEN, /* reading */
    INPUT_EOF   /* the peer finished sending: answer what arrived, then close */
};

struct conn {
    struct poll_tag tag;  /* first member: epoll data and io_uring user data point here */
    struct buf in;        /* received bytes; in.pos = start of the next frame */
    struct buf out;       /* replies; out.pos = sent so far */
    size_t out_sending;   /* replies moved out of `out` into a send still in progress (io_uring) */
    size_t need;          /* bytes the frame at the front of `in` needs, once known */
    uint64_t last_active_ms;
    uint64_t linger_until_ms;
    uint32_t epoll_mask;  /* epoll loop: the events watched */
    enum conn_state state;
    enum final_input final_input; /* why no more input will be read, if it will not */
    struct conn *prev, *next;
};

struct server;
struct loop_ops;
struct uring_loop;

struct worker {
    struct server *srv;
    const struct loop_ops *loop; /* the event loop this thread runs (loop.h) */
    int index;
    int epfd;                  /* epoll loop: the epoll set (-1 otherwise) */
    struct uring_loop *uring;  /* io_uring loop: ring, buffer ring, pending work (NULL otherwise) */
    struct poll_tag tcp;       /* this thread's SO_REUSEPORT listener (fd -1 if none) */
    struct poll_tag unix_sock; /* the Unix listener, shared by every thread */
    struct poll_tag shutdown;  /* the server's eventfd: readable once shutdown starts */
    struct counters counters;
    struct table_cache tables;
    struct buf values;         /* one request's row indices or float64 positions */
    struct buf rows;           /* ENCODE_SPEC parameters and computed rows */
    struct buf json;           /* STATS, LIST_TABLES and RESOLVE replies */
    struct conn *conns;        /* every open connection of this thread */
    uint32_t n_conns;
    int draining;
    uint64_t drain_started_ms;
    uint64_t drain_deadline_ms;
    int spare_fd;              /* given up when out of descriptors, to accept and refuse a client */
    uint64_t next_sweep_ms;
    uint64_t last_event_us;    /* for --busy-poll-us */
    pthread_t thread;
};

struct server {
    struct server_config cfg;
    const struct loop_ops *loop; /* chosen at start from --io */
    struct table_names names;
    atomic_uint connections;   /* open now, all threads */
    uint64_t started_ms;
    int shutdown_fd;           /* eventfd written by the signal handler */
    int n_workers;
    struct worker *workers;
};

/* Replies queued beyond this stop the reading of further requests until they drain, so a
 * client that pipelines without reading holds at most this plus one reply of memory. */
#define OUT_HIGH_WATERMARK (1u << 20)
/* Read granularity: the least free room a read is offered. */
#define READ_CHUNK (16u << 10)
/* Connection buffers larger than this are given back once empty. */
#define BUF_KEEP_BYTES (64u << 10)
/* How long a half-closed connection waits for the peer to close before it is dropped. */
#define LINGER_MS 2000
/* While draining, a connection with nothing received, unanswered or unsent for this long (and
 * at least this long after the shutdown began) is finished: bytes a client wrote before the
 * shutdown are in the kernel's queues and arrive within microseconds of the server reading. */
#define DRAIN_QUIET_MS 100

uint64_t monotonic_ms(void);
/* Largest output buffer a connection may hold: the watermark, one reply and its aux text. */
size_t conn_out_limit(const struct server_config *cfg);

#endif
