/* posenc-server: the binary-protocol front end (docs/protocol.md).
 *
 * Start-up: parse flags, open the listeners (SO_REUSEPORT TCP per thread, one Unix socket),
 * print one "ready" line, run one event loop per thread (pinned to the CPUs this process
 * may use). SIGTERM/SIGINT write to an eventfd every loop watches: they stop accepting,
 * answer what clients already sent, and exit within --drain-timeout-ms. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "listen.h"
#include "loop.h"
#include "posenc.h"
#include "server.h"
#include "worker.h"

static int shutdown_fd = -1;

static void on_signal(int sig) {
    (void)sig;
    uint64_t one = 1;
    ssize_t n = write(shutdown_fd, &one, sizeof one); /* async-signal-safe */
    (void)n;
}

static int install_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    if (sigaction(SIGPIPE, &sa, NULL) != 0)
        return -1;
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGTERM, &sa, NULL) | sigaction(SIGINT, &sa, NULL);
}

/* Let the process hold --max-connections sockets (plus listeners and spares): raise the soft
 * descriptor limit as far as needed and allowed, and say so when the hard limit is lower. */
static void raise_fd_limit(const struct server_config *cfg) {
    struct rlimit lim;
    rlim_t want = (rlim_t)cfg->max_connections + 16 + 4 * (rlim_t)cfg->threads;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= want)
        return;
    lim.rlim_cur = lim.rlim_max == RLIM_INFINITY || lim.rlim_max >= want ? want : lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
    if (lim.rlim_cur < want)
        fprintf(stderr, "posenc-server: --max-connections %u: only %llu file descriptors allowed (ulimit -Hn); "
                "clients beyond that are refused\n", cfg->max_connections, (unsigned long long)lim.rlim_cur);
}

/* Pin thread i to the i-th CPU this process may run on (when there is one per CPU). */
static void pin(pthread_t thread, int index, int n_threads) {
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < n_threads)
        return;
    for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; cpu++) {
        if (CPU_ISSET(cpu, &allowed) && seen++ == index) {
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            pthread_setaffinity_np(thread, sizeof one, &one);
            return;
        }
    }
}

/* The loop --io asks for; NULL, with the reason printed, when a forced uring cannot run. */
static const struct loop_ops *choose_loop(const struct server_config *cfg) {
    if (cfg->io == IO_EPOLL)
        return &loop_epoll;
#ifdef POSENC_HAVE_URING
    char why[256];
    if (loop_uring_available(why, sizeof why) == 0)
        return &loop_uring;
    fprintf(stderr, "posenc-server: --io %s: %s%s\n", cfg->io == IO_URING ? "uring" : "auto", why,
            cfg->io == IO_URING ? "" : "; serving with epoll");
#else
    if (cfg->io == IO_URING)
        fprintf(stderr, "posenc-server: --io uring: this posenc-server was built without liburing (epoll only)\n");
#endif
    return cfg->io == IO_URING ? NULL : &loop_epoll;
}

/* Listeners and workers; prints why and returns -1 on failure. */
static int start(struct server *srv, int *unix_fd, int *port) {
    const struct server_config *cfg = &srv->cfg;
    *unix_fd = cfg->unix_path[0] ? listen_unix(cfg) : -1;
    if (cfg->unix_path[0] && *unix_fd < 0)
        return -1;
    *port = cfg->port;
    if (cfg->tcp && cfg->port != 0 && listen_port_free(cfg) != 0)
        return -1;
    for (int i = 0; i < srv->n_workers; i++) {
        int tcp_fd = cfg->tcp ? listen_tcp(cfg, port) : -1;
        if (cfg->tcp && tcp_fd < 0)
            return -1;
        if (worker_init(&srv->workers[i], srv, i, tcp_fd, *unix_fd) != 0) {
            fprintf(stderr, "posenc-server: %s: %s\n", srv->loop->name, strerror(errno));
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    static struct server srv; /* large (table name registry): static storage */
    int rc = config_parse(&srv.cfg, argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    if (!posenc_isa()) {
        fprintf(stderr, "posenc-server: no kernel path: %s\n", posenc_dispatch_error());
        return 1;
    }
    srv.loop = choose_loop(&srv.cfg);
    if (!srv.loop)
        return 2;
    raise_fd_limit(&srv.cfg);
    table_names_init(&srv.names, srv.cfg.max_table_ids, srv.cfg.max_dim);
    srv.started_ms = monotonic_ms();
    srv.n_workers = srv.cfg.threads;
    srv.workers = calloc((size_t)srv.n_workers, sizeof *srv.workers);
    shutdown_fd = srv.shutdown_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (!srv.workers || shutdown_fd < 0 || install_signals() != 0) {
        fprintf(stderr, "posenc-server: start-up: %s\n", strerror(errno));
        return 1;
    }
    int unix_fd, port;
    if (start(&srv, &unix_fd, &port) != 0)
        return 1;
    /* Event loops never take signals: the main thread's handler wakes them through the eventfd. */
    sigset_t block, previous;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &previous);
    for (int i = 0; i < srv.n_workers; i++) {
        if (pthread_create(&srv.workers[i].thread, NULL, worker_run, &srv.workers[i]) != 0) {
            fprintf(stderr, "posenc-server: cannot start thread %d\n", i);
            return 1;
        }
        pin(srv.workers[i].thread, i, srv.n_workers);
    }
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    char tcp[96] = "off";
    if (srv.cfg.tcp && strchr(srv.cfg.host, ':'))
        snprintf(tcp, sizeof tcp, "[%s]:%d", srv.cfg.host, port);
    else if (srv.cfg.tcp)
        snprintf(tcp, sizeof tcp, "%s:%d", srv.cfg.host, port);
    printf("posenc-server ready tcp=%s unix=%s threads=%d isa=%s io=%s pid=%d\n", tcp,
           srv.cfg.unix_path[0] ? srv.cfg.unix_path : "off", srv.n_workers, posenc_isa(), srv.loop->name,
           (int)getpid());
    fflush(stdout);
    for (int i = 0; i < srv.n_workers; i++)
        pthread_join(srv.workers[i].thread, NULL);
    for (int i = 0; i < srv.n_workers; i++)
        worker_free(&srv.workers[i]);
    if (unix_fd >= 0) {
        close(unix_fd);
        unlink(srv.cfg.unix_path);
    }
    free(srv.workers);
    return 0;
}
