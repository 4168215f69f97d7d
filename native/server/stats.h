/* The STATS reply: counters summed over threads, the connection gauge and every limit. */
#ifndef POSENC_SERVER_STATS_H
#define POSENC_SERVER_STATS_H

#include "buf.h"
#include "server.h"

int stats_json(struct server *srv, struct buf *json);

#endif
