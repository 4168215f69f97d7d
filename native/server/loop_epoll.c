/* The epoll event loop: level-triggered readiness, one read per readable event, replies
 * written in one send per event (more while the socket takes them). */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "loop.h"
#include "reply.h"

#define MAX_EVENTS 256
#define ACCEPTS_PER_EVENT 64

static int watch(struct worker *w, struct poll_tag *tag, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.ptr = tag};
    return epoll_ctl(w->epfd, EPOLL_CTL_ADD, tag->fd, &ev);
}

static void unwatch(struct worker *w, struct poll_tag *tag) {
    if (tag->fd >= 0)
        epoll_ctl(w->epfd, EPOLL_CTL_DEL, tag->fd, NULL);
}

static int epoll_init(struct worker *w) {
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (w->epfd < 0)
        return -1;
    if ((w->tcp.fd >= 0 && watch(w, &w->tcp, EPOLLIN) != 0) ||
        (w->unix_sock.fd >= 0 && watch(w, &w->unix_sock, EPOLLIN | EPOLLEXCLUSIVE) != 0) ||
        watch(w, &w->shutdown, EPOLLIN) != 0)
        return -1;
    return 0;
}

static void set_interest(struct worker *w, struct conn *c, uint32_t mask) {
    if (mask == c->epoll_mask)
        return;
    struct epoll_event ev = {.events = mask, .data.ptr = &c->tag};
    epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->tag.fd, &ev);
    c->epoll_mask = mask;
}

static void epoll_close(struct worker *w, struct conn *c) {
    close(c->tag.fd); /* also leaves the epoll set */
    worker_forget(w, c);
    free(c);
}

static void accept_ready(struct worker *w, struct poll_tag *listener) {
    for (int i = 0; i < ACCEPTS_PER_EVENT; i++) {
        int fd = accept4(listener->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
            worker_refuse_pending(w, listener->fd);
            continue;
        }
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return; /* EAGAIN: another thread took it, or none are left */
        }
        struct conn *c = worker_admit(w, fd, listener == &w->tcp, sizeof *c);
        if (!c)
            continue;
        c->epoll_mask = EPOLLIN;
        if (watch(w, &c->tag, EPOLLIN) != 0)
            epoll_close(w, c);
    }
}

/* One read into `in`: 1 bytes arrived, 0 nothing now or the peer finished, -1 closed. */
static int conn_read(struct worker *w, struct conn *c) {
    size_t pending = buf_pending(&c->in);
    size_t room = c->need > pending ? c->need - pending : 0;
    if (room < READ_CHUNK)
        room = READ_CHUNK;
    if (buf_reserve(&c->in, room, conn_in_limit(&w->srv->cfg)) != 0) {
        reply_error(w, c, 0, 0, POSENC_STATUS_INTERNAL, "connection: no memory for a %zu-byte frame", c->need);
        c->state = CONN_CLOSING;
        return 0;
    }
    ssize_t n = read(c->tag.fd, c->in.data + c->in.len, c->in.cap - c->in.len);
    if (n > 0) {
        c->in.len += (size_t)n;
        c->last_active_ms = monotonic_ms();
        counter_add(&w->counters.bytes_in, (uint64_t)n);
        return 1;
    }
    if (n == 0) {
        c->final_input = INPUT_EOF;
        return 0;
    }
    if (errno == EAGAIN || errno == EINTR)
        return 0;
    epoll_close(w, c);
    return -1;
}

/* Send queued replies until done or the socket is full; -1 if the connection was closed. */
static int conn_flush(struct worker *w, struct conn *c) {
    while (buf_pending(&c->out)) {
        ssize_t n = send(c->tag.fd, c->out.data + c->out.pos, buf_pending(&c->out), MSG_NOSIGNAL);
        if (n > 0) {
            c->out.pos += (size_t)n;
            c->last_active_ms = monotonic_ms();
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno == EAGAIN) {
            return 0;
        } else {
            epoll_close(w, c);
            return -1;
        }
    }
    buf_settle(&c->out, BUF_KEEP_BYTES);
    buf_settle(&c->in, BUF_KEEP_BYTES);
    return 0;
}

static void epoll_pump(struct worker *w, struct conn *c) {
    for (;;) {
        enum process_result r = conn_answer(w, c);
        if (conn_flush(w, c) < 0)
            return;
        if (r != PROCESS_PAUSED || buf_pending(&c->out))
            break; /* paused and fully sent: answer the frames that were waiting */
    }
    if (c->state == CONN_CLOSING && !buf_pending(&c->out))
        worker_half_close(c);
    uint32_t mask = 0;
    if (c->state == CONN_LINGER)
        mask = EPOLLIN;
    else if (c->state == CONN_OPEN && c->final_input == INPUT_OPEN && buf_pending(&c->out) < OUT_HIGH_WATERMARK)
        mask = EPOLLIN;
    if (buf_pending(&c->out))
        mask |= EPOLLOUT;
    set_interest(w, c, mask);
}

/* Half-closed: read and drop whatever the peer still sends until it closes. */
static void linger_read(struct worker *w, struct conn *c) {
    char sink[4096];
    ssize_t n = read(c->tag.fd, sink, sizeof sink);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        epoll_close(w, c);
}

static void conn_event(struct worker *w, struct conn *c, uint32_t events) {
    if (c->state == CONN_LINGER) {
        linger_read(w, c);
        return;
    }
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && c->state == CONN_OPEN && c->final_input == INPUT_OPEN &&
        conn_read(w, c) < 0)
        return;
    epoll_pump(w, c);
}

static int epoll_send_now(struct worker *w, struct conn *c) { return conn_flush(w, c); }

static void epoll_stop_accepting(struct worker *w) {
    unwatch(w, &w->shutdown);
    unwatch(w, &w->unix_sock);
    unwatch(w, &w->tcp);
}

static void epoll_run(struct worker *w) {
    struct epoll_event events[MAX_EVENTS];
    while (!w->draining || w->n_conns > 0) {
        int n = epoll_wait(w->epfd, events, MAX_EVENTS, worker_wait_ms(w));
        if (n > 0)
            worker_saw_events(w);
        int shutdown_seen = 0;
        for (int i = 0; i < n; i++) {
            struct poll_tag *tag = events[i].data.ptr;
            if (tag->kind == TAG_CONN)
                conn_event(w, (struct conn *)tag, events[i].events);
            else if (tag->kind == TAG_LISTENER)
                accept_ready(w, tag);
            else
                shutdown_seen = 1;
        }
        worker_tick(w, shutdown_seen);
    }
}

static void epoll_free(struct worker *w) {
    if (w->epfd >= 0)
        close(w->epfd);
}

const struct loop_ops loop_epoll = {
    .name = "epoll",
    .init = epoll_init,
    .run = epoll_run,
    .pump = epoll_pump,
    .close = epoll_close,
    .send_now = epoll_send_now,
    .stop_accepting = epoll_stop_accepting,
    .free = epoll_free,
};
