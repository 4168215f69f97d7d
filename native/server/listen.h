/* Listening sockets: TCP with SO_REUSEPORT (one per thread, the kernel spreads connections
 * over them) and one Unix socket that every thread polls. */
#ifndef POSENC_SERVER_LISTEN_H
#define POSENC_SERVER_LISTEN_H

#include "config.h"

/* A non-blocking TCP listener on cfg->host:*port with SO_REUSEPORT. *port 0 picks a free
 * port and stores it, so the next threads bind the same one. -1 with the error printed. */
int listen_tcp(const struct server_config *cfg, int *port);
/* 0 if nothing listens on cfg->host:cfg->port, else -1 with the error printed. */
int listen_port_free(const struct server_config *cfg);
/* A non-blocking Unix listener at cfg->unix_path, replacing a stale socket file there
 * (never another kind of file). -1 with the error printed. */
int listen_unix(const struct server_config *cfg);

#endif
