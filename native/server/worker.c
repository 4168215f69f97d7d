#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "frame.h"
#include "reply.h"

#define MAX_EVENTS 256
#define ACCEPTS_PER_EVENT 64
#define SWEEP_MS 250

static uint64_t monotonic_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t monotonic_ms(void) { return monotonic_us() / 1000u; }

static int watch(struct worker *w, struct poll_tag *tag, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.ptr = tag};
    return epoll_ctl(w->epfd, EPOLL_CTL_ADD, tag->fd, &ev);
}

static void unwatch(struct worker *w, struct poll_tag *tag) {
    if (tag->fd >= 0)
        epoll_ctl(w->epfd, EPOLL_CTL_DEL, tag->fd, NULL);
}

int worker_init(struct worker *w, struct server *srv, int index, int tcp_fd, int unix_fd) {
    memset(w, 0, sizeof *w);
    w->srv = srv;
    w->index = index;
    w->tcp = (struct poll_tag){TAG_LISTENER, tcp_fd};
    w->unix_sock = (struct poll_tag){TAG_LISTENER, unix_fd};
    w->shutdown = (struct poll_tag){TAG_SHUTDOWN, srv->shutdown_fd};
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    w->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (w->epfd < 0 || w->spare_fd < 0)
        return -1;
    if ((tcp_fd >= 0 && watch(w, &w->tcp, EPOLLIN) != 0) ||
        (unix_fd >= 0 && watch(w, &w->unix_sock, EPOLLIN | EPOLLEXCLUSIVE) != 0) ||
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

static void conn_close(struct worker *w, struct conn *c) {
    close(c->tag.fd); /* also leaves the epoll set */
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    buf_free(&c->in);
    buf_free(&c->out);
    free(c);
    w->n_conns--;
    atomic_fetch_sub(&w->srv->connections, 1);
    counter_add(&w->counters.closed, 1);
}

/* Tell a connection over --max-connections why, in one best-effort send, and close it. */
static void reject(struct worker *w, int fd) {
    char text[96];
    uint8_t frame[POSENC_HEADER_SIZE + sizeof text];
    int n = snprintf(text, sizeof text, "connections: the server cannot take more (--max-connections %u, or "
                     "out of file descriptors)", w->srv->cfg.max_connections);
    size_t size = error_frame(frame, 0, 0, POSENC_STATUS_TOO_MANY_CONNECTIONS, text, (size_t)n);
    ssize_t sent = send(fd, frame, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)sent; /* the client may already be gone; nothing else to tell it */
    close(fd);
    counter_add(&w->counters.rejected, 1);
    counter_add(&w->counters.errors[POSENC_STATUS_TOO_MANY_CONNECTIONS], 1);
}

static void accept_ready(struct worker *w, struct poll_tag *listener) {
    for (int i = 0; i < ACCEPTS_PER_EVENT; i++) {
        int fd = accept4(listener->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE) && w->spare_fd >= 0) {
            /* out of descriptors: refuse the client with the spare one rather than leave it
             * pending, which would wake this loop again and again */
            close(w->spare_fd);
            fd = accept4(listener->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd >= 0)
                reject(w, fd);
            w->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
            continue;
        }
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return; /* EAGAIN: another thread took it, or none are left */
        }
        if (atomic_fetch_add(&w->srv->connections, 1) >= w->srv->cfg.max_connections) {
            atomic_fetch_sub(&w->srv->connections, 1);
            reject(w, fd);
            continue;
        }
        if (listener == &w->tcp) {
            int one = 1; /* replies are whole frames: send them now */
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        struct conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            atomic_fetch_sub(&w->srv->connections, 1);
            continue;
        }
        c->tag = (struct poll_tag){TAG_CONN, fd};
        c->need = POSENC_HEADER_SIZE;
        c->last_active_ms = monotonic_ms();
        c->epoll_mask = EPOLLIN;
        if (watch(w, &c->tag, EPOLLIN) != 0) {
            close(fd);
            free(c);
            atomic_fetch_sub(&w->srv->connections, 1);
            continue;
        }
        c->next = w->conns;
        if (w->conns)
            w->conns->prev = c;
        w->conns = c;
        w->n_conns++;
        counter_add(&w->counters.accepted, 1);
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
    conn_close(w, c);
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
            conn_close(w, c);
            return -1;
        }
    }
    buf_settle(&c->out, BUF_KEEP_BYTES);
    buf_settle(&c->in, BUF_KEEP_BYTES);
    return 0;
}

/* After input arrived or output drained: answer, send, and choose what to wait for next. */
static void conn_pump(struct worker *w, struct conn *c) {
    for (;;) {
        enum process_result r = conn_process(w, c);
        if (r == PROCESS_IDLE && c->final_input == INPUT_EOF) { /* everything that arrived is answered */
            size_t partial = buf_pending(&c->in);
            if (partial) {
                char what[160];
                frame_describe_unanswered(c->in.data + c->in.pos, partial, what, sizeof what);
                reply_error(w, c, 0, 0, POSENC_STATUS_BAD_FRAME, "length: the stream ended after %s", what);
            }
            c->state = CONN_CLOSING;
        }
        if (conn_flush(w, c) < 0)
            return;
        if (r != PROCESS_PAUSED || buf_pending(&c->out))
            break; /* paused and fully sent: answer the frames that were waiting */
    }
    uint32_t mask = 0;
    if (c->state == CONN_CLOSING && !buf_pending(&c->out)) {
        shutdown(c->tag.fd, SHUT_WR); /* the peer sees our last frame, then EOF */
        c->state = CONN_LINGER;
        c->linger_until_ms = monotonic_ms() + LINGER_MS;
    }
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
        conn_close(w, c);
}

static void conn_event(struct worker *w, struct conn *c, uint32_t events) {
    if (c->state == CONN_LINGER) {
        linger_read(w, c);
        return;
    }
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && c->state == CONN_OPEN && c->final_input == INPUT_OPEN &&
        conn_read(w, c) < 0)
        return;
    conn_pump(w, c);
}

/* Shutdown: stop accepting. Connections go on being served as before (so every request a
 * client wrote before the signal is read and answered, even what still sat in the kernel's
 * queues or behind a paused reader); sweep() finishes each one once it has gone quiet. */
static void begin_drain(struct worker *w) {
    w->draining = 1;
    w->drain_started_ms = monotonic_ms();
    w->drain_deadline_ms = w->drain_started_ms + w->srv->cfg.drain_timeout_ms;
    unwatch(w, &w->shutdown);
    unwatch(w, &w->unix_sock); /* shared: the main thread closes it */
    unwatch(w, &w->tcp);
    if (w->tcp.fd >= 0)
        close(w->tcp.fd);
    w->tcp.fd = -1;
}

/* Read and drop what the peer sent, so that close() ends the stream with FIN after our
 * queued bytes, not with a RST that would discard them. */
static void discard_input(struct conn *c) {
    char sink[4096];
    for (int i = 0; i < 256 && read(c->tag.fd, sink, sizeof sink) > 0; i++) {
    }
}

/* Tell an open connection why the server ends it: an error frame after the replies already
 * queued, then the usual half-close (CONN_CLOSING). */
static void say_why_closing(struct worker *w, struct conn *c, uint8_t status, const char *why) {
    char what[160];
    frame_describe_unanswered(c->in.data + c->in.pos, buf_pending(&c->in), what, sizeof what);
    reply_error(w, c, 0, 0, status, "%s; unanswered: %s", why, what);
}

/* The drain deadline: say why if the connection is still open, one attempt to send, close. */
static void close_at_deadline(struct worker *w, struct conn *c) {
    if (c->state == CONN_OPEN) {
        char why[128];
        snprintf(why, sizeof why, "server: shutting down, and the drain timeout (--drain-timeout-ms %u) has passed",
                 w->srv->cfg.drain_timeout_ms);
        say_why_closing(w, c, POSENC_STATUS_SHUTTING_DOWN, why);
        if (conn_flush(w, c) < 0)
            return;
    }
    discard_input(c);
    conn_close(w, c);
}

/* The idle timeout: an open connection is told and half-closed; one still closing (its client
 * reads nothing, not even that frame) is dropped. */
static void close_idle(struct worker *w, struct conn *c) {
    if (c->state != CONN_OPEN) {
        discard_input(c);
        conn_close(w, c);
        return;
    }
    char why[128];
    counter_add(&w->counters.idle_closed, 1);
    snprintf(why, sizeof why, "connection: closed after %u ms without traffic (--idle-timeout-ms)",
             w->srv->cfg.idle_timeout_ms);
    say_why_closing(w, c, POSENC_STATUS_IDLE_TIMEOUT, why);
    conn_pump(w, c);
}

/* While draining: nothing received, unanswered or unsent for DRAIN_QUIET_MS. */
static int drained(const struct worker *w, const struct conn *c, uint64_t now) {
    uint64_t since = c->last_active_ms > w->drain_started_ms ? c->last_active_ms : w->drain_started_ms;
    return c->state == CONN_OPEN && !buf_pending(&c->in) && !buf_pending(&c->out) && now - since >= DRAIN_QUIET_MS;
}

/* Close connections that were silent too long and lingering ones whose time is up; while
 * draining, finish quiet connections and, at the deadline, every one. */
static void sweep(struct worker *w, uint64_t now) {
    struct conn *next;
    const uint64_t idle = w->srv->cfg.idle_timeout_ms;
    for (struct conn *c = w->conns; c; c = next) {
        next = c->next;
        if (c->state == CONN_LINGER) {
            if (now >= c->linger_until_ms || (w->draining && now >= w->drain_deadline_ms))
                conn_close(w, c);
        } else if (w->draining && now >= w->drain_deadline_ms) {
            close_at_deadline(w, c);
        } else if (w->draining && drained(w, c, now)) {
            c->state = CONN_CLOSING; /* everything answered and sent: half-close, EOF for the client */
            conn_pump(w, c);
        } else if (now - c->last_active_ms >= idle) {
            close_idle(w, c);
        }
    }
}

void *worker_run(void *arg) {
    struct worker *w = arg;
    struct epoll_event events[MAX_EVENTS];
    const uint64_t busy_poll_us = w->srv->cfg.busy_poll_us;
    uint64_t last_event_us = 0;
    w->next_sweep_ms = monotonic_ms() + SWEEP_MS;
    while (!w->draining || w->n_conns > 0) {
        int timeout = w->draining ? 50 : SWEEP_MS;
        if (busy_poll_us && monotonic_us() - last_event_us < busy_poll_us)
            timeout = 0; /* spin: traffic was seen moments ago */
        int n = epoll_wait(w->epfd, events, MAX_EVENTS, timeout);
        if (n > 0 && busy_poll_us)
            last_event_us = monotonic_us();
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
        if (shutdown_seen && !w->draining) /* after the batch: draining may close connections it names */
            begin_drain(w);
        uint64_t now = monotonic_ms();
        tables_check(&w->tables, w->srv->cfg.shm_dir, now);
        if (now >= w->next_sweep_ms || w->draining) {
            sweep(w, now);
            w->next_sweep_ms = now + SWEEP_MS;
        }
    }
    return NULL;
}

void worker_free(struct worker *w) {
    while (w->conns)
        conn_close(w, w->conns);
    if (w->tcp.fd >= 0)
        close(w->tcp.fd);
    if (w->epfd >= 0)
        close(w->epfd);
    if (w->spare_fd >= 0)
        close(w->spare_fd);
    tables_release(&w->tables);
    buf_free(&w->values);
    buf_free(&w->rows);
    buf_free(&w->json);
}
