#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "frame.h"
#include "loop.h"
#include "reply.h"

#define SWEEP_MS 250
#define DRAIN_POLL_MS 50

static uint64_t monotonic_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t monotonic_ms(void) { return monotonic_us() / 1000u; }

int worker_init(struct worker *w, struct server *srv, int index, int tcp_fd, int unix_fd) {
    memset(w, 0, sizeof *w);
    w->srv = srv;
    w->loop = srv->loop;
    w->index = index;
    w->epfd = -1;
    w->tcp = (struct poll_tag){TAG_LISTENER, tcp_fd};
    w->unix_sock = (struct poll_tag){TAG_LISTENER, unix_fd};
    w->shutdown = (struct poll_tag){TAG_SHUTDOWN, srv->shutdown_fd};
    w->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (w->spare_fd < 0)
        return -1;
    return w->loop->init(w);
}

void *worker_run(void *arg) {
    struct worker *w = arg;
    w->next_sweep_ms = monotonic_ms() + SWEEP_MS;
    w->loop->run(w);
    return NULL;
}

void worker_free(struct worker *w) {
    while (w->conns)
        w->loop->close(w, w->conns);
    w->loop->free(w);
    if (w->tcp.fd >= 0)
        close(w->tcp.fd);
    if (w->spare_fd >= 0)
        close(w->spare_fd);
    tables_release(&w->tables);
    buf_free(&w->values);
    buf_free(&w->rows);
    buf_free(&w->json);
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

void worker_refuse_pending(struct worker *w, int listener_fd) {
    if (w->spare_fd < 0)
        return;
    close(w->spare_fd);
    int fd = accept4(listener_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0)
        reject(w, fd);
    w->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

struct conn *worker_admit(struct worker *w, int fd, int tcp, size_t size) {
    if (atomic_fetch_add(&w->srv->connections, 1) >= w->srv->cfg.max_connections) {
        atomic_fetch_sub(&w->srv->connections, 1);
        reject(w, fd);
        return NULL;
    }
    if (tcp) {
        int one = 1; /* replies are whole frames: send them now */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    struct conn *c = calloc(1, size);
    if (!c) {
        close(fd);
        atomic_fetch_sub(&w->srv->connections, 1);
        return NULL;
    }
    c->tag = (struct poll_tag){TAG_CONN, fd};
    c->need = POSENC_HEADER_SIZE;
    c->last_active_ms = monotonic_ms();
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    w->n_conns++;
    counter_add(&w->counters.accepted, 1);
    return c;
}

void worker_forget(struct worker *w, struct conn *c) {
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    buf_free(&c->in);
    buf_free(&c->out);
    w->n_conns--;
    atomic_fetch_sub(&w->srv->connections, 1);
    counter_add(&w->counters.closed, 1);
}

void worker_half_close(struct conn *c) {
    shutdown(c->tag.fd, SHUT_WR);
    c->state = CONN_LINGER;
    c->linger_until_ms = monotonic_ms() + LINGER_MS;
}

int worker_wait_ms(const struct worker *w) {
    const uint64_t busy_poll_us = w->srv->cfg.busy_poll_us;
    if (busy_poll_us && monotonic_us() - w->last_event_us < busy_poll_us)
        return 0; /* spin: traffic was seen moments ago */
    return w->draining ? DRAIN_POLL_MS : SWEEP_MS;
}

void worker_saw_events(struct worker *w) {
    if (w->srv->cfg.busy_poll_us)
        w->last_event_us = monotonic_us();
}

/* Shutdown: stop accepting. Connections go on being served as before (so every request a
 * client wrote before the signal is read and answered, even what still sat in the kernel's
 * queues or behind a paused reader); sweep() finishes each one once it has gone quiet. */
static void begin_drain(struct worker *w) {
    w->draining = 1;
    w->drain_started_ms = monotonic_ms();
    w->drain_deadline_ms = w->drain_started_ms + w->srv->cfg.drain_timeout_ms;
    w->loop->stop_accepting(w); /* the Unix listener is shared: the main thread closes it */
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
        if (w->loop->send_now(w, c) < 0)
            return;
    }
    discard_input(c);
    w->loop->close(w, c);
}

/* The idle timeout: an open connection is told and half-closed; one still closing (its client
 * reads nothing, not even that frame) is dropped. */
static void close_idle(struct worker *w, struct conn *c) {
    if (c->state != CONN_OPEN) {
        discard_input(c);
        w->loop->close(w, c);
        return;
    }
    char why[128];
    counter_add(&w->counters.idle_closed, 1);
    snprintf(why, sizeof why, "connection: closed after %u ms without traffic (--idle-timeout-ms)",
             w->srv->cfg.idle_timeout_ms);
    say_why_closing(w, c, POSENC_STATUS_IDLE_TIMEOUT, why);
    w->loop->pump(w, c);
}

/* While draining: nothing received, unanswered or unsent for DRAIN_QUIET_MS. */
static int drained(const struct worker *w, const struct conn *c, uint64_t now) {
    uint64_t since = c->last_active_ms > w->drain_started_ms ? c->last_active_ms : w->drain_started_ms;
    return c->state == CONN_OPEN && !buf_pending(&c->in) && !conn_unsent(c) && now - since >= DRAIN_QUIET_MS;
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
                w->loop->close(w, c);
        } else if (w->draining && now >= w->drain_deadline_ms) {
            close_at_deadline(w, c);
        } else if (w->draining && drained(w, c, now)) {
            c->state = CONN_CLOSING; /* everything answered and sent: half-close, EOF for the client */
            w->loop->pump(w, c);
        } else if (now - c->last_active_ms >= idle) {
            close_idle(w, c);
        }
    }
}

void worker_tick(struct worker *w, int shutdown_seen) {
    if (shutdown_seen && !w->draining) /* after the batch: draining may close connections it names */
        begin_drain(w);
    uint64_t now = monotonic_ms();
    tables_check(&w->tables, w->srv->cfg.shm_dir, now);
    if (now >= w->next_sweep_ms || w->draining) {
        sweep(w, now);
        w->next_sweep_ms = now + SWEEP_MS;
    }
}
