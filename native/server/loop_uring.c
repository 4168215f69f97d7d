/* The io_uring event loop (Linux 6.1+, liburing): one multishot accept per listener, one
 * multishot receive per connection into a ring of provided buffers, and every send, re-arm
 * and cancel of an iteration submitted together with the wait for the next completions (one
 * io_uring_enter per loop iteration). Replies are built in `out` as on the epoll loop; a send
 * takes the whole of `out` (swapped into `sending`, which nothing moves while the kernel
 * reads it), so each connection has at most one send in flight. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <liburing.h>

#include "conn.h"
#include "loop.h"
#include "reply.h"

#define SQ_ENTRIES 4096
#define CQ_ENTRIES 16384
/* Provided buffers per worker: a receive takes one whole buffer whatever it brings, and each
 * goes back to the ring as soon as its bytes are copied into the connection's `in`. */
#define RECV_BUFS 1024 /* a power of two */
#define RECV_BUF_SIZE 4096
#define BUF_GROUP 0
/* What may still arrive for a connection after it paused (replies over OUT_HIGH_WATERMARK
 * unsent) and before the cancel of its receive took effect: completions already posted. */
#define PAUSE_SLACK (1u << 20)
#define RING_FLAGS (IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | \
                    IORING_SETUP_SUBMIT_ALL)
#define IO_URING_DISABLED "/proc/sys/kernel/io_uring_disabled"

/* The low two bits of user_data say what completed; the rest points at its owner (a poll_tag
 * or a connection, both at least 4-byte aligned). 0: a cancel, nothing to do. */
enum op { OP_NONE = 0, OP_RECV = 1, OP_SEND = 2, OP_TAG = 3 };
#define OP_MASK 3u

struct uconn {
    struct conn c;            /* first: worker.c sees a struct conn */
    struct buf sending;       /* the bytes the send in flight reads: never moved meanwhile */
    struct uconn *next_dirty;
    uint8_t recv_armed;       /* a multishot receive will post more completions */
    uint8_t recv_cancelled;   /* ... and its cancel is submitted */
    uint8_t send_busy;        /* a send is in flight */
    uint8_t dirty;            /* on the list settled before the next submit */
    uint8_t dead;             /* closed: freed once its last completion is in */
};

struct uring_loop {
    struct io_uring ring;
    struct io_uring_buf_ring *bufs_ring;
    uint8_t *bufs;
    struct uconn *dirty; /* connections whose sends, receive or half-close to settle */
    unsigned n_dead;     /* closed connections still waiting for completions */
    int shutdown_seen;
};

static int ring_init(struct io_uring *ring) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = RING_FLAGS | IORING_SETUP_R_DISABLED; /* enabled by the worker's thread, its only issuer */
    p.cq_entries = CQ_ENTRIES;
    return io_uring_queue_init_params(SQ_ENTRIES, ring, &p);
}

static int kernel_switch(void) {
    FILE *f = fopen(IO_URING_DISABLED, "r");
    int value = 0;
    if (f) {
        if (fscanf(f, "%d", &value) != 1)
            value = 0;
        fclose(f);
    }
    return value;
}

int loop_uring_available(char *why, size_t cap) {
    int disabled = kernel_switch();
    if (disabled == 2) {
        snprintf(why, cap, "the kernel refuses io_uring (%s is 2: disabled for every process)", IO_URING_DISABLED);
        return -1;
    }
    struct io_uring ring;
    int rc = ring_init(&ring);
    if (rc < 0) {
        snprintf(why, cap, "the kernel refuses io_uring (io_uring_setup: %s%s)", strerror(-rc),
                 rc == -EINVAL ? "; the io_uring loop needs Linux 6.1 or later"
                 : disabled == 1 ? "; " IO_URING_DISABLED " is 1: only kernel.io_uring_group may use it" : "");
        return -1;
    }
    io_uring_queue_exit(&ring);
    return 0;
}

static struct io_uring_sqe *sqe_get(struct uring_loop *u) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    while (!sqe) { /* the submission queue is full: hand it to the kernel early */
        io_uring_submit(&u->ring);
        sqe = io_uring_get_sqe(&u->ring);
    }
    return sqe;
}

static void *tagged(void *owner, enum op op) { return (void *)((uintptr_t)owner | op); }

static void arm_accept(struct worker *w, struct poll_tag *listener) {
    struct io_uring_sqe *sqe = sqe_get(w->uring);
    io_uring_prep_multishot_accept(sqe, listener->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    io_uring_sqe_set_data(sqe, tagged(listener, OP_TAG));
}

static void cancel(struct worker *w, void *owner, enum op op) {
    struct io_uring_sqe *sqe = sqe_get(w->uring);
    io_uring_prep_cancel(sqe, tagged(owner, op), IORING_ASYNC_CANCEL_ALL);
    io_uring_sqe_set_data(sqe, NULL);
}

static int uring_init(struct worker *w) {
    struct uring_loop *u = calloc(1, sizeof *u);
    if (!u)
        return -1;
    w->uring = u;
    int rc = ring_init(&u->ring);
    if (rc < 0) {
        free(u);
        w->uring = NULL;
        errno = -rc;
        return -1;
    }
    size_t ring_bytes = RECV_BUFS * sizeof(struct io_uring_buf);
    u->bufs_ring = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    u->bufs = mmap(NULL, (size_t)RECV_BUFS * RECV_BUF_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (u->bufs_ring == MAP_FAILED || u->bufs == MAP_FAILED)
        return -1;
    io_uring_buf_ring_init(u->bufs_ring);
    struct io_uring_buf_reg reg = {.ring_addr = (uintptr_t)u->bufs_ring, .ring_entries = RECV_BUFS,
                                   .bgid = BUF_GROUP};
    rc = io_uring_register_buf_ring(&u->ring, &reg, 0);
    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    const int mask = io_uring_buf_ring_mask(RECV_BUFS);
    for (int i = 0; i < RECV_BUFS; i++)
        io_uring_buf_ring_add(u->bufs_ring, u->bufs + (size_t)i * RECV_BUF_SIZE, RECV_BUF_SIZE, (unsigned short)i,
                              mask, i);
    io_uring_buf_ring_advance(u->bufs_ring, RECV_BUFS);
    return 0;
}

static void recycle(struct uring_loop *u, unsigned bid) {
    io_uring_buf_ring_add(u->bufs_ring, u->bufs + (size_t)bid * RECV_BUF_SIZE, RECV_BUF_SIZE, (unsigned short)bid,
                          io_uring_buf_ring_mask(RECV_BUFS), 0);
    io_uring_buf_ring_advance(u->bufs_ring, 1);
}

static void mark_dirty(struct uring_loop *u, struct uconn *uc) {
    if (uc->dirty)
        return;
    uc->dirty = 1;
    uc->next_dirty = u->dirty;
    u->dirty = uc;
}

/* A closed connection's memory goes once the kernel holds no request that points at it. */
static void free_if_done(struct uring_loop *u, struct uconn *uc) {
    if (!uc->dead || uc->recv_armed || uc->send_busy || uc->dirty)
        return;
    buf_free(&uc->sending);
    free(uc);
    u->n_dead--;
}

static void uring_close(struct worker *w, struct conn *c) {
    struct uconn *uc = (struct uconn *)c;
    worker_forget(w, c);
    close(c->tag.fd); /* requests in flight hold the socket until their cancels complete */
    c->tag.fd = -1;
    c->out_sending = 0;
    uc->dead = 1;
    if (uc->recv_armed && !uc->recv_cancelled)
        cancel(w, uc, OP_RECV);
    if (uc->send_busy)
        cancel(w, uc, OP_SEND);
    w->uring->n_dead++;
    free_if_done(w->uring, uc);
}

static void uring_pump(struct worker *w, struct conn *c) {
    conn_answer(w, c);
    mark_dirty(w->uring, (struct uconn *)c);
}

/* Start the next send: the rest of a short send, else everything queued in `out`. */
static void send_next(struct worker *w, struct uconn *uc) {
    struct conn *c = &uc->c;
    if (!buf_pending(&uc->sending)) {
        if (!buf_pending(&c->out))
            return;
        struct buf queued = c->out;
        c->out = uc->sending; /* empty: replies built from now on go after the ones in flight */
        c->out.pos = c->out.len = 0;
        uc->sending = queued;
        c->out_sending = buf_pending(&queued);
    }
    struct io_uring_sqe *sqe = sqe_get(w->uring);
    io_uring_prep_send(sqe, c->tag.fd, uc->sending.data + uc->sending.pos, buf_pending(&uc->sending), MSG_NOSIGNAL);
    io_uring_sqe_set_data(sqe, tagged(uc, OP_SEND));
    uc->send_busy = 1;
}

/* Before the next submit: send what is queued, half-close once all is sent, and keep the
 * receive armed exactly while input is wanted (it is cancelled while replies back up). */
static void settle(struct worker *w, struct uconn *uc) {
    struct conn *c = &uc->c;
    if (!uc->send_busy)
        send_next(w, uc);
    if (c->state == CONN_CLOSING && !conn_unsent(c))
        worker_half_close(c);
    if (c->state == CONN_LINGER && c->final_input == INPUT_EOF) { /* the peer has closed too */
        uring_close(w, c);
        return;
    }
    buf_settle(&c->in, BUF_KEEP_BYTES);
    buf_settle(&c->out, BUF_KEEP_BYTES);
    /* not CONN_OPEN: what still arrives is read and dropped (so close() ends with FIN, not RST) */
    int want = c->final_input == INPUT_OPEN && (c->state != CONN_OPEN || conn_unsent(c) < OUT_HIGH_WATERMARK);
    if (want && !uc->recv_armed) {
        struct io_uring_sqe *sqe = sqe_get(w->uring);
        io_uring_prep_recv_multishot(sqe, c->tag.fd, NULL, 0, 0);
        sqe->flags |= IOSQE_BUFFER_SELECT;
        sqe->buf_group = BUF_GROUP;
        io_uring_sqe_set_data(sqe, tagged(uc, OP_RECV));
        uc->recv_armed = 1;
    } else if (!want && uc->recv_armed && !uc->recv_cancelled) {
        cancel(w, uc, OP_RECV);
        uc->recv_cancelled = 1;
    }
}

static void settle_all(struct worker *w) {
    struct uring_loop *u = w->uring;
    while (u->dirty) {
        struct uconn *uc = u->dirty;
        u->dirty = uc->next_dirty;
        uc->dirty = 0;
        if (uc->dead)
            free_if_done(u, uc);
        else
            settle(w, uc);
    }
}

static void on_recv(struct worker *w, struct uconn *uc, const struct io_uring_cqe *cqe) {
    struct uring_loop *u = w->uring;
    struct conn *c = &uc->c;
    if (!(cqe->flags & IORING_CQE_F_MORE)) {
        uc->recv_armed = 0; /* ended: by EOF, error, cancel or no free buffer (-ENOBUFS) */
        uc->recv_cancelled = 0;
    }
    const uint8_t *data = NULL;
    unsigned bid = 0;
    if (cqe->flags & IORING_CQE_F_BUFFER) {
        bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
        data = u->bufs + (size_t)bid * RECV_BUF_SIZE;
    }
    if (uc->dead) {
        if (data)
            recycle(u, bid);
        free_if_done(u, uc);
        return;
    }
    if (cqe->res > 0 && data) {
        if (c->state == CONN_OPEN && c->final_input == INPUT_OPEN) {
            if (buf_append(&c->in, data, (size_t)cqe->res, conn_in_limit(&w->srv->cfg) + PAUSE_SLACK) != 0)
            {
                reply_error(w, c, 0, 0, POSENC_STATUS_INTERNAL, "connection: no memory for a %zu-byte frame",
                            c->need);
                c->state = CONN_CLOSING;
            }
            c->last_active_ms = monotonic_ms();
            counter_add(&w->counters.bytes_in, (uint64_t)cqe->res);
        }
        recycle(u, bid);
        uring_pump(w, c);
    } else if (cqe->res == 0) {
        c->final_input = INPUT_EOF;
        uring_pump(w, c);
    } else if (cqe->res == -ENOBUFS || cqe->res == -ECANCELED || cqe->res == -EINTR || cqe->res == -EAGAIN) {
        mark_dirty(u, uc); /* settle() arms a new receive if input is still wanted */
    } else {
        uring_close(w, c); /* reset by the peer, or another socket error */
    }
}

static void on_send(struct worker *w, struct uconn *uc, const struct io_uring_cqe *cqe) {
    struct conn *c = &uc->c;
    uc->send_busy = 0;
    if (uc->dead) {
        free_if_done(w->uring, uc);
        return;
    }
    if (cqe->res > 0) {
        uc->sending.pos += (size_t)cqe->res;
        c->out_sending -= (size_t)cqe->res;
        c->last_active_ms = monotonic_ms();
        buf_settle(&uc->sending, BUF_KEEP_BYTES);
        uring_pump(w, c); /* frames may wait behind the watermark */
    } else if (cqe->res == -EINTR || cqe->res == -EAGAIN) {
        mark_dirty(w->uring, uc);
    } else {
        uring_close(w, c);
    }
}

static void on_tag(struct worker *w, struct poll_tag *tag, const struct io_uring_cqe *cqe) {
    if (tag->kind == TAG_SHUTDOWN) {
        w->uring->shutdown_seen = 1;
        return;
    }
    if (cqe->res >= 0) {
        struct conn *c = worker_admit(w, cqe->res, tag == &w->tcp, sizeof(struct uconn));
        if (c)
            mark_dirty(w->uring, (struct uconn *)c); /* settle() arms its receive */
    } else if (cqe->res == -EMFILE || cqe->res == -ENFILE) {
        worker_refuse_pending(w, tag->fd);
    }
    if (!(cqe->flags & IORING_CQE_F_MORE) && !w->draining && tag->fd >= 0)
        arm_accept(w, tag);
}

static void on_completion(struct worker *w, const struct io_uring_cqe *cqe) {
    uintptr_t data = (uintptr_t)io_uring_cqe_get_data(cqe);
    void *owner = (void *)(data & ~(uintptr_t)OP_MASK);
    switch ((enum op)(data & OP_MASK)) {
    case OP_RECV: on_recv(w, owner, cqe); break;
    case OP_SEND: on_send(w, owner, cqe); break;
    case OP_TAG: on_tag(w, owner, cqe); break;
    case OP_NONE: break;
    }
}

static int uring_send_now(struct worker *w, struct conn *c) {
    if (((struct uconn *)c)->send_busy)
        return 0; /* the kernel is sending earlier bytes: these cannot overtake them */
    ssize_t n = send(c->tag.fd, c->out.data + c->out.pos, buf_pending(&c->out), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0)
        c->out.pos += (size_t)n;
    return 0;
}

static void uring_stop_accepting(struct worker *w) {
    if (w->tcp.fd >= 0)
        cancel(w, &w->tcp, OP_TAG);
    if (w->unix_sock.fd >= 0)
        cancel(w, &w->unix_sock, OP_TAG);
}

static void uring_run(struct worker *w) {
    struct uring_loop *u = w->uring;
    io_uring_enable_rings(&u->ring);
    io_uring_register_ring_fd(&u->ring); /* io_uring_enter without a descriptor lookup (best effort) */
    if (w->tcp.fd >= 0)
        arm_accept(w, &w->tcp);
    if (w->unix_sock.fd >= 0)
        arm_accept(w, &w->unix_sock);
    struct io_uring_sqe *sqe = sqe_get(u);
    io_uring_prep_poll_add(sqe, w->shutdown.fd, POLLIN);
    io_uring_sqe_set_data(sqe, tagged(&w->shutdown, OP_TAG));
    while (!w->draining || w->n_conns > 0 || u->n_dead > 0) {
        int wait_ms = worker_wait_ms(w);
        if (wait_ms == 0) {
            io_uring_submit_and_get_events(&u->ring);
        } else {
            struct __kernel_timespec ts = {.tv_sec = wait_ms / 1000, .tv_nsec = (long long)(wait_ms % 1000) * 1000000};
            struct io_uring_cqe *first;
            io_uring_submit_and_wait_timeout(&u->ring, &first, 1, &ts, NULL);
        }
        unsigned head, seen = 0;
        struct io_uring_cqe *cqe;
        io_uring_for_each_cqe(&u->ring, head, cqe) {
            on_completion(w, cqe);
            seen++;
        }
        io_uring_cq_advance(&u->ring, seen);
        if (seen)
            worker_saw_events(w);
        worker_tick(w, u->shutdown_seen);
        settle_all(w);
    }
}

static void uring_free(struct worker *w) {
    struct uring_loop *u = w->uring;
    if (!u)
        return;
    if (u->ring.ring_fd >= 0)
        io_uring_queue_exit(&u->ring);
    if (u->bufs_ring && u->bufs_ring != MAP_FAILED)
        munmap(u->bufs_ring, RECV_BUFS * sizeof(struct io_uring_buf));
    if (u->bufs && u->bufs != MAP_FAILED)
        munmap(u->bufs, (size_t)RECV_BUFS * RECV_BUF_SIZE);
    free(u);
    w->uring = NULL;
}

const struct loop_ops loop_uring = {
    .name = "uring",
    .init = uring_init,
    .run = uring_run,
    .pump = uring_pump,
    .close = uring_close,
    .send_now = uring_send_now,
    .stop_accepting = uring_stop_accepting,
    .free = uring_free,
};
