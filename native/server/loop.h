/* The event loops, chosen at start (--io): epoll (loop_epoll.c, always built) and io_uring
 * (loop_uring.c, built when liburing is there). A loop does the I/O; worker.c holds what they
 * share: admitting and forgetting connections, half-close, the idle/linger/drain sweep. */
#ifndef POSENC_SERVER_LOOP_H
#define POSENC_SERVER_LOOP_H

#include <stddef.h>

#include "server.h"

struct loop_ops {
    const char *name; /* "epoll" or "uring": the ready line, STATS and the log say it */
    /* Set up w->epfd or w->uring and watch the listeners and the shutdown eventfd; 0, or -1
     * with errno set. Runs on the main thread, before the worker's thread starts. */
    int (*init)(struct worker *w);
    /* Serve until the worker has drained (w->draining and no connections left). */
    void (*run)(struct worker *w);
    /* Input arrived, output drained or the state changed: answer what is complete, send, and
     * choose what to wait for next. */
    void (*pump)(struct worker *w, struct conn *c);
    /* End the connection now (worker_forget, the descriptor closed, its memory released). */
    void (*close)(struct worker *w, struct conn *c);
    /* One attempt, now, to send what is queued (the drain deadline); -1 if that closed it. */
    int (*send_now)(struct worker *w, struct conn *c);
    /* Stop watching the listeners and the shutdown eventfd (the drain has begun). */
    void (*stop_accepting)(struct worker *w);
    /* Release the loop's own resources, once every connection is closed. */
    void (*free)(struct worker *w);
};

extern const struct loop_ops loop_epoll;
#ifdef POSENC_HAVE_URING
extern const struct loop_ops loop_uring;
/* 0 if io_uring with everything loop_uring needs can run here, else -1 and why in `why`. */
int loop_uring_available(char *why, size_t cap);
#endif

/* --- shared by the loops (worker.c) --- */

/* A new connection on `fd` (accepted from a TCP listener when `tcp`): counted and linked, or
 * refused over --max-connections (told why, closed) or when memory is short; `size` bytes
 * (a loop's connection struct, starting with struct conn) are zeroed. NULL when refused. */
struct conn *worker_admit(struct worker *w, int fd, int tcp, size_t size);
/* Out of descriptors with a client pending on `listener_fd`: accept it with the spare
 * descriptor and refuse it, rather than leave it pending (which would wake the loop again). */
void worker_refuse_pending(struct worker *w, int listener_fd);
/* Unlink a closing connection from the worker and count it; its buffers are freed. The loop
 * closes the descriptor and frees the struct. */
void worker_forget(struct worker *w, struct conn *c);
/* Everything is sent on a CONN_CLOSING connection: shut down our side (the peer reads our last
 * frame, then EOF) and linger until the peer closes. */
void worker_half_close(struct conn *c);
/* How long the loop may sleep: 0 while busy-polling after recent traffic, else until the next sweep. */
int worker_wait_ms(const struct worker *w);
/* The loop saw events (for --busy-poll-us). */
void worker_saw_events(struct worker *w);
/* After each batch of events: begin the drain once `shutdown_seen`, look for replaced tables,
 * and sweep idle, lingering and drained connections when due. */
void worker_tick(struct worker *w, int shutdown_seen);

#endif
