/* One event-loop thread: accepts on its listeners, reads frames, answers them, sends the
 * replies, closes idle connections and drains on shutdown, with the loop srv->loop names. */
#ifndef POSENC_SERVER_WORKER_H
#define POSENC_SERVER_WORKER_H

#include "server.h"

/* Prepare a worker (its loop watching its listeners and the shutdown eventfd). 0 or -1 (errno). */
int worker_init(struct worker *w, struct server *srv, int index, int tcp_fd, int unix_fd);
void *worker_run(void *worker);
void worker_free(struct worker *w);

#endif
