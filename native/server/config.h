/* Server settings: where to listen, and the limits every request and connection is held to.
 * All come from command-line flags (the position limit also from $POSENC_MAX_ABS_POSITION, the
 * table store from $POSENC_SHM_DIR) and all are reported by STATS. */
#ifndef POSENC_SERVER_CONFIG_H
#define POSENC_SERVER_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* --io: which event loop serves connections. */
enum io_choice { IO_AUTO, IO_URING, IO_EPOLL };

struct server_config {
    char host[64];               /* --host; TCP is off with --no-tcp */
    int port;                    /* --port (0 = any free port, printed when ready) */
    int tcp;
    char unix_path[108];         /* --unix PATH ("" = no Unix socket) */
    int threads;                 /* --threads (0 = one per CPU this process may run on) */
    char shm_dir[PATH_MAX];      /* --shm-dir, else $POSENC_SHM_DIR, else /dev/shm */
    uint32_t max_frame;          /* --max-frame-bytes: largest request frame */
    uint32_t max_positions;      /* --max-positions: per request */
    uint64_t max_response;       /* --max-response-bytes: rows*width*itemsize of one reply */
    uint32_t max_connections;    /* --max-connections: open at once, all threads together */
    uint32_t idle_timeout_ms;    /* --idle-timeout-ms: a silent connection is closed after this */
    uint32_t drain_timeout_ms;   /* --drain-timeout-ms: shutdown waits this long for replies to go out */
    uint32_t max_dim;            /* --max-dim: widest inline-spec row */
    uint64_t max_abs_position;   /* --max-abs-position (else $POSENC_MAX_ABS_POSITION): |p| bound for
                                  * inline specs, at most 2^53 */
    uint32_t busy_poll_us;       /* --busy-poll-us: keep polling this long after an event before sleeping */
    uint32_t max_table_ids;      /* --max-table-ids: distinct table names this process gives ids to */
    enum io_choice io;           /* --io auto|uring|epoll */
};

/* Fill `cfg` from argv. Returns 0 to run, 1 when --help/--version printed, -1 on a bad flag
 * (the message names it and is already printed to stderr). */
int config_parse(struct server_config *cfg, int argc, char **argv);

/* A --max-abs-position text as its value (see config.c); -1 with the reason in `why` if refused. */
int parse_max_abs(const char *text, uint64_t *value, char *why, size_t whylen);

#endif
