#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posenc_proto.h"
#include "tables.h"
#include "version.h"

/* Flags that take an unsigned integer: where it goes and its bounds. */
struct number_flag {
    const char *name;
    size_t offset; /* in struct server_config */
    size_t size;   /* 4 or 8 bytes */
    uint64_t lo, hi;
};

#define FIELD(f) offsetof(struct server_config, f), sizeof(((struct server_config *)0)->f)
static const struct number_flag NUMBER_FLAGS[] = {
    {"port", FIELD(port), 0, 65535},
    {"threads", FIELD(threads), 0, 1024},
    {"max-frame-bytes", FIELD(max_frame), POSENC_HEADER_SIZE, 1u << 30},
    {"max-positions", FIELD(max_positions), 1, 1u << 27},
    {"max-response-bytes", FIELD(max_response), 1, 1ull << 32},
    {"max-connections", FIELD(max_connections), 1, 1u << 20},
    {"idle-timeout-ms", FIELD(idle_timeout_ms), 1, 1u << 31},
    {"drain-timeout-ms", FIELD(drain_timeout_ms), 0, 1u << 31},
    {"max-dim", FIELD(max_dim), 1, 1u << 20},
    {"busy-poll-us", FIELD(busy_poll_us), 0, 1000000},
    {"max-table-ids", FIELD(max_table_ids), 1, TABLE_IDS_MAX},
};
#define N_NUMBER_FLAGS (sizeof NUMBER_FLAGS / sizeof NUMBER_FLAGS[0])

/* getopt values: the number flags are OPT_NUMBER + their index. */
enum { OPT_HOST = 256, OPT_NO_TCP, OPT_UNIX, OPT_SHM_DIR, OPT_MAX_ABS, OPT_IO, OPT_HELP, OPT_VERSION, OPT_NUMBER = 512 };

static const struct option TEXT_OPTIONS[] = {
    {"host", required_argument, 0, OPT_HOST},
    {"no-tcp", no_argument, 0, OPT_NO_TCP},
    {"unix", required_argument, 0, OPT_UNIX},
    {"shm-dir", required_argument, 0, OPT_SHM_DIR},
    {"max-abs-position", required_argument, 0, OPT_MAX_ABS},
    {"io", required_argument, 0, OPT_IO},
    {"help", no_argument, 0, OPT_HELP},
    {"version", no_argument, 0, OPT_VERSION},
};
#define N_TEXT_OPTIONS (sizeof TEXT_OPTIONS / sizeof TEXT_OPTIONS[0])

static void usage(FILE *out) {
    fprintf(out,
            "usage: posenc-server [flags]\n"
            "Serves the posenc binary protocol (docs/protocol.md) over TCP and/or a Unix socket.\n"
            "  --host ADDR              TCP address (default 127.0.0.1)\n"
            "  --port N                 TCP port (default %d; 0 = any free port)\n"
            "  --no-tcp                 no TCP listener (needs --unix)\n"
            "  --unix PATH              also listen on this Unix socket\n"
            "  --threads N              event-loop threads (default: one per usable CPU)\n"
            "  --shm-dir DIR            table store (default $POSENC_SHM_DIR or /dev/shm)\n"
            "  --max-frame-bytes N      largest request frame (default 2097152)\n"
            "  --max-positions N        positions per request (default 65536)\n"
            "  --max-response-bytes N   row bytes per reply (default 67108864)\n"
            "  --max-connections N      open connections (default 10000)\n"
            "  --idle-timeout-ms N      close silent connections (default 300000)\n"
            "  --drain-timeout-ms N     shutdown grace for in-flight replies (default 5000)\n"
            "  --max-dim N              widest inline-spec row (default 65536)\n"
            "  --max-abs-position X     |position| bound for inline specs: an integer in [1, 2^53],\n"
            "                           as digits or exponent form, e.g. 1e13 (default\n"
            "                           $POSENC_MAX_ABS_POSITION, else 2^53 = 9007199254740992)\n"
            "  --max-table-ids N        distinct table names given ids, for the process's life\n"
            "                           (default and most 4096)\n"
            "  --io auto|uring|epoll    event loop (default auto: io_uring when this build has it and\n"
            "                           the kernel allows it, else epoll); a refused uring exits 2\n"
            "  --busy-poll-us N         after traffic, poll this long before sleeping (default 0):\n"
            "                           lower latency on VMs where waking a sleeping CPU is slow,\n"
            "                           at the price of a busy CPU\n"
            "Prints one 'posenc-server ready ...' line on stdout once it accepts connections;\n"
            "SIGTERM/SIGINT drain in-flight requests and exit.\n",
            POSENC_DEFAULT_PORT);
}

static int cpus_available(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

/* Parse and store a number flag; prints the error naming the flag. */
static int set_number(struct server_config *cfg, const struct number_flag *flag, const char *text) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || *end || text[0] == '-' || v < flag->lo || v > flag->hi) {
        fprintf(stderr, "posenc-server: --%s: must be an integer in [%llu, %llu], got '%s'\n", flag->name,
                (unsigned long long)flag->lo, (unsigned long long)flag->hi, text);
        return -1;
    }
    char *field = (char *)cfg + flag->offset;
    if (flag->size == sizeof(uint64_t)) {
        uint64_t wide = v;
        memcpy(field, &wide, sizeof wide);
    } else {
        uint32_t narrow = (uint32_t)v; /* int and uint32_t fields: the bounds keep it below 2^31 */
        memcpy(field, &narrow, sizeof narrow);
    }
    return 0;
}

static int copy_text(const char *flag, const char *text, char *dst, size_t cap) {
    if (strlen(text) == 0 || strlen(text) >= cap) {
        fprintf(stderr, "posenc-server: --%s: must be 1..%zu characters\n", flag, cap - 1);
        return -1;
    }
    strcpy(dst, text);
    return 0;
}

/* The value of --max-abs-position / POSENC_MAX_ABS_POSITION, by the rules of
 * service/posenc/limits.py parse_max_abs_position (the same texts accepted, the same words):
 * decimal digits, or digits with an optional fraction and an exponent, whose value is an integer
 * in [1, 2^53]. Exact decimal arithmetic on the digits (strtoull, never strtod), so
 * 9007199254740993 and 9.007199254740993e15 are refused rather than rounded to 2^53.
 * Returns 0, or -1 with the reason (without the setting's name) in `why`. */
#define MAX_EXACT_POSITION 9007199254740992ull
#define MAX_ABS_SPELLING_CHARS 64
#define MAX_ABS_DIGITS 16 /* digits of 2^53 */
int parse_max_abs(const char *text, uint64_t *value, char *why, size_t whylen) {
    size_t len = strlen(text);
    const char *p = text, *whole = p;
    while (*p >= '0' && *p <= '9')
        p++;
    size_t n_whole = (size_t)(p - whole), n_fraction = 0;
    const char *fraction = p;
    long exponent = 0;
    int syntax = n_whole > 0 && len <= MAX_ABS_SPELLING_CHARS;
    if (syntax && *p) {
        if (*p == '.') {
            fraction = ++p;
            while (*p >= '0' && *p <= '9')
                p++;
            n_fraction = (size_t)(p - fraction);
            syntax = n_fraction > 0;
        }
        syntax = syntax && (*p == 'e' || *p == 'E');
        if (syntax) {
            p++;
            int negative = *p == '-';
            if (*p == '-' || *p == '+')
                p++;
            syntax = *p >= '0' && *p <= '9';
            for (; *p >= '0' && *p <= '9'; p++) /* at most 62 digits: capping keeps every outcome */
                exponent = exponent > 1000 ? exponent : exponent * 10 + (*p - '0');
            syntax = syntax && *p == '\0';
            exponent = negative ? -exponent : exponent;
        }
    }
    /* the mantissa's digits, whole then fraction, without leading zeros */
    char mantissa[MAX_ABS_SPELLING_CHARS + 1];
    size_t n = 0;
    for (size_t i = 0; syntax && i < n_whole + n_fraction; i++) {
        char d = i < n_whole ? whole[i] : fraction[i - n_whole];
        if (n || d != '0')
            mantissa[n++] = d;
    }
    long shift = exponent - (long)n_fraction; /* the value is mantissa * 10^shift */
    if (syntax && n && shift < 0) {
        size_t cut = (size_t)-shift;
        if (cut > n) {
            syntax = 0; /* a value below 1 */
        } else {
            for (size_t i = n - cut; i < n; i++)
                syntax = syntax && mantissa[i] == '0'; /* otherwise a fraction */
            n -= cut;
        }
        shift = 0;
    }
    char shown[48]; /* the text as messages show it: at most 40 characters, as in Python */
    snprintf(shown, sizeof shown, len <= 40 ? "%s" : "%.37s...", text);
    if (!syntax || n == 0) { /* not the syntax, zero, or not an integer */
        snprintf(why, whylen,
                 "must be an integer from 1 to %llu (2^53), written as decimal digits (1700000000000) or in "
                 "exponent form (1e13, 9.007199254740992e15); got '%s'", MAX_EXACT_POSITION, shown);
        return -1;
    }
    unsigned long long v = ULLONG_MAX;
    if (n + (size_t)shift <= MAX_ABS_DIGITS) { /* else at least 10^16, over 2^53 */
        memset(mantissa + n, '0', (size_t)shift);
        mantissa[n + (size_t)shift] = '\0';
        errno = 0;
        v = strtoull(mantissa, NULL, 10);
        v = errno ? ULLONG_MAX : v;
    }
    if (v > MAX_EXACT_POSITION) {
        snprintf(why, whylen,
                 "must be at most %llu (2^53), got '%s': positions are int64 on the wire, but above 2^53 not "
                 "every integer has a float64 value, so exactness could not be promised",
                 MAX_EXACT_POSITION, shown);
        return -1;
    }
    *value = v;
    return 0;
}

static int set_max_abs(struct server_config *cfg, const char *name, const char *text) {
    char why[320];
    if (parse_max_abs(text, &cfg->max_abs_position, why, sizeof why) != 0) {
        fprintf(stderr, "posenc-server: %s: %s\n", name, why);
        return -1;
    }
    return 0;
}

static int set_io(struct server_config *cfg, const char *text) {
    static const char *const NAMES[] = {[IO_AUTO] = "auto", [IO_URING] = "uring", [IO_EPOLL] = "epoll"};
    for (int i = IO_AUTO; i <= IO_EPOLL; i++) {
        if (strcmp(text, NAMES[i]) == 0) {
            cfg->io = (enum io_choice)i;
            return 0;
        }
    }
    fprintf(stderr, "posenc-server: --io: must be auto, uring or epoll, got '%s'\n", text);
    return -1;
}

static void defaults(struct server_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    strcpy(cfg->host, "127.0.0.1");
    cfg->port = POSENC_DEFAULT_PORT;
    cfg->tcp = 1;
    const char *env = getenv("POSENC_SHM_DIR");
    snprintf(cfg->shm_dir, sizeof cfg->shm_dir, "%s", env && *env ? env : "/dev/shm");
    cfg->max_frame = 2u << 20;
    cfg->max_positions = 65536;
    cfg->max_response = 64u << 20;
    cfg->max_connections = 10000;
    cfg->idle_timeout_ms = 300000;
    cfg->drain_timeout_ms = 5000;
    cfg->max_dim = 65536;
    cfg->max_abs_position = MAX_EXACT_POSITION;
    cfg->max_table_ids = TABLE_IDS_MAX;
}

int config_parse(struct server_config *cfg, int argc, char **argv) {
    struct option options[N_TEXT_OPTIONS + N_NUMBER_FLAGS + 1];
    memcpy(options, TEXT_OPTIONS, sizeof TEXT_OPTIONS);
    for (size_t i = 0; i < N_NUMBER_FLAGS; i++)
        options[N_TEXT_OPTIONS + i] = (struct option){NUMBER_FLAGS[i].name, required_argument, 0, OPT_NUMBER + (int)i};
    options[N_TEXT_OPTIONS + N_NUMBER_FLAGS] = (struct option){0, 0, 0, 0};
    defaults(cfg);
    optind = 1;
    int opt, max_abs_given = 0;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        int rc = 0;
        if (opt >= OPT_NUMBER && opt < OPT_NUMBER + (int)N_NUMBER_FLAGS) {
            rc = set_number(cfg, &NUMBER_FLAGS[opt - OPT_NUMBER], optarg);
        } else {
            switch (opt) {
            case OPT_HOST: rc = copy_text("host", optarg, cfg->host, sizeof cfg->host); break;
            case OPT_NO_TCP: cfg->tcp = 0; break;
            case OPT_UNIX: rc = copy_text("unix", optarg, cfg->unix_path, sizeof cfg->unix_path); break;
            case OPT_SHM_DIR: rc = copy_text("shm-dir", optarg, cfg->shm_dir, sizeof cfg->shm_dir); break;
            case OPT_MAX_ABS:
                rc = set_max_abs(cfg, "--max-abs-position", optarg);
                max_abs_given = 1;
                break;
            case OPT_IO: rc = set_io(cfg, optarg); break;
            case OPT_HELP: usage(stdout); return 1;
            case OPT_VERSION:
                printf("posenc-server %s (protocol %d)\n", POSENC_SERVER_VERSION, POSENC_PROTO_VERSION);
                return 1;
            default: usage(stderr); return -1;
            }
        }
        if (rc)
            return -1;
    }
    const char *env = getenv("POSENC_MAX_ABS_POSITION"); /* the flag wins over the environment */
    if (!max_abs_given && env && set_max_abs(cfg, "POSENC_MAX_ABS_POSITION", env) != 0)
        return -1;
    if (optind < argc) {
        fprintf(stderr, "posenc-server: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (!cfg->tcp && !cfg->unix_path[0]) {
        fprintf(stderr, "posenc-server: --no-tcp: needs --unix PATH, or there is nothing to listen on\n");
        return -1;
    }
    if (cfg->threads == 0)
        cfg->threads = cpus_available();
    return 0;
}
