#include "listen.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define BACKLOG 4096

static int fail(const char *flag, const char *what, int fd) {
    fprintf(stderr, "posenc-server: --%s: %s: %s\n", flag, what, strerror(errno));
    if (fd >= 0)
        close(fd);
    return -1;
}

/* A TCP socket for cfg->host:port (SO_REUSEADDR, and SO_REUSEPORT when asked), bound; -1 printed. */
static int bound_tcp(const struct server_config *cfg, int port, int reuseport) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE};
    struct addrinfo *ai;
    char service[8];
    snprintf(service, sizeof service, "%d", port);
    int rc = getaddrinfo(cfg->host, service, &hints, &ai);
    if (rc != 0) {
        fprintf(stderr, "posenc-server: --host: '%s' is not a numeric IPv4/IPv6 address (%s)\n", cfg->host,
                gai_strerror(rc));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        freeaddrinfo(ai);
        return fail("host", "socket", -1);
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
        freeaddrinfo(ai);
        return fail("port", "SO_REUSEPORT", fd);
    }
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        char what[128];
        snprintf(what, sizeof what, "cannot listen on %s port %d", cfg->host, port);
        freeaddrinfo(ai);
        return fail("port", what, fd);
    }
    freeaddrinfo(ai);
    return fd;
}

int listen_port_free(const struct server_config *cfg) {
    /* Without SO_REUSEPORT this bind fails while anything listens there, including another
     * posenc-server, which our SO_REUSEPORT sockets would otherwise silently share the port with. */
    int fd = bound_tcp(cfg, cfg->port, 0);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

int listen_tcp(const struct server_config *cfg, int *port) {
    int fd = bound_tcp(cfg, *port, 1);
    if (fd < 0)
        return -1;
    if (listen(fd, BACKLOG) != 0)
        return fail("port", "listen", fd);
    struct sockaddr_storage bound;
    socklen_t len = sizeof bound;
    if (getsockname(fd, (struct sockaddr *)&bound, &len) != 0)
        return fail("port", "getsockname", fd);
    *port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                              : ((struct sockaddr_in *)&bound)->sin_port);
    return fd;
}
int listen_unix(const struct server_config *cfg) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", cfg->unix_path);
    struct stat st;
    if (lstat(cfg->unix_path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            errno = EEXIST;
            return fail("unix", "the path exists and is not a socket", -1);
        }
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int live = probe >= 0 && connect(probe, (struct sockaddr *)&addr, sizeof addr) == 0;
        if (probe >= 0)
            close(probe);
        if (live) {
            errno = EADDRINUSE;
            return fail("unix", "another server is listening there", -1);
        }
        unlink(cfg->unix_path); /* a previous server's socket */
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return fail("unix", "socket", -1);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0)
        return fail("unix", cfg->unix_path, fd);
    if (listen(fd, BACKLOG) != 0)
        return fail("unix", "listen", fd);
    return fd;
}
