/*
 * fold_fault: one fault-injection case (issue 16).
 *
 * The program is its own launcher: it forks the ranks, serves their out-of-band
 * allgather over one socket pair each (fold_init's params.oob), so that no launcher
 * takes the job down when a rank dies, and injects the fault itself:
 *
 *   kill   every rank runs the same loop of collectives (random sizes, same on every
 *          rank); once each has finished a few calls and after a random delay, the
 *          victim gets SIGKILL, most likely in the middle of a call;
 *   stop   the same with SIGSTOP (a hung peer); the victim gets SIGCONT once every
 *          survivor has failed (or the bound has passed).
 *
 * Once a rank is known dead or stopped, every allgather (pending or later) fails, as a
 * fault-aware launcher would fail a fence; fold_finalize then still cleans up and
 * returns.
 *
 * A survivor passes when its collective returns FOLD_ERR_PEER_FAILED or
 * FOLD_ERR_TIMEOUT within 2 x FOLD_TIMEOUT of the fault, fold's error message names
 * another rank and the step, fold_finalize returns, the process exits on its own, and
 * no /dev/shm segment of the job is left. A resumed (stop) victim must exit on its
 * own too. Every completed call is checked against the expected sum.
 *
 * Output: one "rank" line per rank and a closing "RESULT key=value ..." line that
 * tests/fault/run.sh tabulates; exit status 0 when the case passed, 1 when not, 2 on
 * a usage or set-up error.
 */
#define _GNU_SOURCE
#include <fold/fold.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS   64
#define MSG_LEN     512
#define EXIT_GRACE  20.0   /* seconds after the bound for finalize and exit */

typedef struct rank_state {
    volatile int    init_status;   /* 1 until fold_init returned */
    volatile int    calls;         /* calls completed and checked */
    volatile int    in_call;       /* inside a collective now */
    volatile int    wrong;         /* a completed call gave a wrong result */
    volatile int    err_status;    /* first failing call's status; 0 = none yet */
    volatile int    err_call;
    volatile double err_time;
    volatile int    fin_status;    /* 1 until fold_finalize returned */
    volatile double fin_seconds;
} rank_state_t;

typedef struct shared {
    rank_state_t rank[MAX_RANKS];
} shared_t;

typedef struct options {
    int         nranks;
    const char *transport;
    const char *provider;
    const char *coll;
    const char *alg;
    const char *fault;
    int         victim;
    int         root;
    unsigned    seed;
    double      timeout;
    size_t      max_count;
    int         warmup;
    int         max_delay_ms;
    const char *log_dir;
    const char *netns;   /* comma-separated namespaces, ranks blocked over them */
    const char *link;    /* link fault: "namespace:device" taken down */
    int         nonblocking;   /* iallreduce/ireduce, then fold_test polls or fold_wait */
    int         churn;   /* every third call on a new communicator (split, call, free) */
} options_t;

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* xorshift64*: the same sequence of call sizes on every rank. */
static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

/* All len bytes through write (or read), past short transfers and EINTR. */
static int transfer_all(int fd, char *p, size_t len, int writing)
{
    while (len > 0) {
        ssize_t n = writing ? write(fd, p, len) : read(fd, p, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
    return transfer_all(fd, (char *)buf, len, 1);   /* write only reads it */
}

static int read_all(int fd, void *buf, size_t len)
{
    return transfer_all(fd, buf, len, 0);
}

/* ---- rank side --------------------------------------------------------------- */

typedef struct oob {
    int fd;
    int size;
} oob_t;

/* Sends len and the bytes to the launcher; gets a status and everyone's bytes. */
static int oob_allgather(const void *in, void *out, size_t len, void *arg)
{
    oob_t *o = arg;
    uint64_t hdr = len;
    int32_t status;
    if (write_all(o->fd, &hdr, sizeof(hdr)) != 0 || write_all(o->fd, in, len) != 0 ||
        read_all(o->fd, &status, sizeof(status)) != 0 || status != 0) {
        return -1;
    }
    return read_all(o->fd, out, len * (size_t)o->size);
}

static int enter_netns(const options_t *opt, int rank)
{
    if (opt->netns == NULL) {
        return 0;
    }
    char list[512], *save = NULL, path[600];
    snprintf(list, sizeof(list), "%s", opt->netns);
    int nns = 1;
    for (const char *c = list; *c; c++) {
        nns += *c == ',';
    }
    int want = rank * nns / opt->nranks, k = 0;
    for (char *ns = strtok_r(list, ",", &save); ns; ns = strtok_r(NULL, ",", &save), k++) {
        if (k != want) {
            continue;
        }
        snprintf(path, sizeof(path), "/var/run/netns/%s", ns);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
            fprintf(stderr, "fold_fault: rank %d cannot enter namespace %s: %s\n", rank, ns,
                    strerror(errno));
            return -1;
        }
        close(fd);
    }
    return 0;
}

static int run_call(const options_t *opt, const int32_t *in, int32_t *out, size_t count,
                    fold_comm_h world, int call)
{
    if (opt->nonblocking) {
        fold_request_h req;
        int st = strcmp(opt->coll, "reduce") == 0
                     ? fold_ireduce(in, out, count, FOLD_INT32, FOLD_OP_SUM, opt->root, world,
                                    &req)
                     : fold_iallreduce(in, out, count, FOLD_INT32, FOLD_OP_SUM, world, &req);
        if (st != FOLD_OK) {
            return st;
        }
        if (call % 2 == 0) {
            while ((st = fold_test(req)) == FOLD_INPROGRESS) {
                sched_yield();
            }
        } else {
            st = fold_wait(req);
        }
        int fst = fold_request_free(req);
        return st != FOLD_OK ? st : fst;
    }
    if (strcmp(opt->coll, "reduce") == 0) {
        return fold_reduce(in, out, count, FOLD_INT32, FOLD_OP_SUM, opt->root, world);
    }
    return fold_allreduce(in, out, count, FOLD_INT32, FOLD_OP_SUM, world);
}

static void rank_main(const options_t *opt, shared_t *sh, int rank, int fd, const char *log)
{
    rank_state_t *me = &sh->rank[rank];
    /* UCX reports vanished peers on stdout: keep both streams in the log. */
    if (freopen(log, "w", stderr) == NULL || dup2(fileno(stderr), STDOUT_FILENO) < 0) {
        _exit(2);
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    setvbuf(stderr, NULL, _IONBF, 0);
    if (enter_netns(opt, rank) != 0) {
        _exit(2);
    }
    oob_t o = {fd, opt->nranks};
    fold_context_params_t params;
    fold_context_params_init(&params);
    params.transport     = opt->transport;
    params.oob.allgather = oob_allgather;
    params.oob.arg       = &o;
    params.oob.rank      = rank;
    params.oob.size      = opt->nranks;
    fold_context_h ctx;
    int st = fold_init(&params, &ctx);
    me->init_status = st;
    if (st != FOLD_OK) {
        printf("fold_fault: rank %d: fold_init: %s\n", rank, fold_status_string(st));
        _exit(3);
    }
    fold_comm_h world = fold_comm_world(ctx);
    if (strcmp(opt->alg, "auto") != 0) {
        st = fold_config_set(ctx, strcmp(opt->coll, "reduce") == 0 ? "REDUCE_ALG"
                                                                   : "ALLREDUCE_ALG", opt->alg);
        if (st != FOLD_OK) {
            printf("fold_fault: rank %d: algorithm %s: %s\n", rank, opt->alg,
                   fold_status_string(st));
            me->err_status = st;
            me->err_time = now_sec();
            _exit(3);
        }
    }

    int32_t *in = malloc(opt->max_count * sizeof(int32_t));
    int32_t *out = malloc(opt->max_count * sizeof(int32_t));
    if (in == NULL || out == NULL) {
        _exit(2);
    }
    const int32_t ranks_sum = opt->nranks * (opt->nranks + 1) / 2;
    uint64_t rng = 0x9e3779b97f4a7c15ULL ^ ((uint64_t)opt->seed * 0x100000001b3ULL);
    int reduce = strcmp(opt->coll, "reduce") == 0;
    for (int call = 0;; call++) {
        /* log-uniform sizes from 1 element to max_count */
        uint64_t r = rng_next(&rng);
        int bits = 0;
        while (((size_t)1 << (bits + 1)) <= opt->max_count) {
            bits++;
        }
        size_t count = (size_t)1 << (r % (uint64_t)(bits + 1));
        count += (r >> 8) % count;
        if (count > opt->max_count) {
            count = opt->max_count;
        }
        for (size_t i = 0; i < count; i++) {
            in[i] = (rank + 1) * (int32_t)(i % 13 + 1);
        }
        memset(out, 0xff, count * sizeof(int32_t));
        me->in_call = 1;
        double t0 = now_sec();
        /* Churn: the same ranks in reverse order, on a communicator of their own (its
         * own id, schedules and node segment), freed after the call. */
        fold_comm_h comm = world, sub = NULL;
        int my_rank = rank;
        st = FOLD_OK;
        if (opt->churn && call % 3 == 0) {
            st = fold_comm_split(world, 0, opt->nranks - rank, &sub);
            comm = sub;
            my_rank = opt->nranks - 1 - rank;
        }
        if (st == FOLD_OK) {
            st = run_call(opt, in, out, count, comm, call);
        }
        if (sub != NULL) {
            int fst = fold_comm_free(&sub);
            st = st != FOLD_OK ? st : fst;
        }
        double t1 = now_sec();
        me->in_call = 0;
        printf("fold_fault: call %d count %zu: %s in %.3f ms\n", call, count,
               fold_status_string(st), (t1 - t0) * 1e3);
        if (st != FOLD_OK) {
            me->err_call = call;
            me->err_time = t1;
            me->err_status = st;
            break;
        }
        if (!reduce || my_rank == opt->root) {
            for (size_t i = 0; i < count; i++) {
                if (out[i] != ranks_sum * (int32_t)(i % 13 + 1)) {
                    printf("fold_fault: call %d: element %zu is %d, expected %d\n", call, i,
                           out[i], ranks_sum * (int32_t)(i % 13 + 1));
                    me->wrong = 1;
                    break;
                }
            }
        }
        me->calls = call + 1;
    }
    fflush(stdout);
    double t0 = now_sec();
    st = fold_finalize(ctx);
    me->fin_seconds = now_sec() - t0;
    me->fin_status = st;
    printf("fold_fault: fold_finalize: %s in %.3f s\n", fold_status_string(st),
           me->fin_seconds);
    free(in);
    free(out);
    _exit(0);
}

/* ---- launcher side ----------------------------------------------------------- */

typedef struct launch_rank {
    pid_t    pid;
    int      fd;
    int      failed;     /* dead, stopped, or gone: allgathers fail from now on */
    int      exited;
    int      wstatus;
    double   exit_time;
    int      pending;    /* an allgather request is waiting for an answer */
    uint64_t len;
    char    *data;
} launch_rank_t;

static void answer_failure(launch_rank_t *lr)
{
    int32_t st = -1;
    if (lr->pending) {
        if (write_all(lr->fd, &st, sizeof(st)) != 0) {
            lr->failed = 1;
        }
        lr->pending = 0;
        free(lr->data);
        lr->data = NULL;
    }
}

/* Reads what is ready on each socket; answers an allgather once every rank asked,
 * or fails every request once any rank has failed. */
static void serve(launch_rank_t *lr, int n, int timeout_ms)
{
    struct pollfd pfd[MAX_RANKS];
    for (int r = 0; r < n; r++) {
        pfd[r].fd = lr[r].fd >= 0 && !lr[r].pending ? lr[r].fd : -1;
        pfd[r].events = POLLIN;
        pfd[r].revents = 0;
    }
    if (poll(pfd, (nfds_t)n, timeout_ms) > 0) {
        for (int r = 0; r < n; r++) {
            if (pfd[r].fd < 0 || pfd[r].revents == 0) {
                continue;
            }
            uint64_t len;
            if (read_all(lr[r].fd, &len, sizeof(len)) != 0 || len > (1u << 24)) {
                close(lr[r].fd);
                lr[r].fd = -1;
                lr[r].failed = 1;
                continue;
            }
            lr[r].data = malloc(len ? len : 1);
            if (lr[r].data == NULL || read_all(lr[r].fd, lr[r].data, len) != 0) {
                close(lr[r].fd);
                lr[r].fd = -1;
                lr[r].failed = 1;
                free(lr[r].data);
                lr[r].data = NULL;
                continue;
            }
            lr[r].len = len;
            lr[r].pending = 1;
        }
    }
    int any_failed = 0, all_pending = 1;
    for (int r = 0; r < n; r++) {
        any_failed |= lr[r].failed;
        all_pending &= lr[r].pending;
    }
    if (any_failed) {
        for (int r = 0; r < n; r++) {
            if (lr[r].fd >= 0) {
                answer_failure(&lr[r]);
            }
        }
        return;
    }
    if (!all_pending) {
        return;
    }
    uint64_t len = lr[0].len;
    int32_t st = 0;
    for (int r = 1; r < n; r++) {
        st |= lr[r].len != len;
    }
    for (int r = 0; r < n; r++) {
        if (st != 0) {
            answer_failure(&lr[r]);
            continue;
        }
        if (write_all(lr[r].fd, &st, sizeof(st)) != 0) {
            lr[r].failed = 1;
        }
        for (int k = 0; k < n && !lr[r].failed; k++) {
            if (write_all(lr[r].fd, lr[k].data, len) != 0) {
                lr[r].failed = 1;
            }
        }
    }
    for (int r = 0; r < n; r++) {
        lr[r].pending = 0;
        free(lr[r].data);
        lr[r].data = NULL;
    }
}

static void reap(launch_rank_t *lr, int n)
{
    for (int r = 0; r < n; r++) {
        if (!lr[r].exited && waitpid(lr[r].pid, &lr[r].wstatus, WNOHANG) == lr[r].pid) {
            lr[r].exited = 1;
            lr[r].exit_time = now_sec();
        }
    }
}

/* /dev/shm entries of this job: "fold-<host>-<pid of rank 0>-<time>-...". */
static int count_leftovers(pid_t pid0, char *names, size_t len)
{
    char needle[32];
    snprintf(needle, sizeof(needle), "-%d-", (int)pid0);
    names[0] = '\0';
    int count = 0;
    DIR *d = opendir("/dev/shm");
    if (d == NULL) {
        return 0;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, "fold-", 5) == 0 && strstr(e->d_name, needle) != NULL) {
            count++;
            if (strlen(names) + strlen(e->d_name) + 2 < len) {
                strcat(names, " ");
                strcat(names, e->d_name);
            }
        }
    }
    closedir(d);
    return count;
}

/* fold's first error line in a rank's log, without the "[fold rank r pid p] error
 * file:line " prefix. */
static int first_error(const char *log, char *msg, size_t len)
{
    FILE *f = fopen(log, "r");
    char line[2048];
    msg[0] = '\0';
    if (f == NULL) {
        return 0;
    }
    int found = 0;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "[fold ", 6) != 0 || strstr(line, "] error ") == NULL) {
            continue;
        }
        char *p = strstr(line, "] error ") + 8;
        p = strchr(p, ' ');   /* past file:line */
        p = p ? p + 1 : line;
        p[strcspn(p, "\n")] = '\0';
        size_t k = strlen(p) < len - 1 ? strlen(p) : len - 1;
        memcpy(msg, p, k);
        msg[k] = '\0';
        found = 1;
    }
    fclose(f);
    return found;
}

/* Whether some error line of the log names another rank ("rank N", not "rank N of")
 * and the step ("step i of n", or the fast path's "rank N's <flag> <value>"). */
static int names_peer_and_step(const char *log, int self)
{
    FILE *f = fopen(log, "r");
    char line[2048];
    int ok = 0;
    if (f == NULL) {
        return 0;
    }
    while (!ok && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "[fold ", 6) != 0 || strstr(line, "] error ") == NULL) {
            continue;
        }
        const char *p = strstr(line, "] error ") + 8;
        int peer = 0, step = strstr(p, "step ") != NULL;
        for (const char *q = p; (q = strstr(q, "rank ")) != NULL; q += 5) {
            char *end;
            long r = strtol(q + 5, &end, 10);
            if (end == q + 5 || strncmp(end, " of ", 4) == 0 || r == self) {
                continue;
            }
            peer = 1;
            step |= strncmp(end, "'s ", 3) == 0;
        }
        ok = peer && step;
    }
    fclose(f);
    return ok;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: fold_fault [-n ranks] [-t ucp|ofi] [-p ofi-provider] [-c allreduce|reduce]\n"
            "                  [-a alg] [-f kill|stop] [-v victim] [-r root] [-s seed]\n"
            "                  [-T FOLD_TIMEOUT] [-m max-count] [-w warm-up calls]\n"
            "                  [-d max delay ms] [-l log dir (kept)] [-N netns,netns]\n"
            "                  [-i (non-blocking calls)] [-S (communicator churn)]\n"
            "                  [-f link -L namespace:device (taken down; with -N)]\n"
            "UCX_TLS, FOLD_* and other variables pass through to the ranks.\n");
}

static int parse(int argc, char **argv, options_t *o)
{
    *o = (options_t){.nranks = 3, .transport = "ucp", .provider = NULL, .coll = "allreduce",
                     .alg = "auto", .fault = "kill", .victim = 1, .root = 0, .seed = 1,
                     .timeout = 2.0, .max_count = 1 << 18, .warmup = 3, .max_delay_ms = 200};
    for (int c; (c = getopt(argc, argv, "n:t:p:c:a:f:v:r:s:T:m:w:d:l:N:L:iSh")) != -1;) {
        switch (c) {
        case 'n': o->nranks = atoi(optarg); break;
        case 't': o->transport = optarg; break;
        case 'p': o->provider = optarg; break;
        case 'c': o->coll = optarg; break;
        case 'a': o->alg = optarg; break;
        case 'f': o->fault = optarg; break;
        case 'v': o->victim = atoi(optarg); break;
        case 'r': o->root = atoi(optarg); break;
        case 's': o->seed = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'T': o->timeout = atof(optarg); break;
        case 'm': o->max_count = strtoull(optarg, NULL, 10); break;
        case 'w': o->warmup = atoi(optarg); break;
        case 'd': o->max_delay_ms = atoi(optarg); break;
        case 'l': o->log_dir = optarg; break;
        case 'N': o->netns = optarg; break;
        case 'L': o->link = optarg; break;
        case 'i': o->nonblocking = 1; break;
        case 'S': o->churn = 1; break;
        default: usage(); return -1;
        }
    }
    if (o->nranks < 2 || o->nranks > MAX_RANKS || o->victim < 0 || o->victim >= o->nranks ||
        o->root < 0 || o->root >= o->nranks || o->timeout <= 0 || o->max_count < 1 ||
        (strcmp(o->fault, "kill") != 0 && strcmp(o->fault, "stop") != 0 &&
         (strcmp(o->fault, "link") != 0 || o->link == NULL || strchr(o->link, ':') == NULL)) ||
        (strcmp(o->coll, "allreduce") != 0 && strcmp(o->coll, "reduce") != 0)) {
        usage();
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    options_t opt;
    if (parse(argc, argv, &opt) != 0) {
        return 2;
    }
    const int n = opt.nranks;
    char tv[32];
    snprintf(tv, sizeof(tv), "%g", opt.timeout);
    setenv("FOLD_TIMEOUT", tv, 1);
    if (opt.provider != NULL) {
        setenv("FOLD_OFI_PROVIDER", opt.provider, 1);
    }
    if (getenv("FOLD_LOG_LEVEL") == NULL) {
        setenv("FOLD_LOG_LEVEL", "error", 1);
    }

    char dir[256];
    if (opt.log_dir != NULL) {
        snprintf(dir, sizeof(dir), "%s", opt.log_dir);
        mkdir(dir, 0700);
    } else {
        snprintf(dir, sizeof(dir), "/tmp/fold-fault-XXXXXX");
        if (mkdtemp(dir) == NULL) {
            perror("mkdtemp");
            return 2;
        }
    }
    char logs[MAX_RANKS][320];
    for (int r = 0; r < n; r++) {
        snprintf(logs[r], sizeof(logs[r]), "%s/s%u-rank%d.log", dir, opt.seed, r);
    }

    shared_t *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    launch_rank_t lr[MAX_RANKS];
    memset(lr, 0, sizeof(lr));
    fflush(NULL);
    for (int r = 0; r < n; r++) {
        sh->rank[r].init_status = 1;
        sh->rank[r].fin_status = 1;
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
            perror("socketpair");
            return 2;
        }
        lr[r].pid = fork();
        if (lr[r].pid < 0) {
            perror("fork");
            return 2;
        }
        if (lr[r].pid == 0) {
            close(sv[0]);
            for (int k = 0; k < r; k++) {
                close(lr[k].fd);
            }
            rank_main(&opt, sh, r, sv[1], logs[r]);
        }
        close(sv[1]);
        lr[r].fd = sv[0];
    }
    signal(SIGPIPE, SIG_IGN);

    /* Warm-up: every rank through its first calls; then a random delay. */
    uint64_t rng = 0xda942042e4dd58b5ULL ^ (uint64_t)opt.seed * 0x9e3779b97f4a7c15ULL;
    double delay = (double)(rng_next(&rng) % (uint64_t)(opt.max_delay_ms + 1)) * 1e-3;
    double start = now_sec(), ready = 0;
    const char *setup_error = NULL;
    while (setup_error == NULL) {
        serve(lr, n, 5);
        reap(lr, n);
        int all = 1;
        for (int r = 0; r < n; r++) {
            all &= sh->rank[r].calls >= opt.warmup;
            if (lr[r].exited || lr[r].failed || sh->rank[r].err_status != 0) {
                setup_error = "a rank failed before the fault";
            }
        }
        if (ready == 0 && all) {
            ready = now_sec();
        }
        if (ready != 0 && now_sec() >= ready + delay) {
            break;
        }
        if (now_sec() - start > 60 + 4 * opt.timeout) {
            setup_error = "the ranks did not finish their warm-up calls";
        }
    }

    /* A link fault has no victim: every rank must fail, and the bootstrap still
     * works (it does not cross the link), so fold_finalize succeeds. */
    const int link = strcmp(opt.fault, "link") == 0;
    const int v = link ? -1 : opt.victim, stop = strcmp(opt.fault, "stop") == 0;
    double t_fault = now_sec();
    int victim_in_call = link ? 0 : sh->rank[v].in_call;
    int victim_calls = link ? 0 : sh->rank[v].calls;
    char link_ns[128] = "", link_dev[64] = "", cmd[320];
    if (link) {
        snprintf(link_ns, sizeof(link_ns), "%.*s", (int)(strchr(opt.link, ':') - opt.link),
                 opt.link);
        snprintf(link_dev, sizeof(link_dev), "%s", strchr(opt.link, ':') + 1);
    }
    if (setup_error == NULL && link) {
        snprintf(cmd, sizeof(cmd), "ip -n %s link set %s down", link_ns, link_dev);
        t_fault = now_sec();
        if (system(cmd) != 0) {
            setup_error = "cannot take the link down";
        }
    } else if (setup_error == NULL) {
        kill(lr[v].pid, stop ? SIGSTOP : SIGKILL);
        t_fault = now_sec();
        lr[v].failed = 1;
    }

    /* Survivors: fail within the bound, finalize, exit. A stopped victim resumes once
     * they all failed or the bound has passed. */
    const double bound = 2 * opt.timeout;
    double deadline = t_fault + bound + EXIT_GRACE, t_resume = 0;
    int hard_killed[MAX_RANKS] = {0};
    for (;;) {
        serve(lr, n, 5);
        reap(lr, n);
        double now = now_sec();
        int survivors_failed = 1, all_exited = 1;
        for (int r = 0; r < n; r++) {
            if (r != v) {
                survivors_failed &= sh->rank[r].err_status != 0 || lr[r].exited;
            }
            all_exited &= lr[r].exited;
        }
        if (stop && t_resume == 0 && (survivors_failed || now > t_fault + bound)) {
            kill(lr[v].pid, SIGCONT);
            t_resume = now;
            deadline = (now > t_fault + bound ? now : t_fault + bound) + bound + EXIT_GRACE;
        }
        if (all_exited) {
            break;
        }
        if (now > deadline) {
            for (int r = 0; r < n; r++) {
                if (!lr[r].exited) {
                    hard_killed[r] = 1;
                    kill(lr[r].pid, SIGKILL);
                }
            }
            while (!lr[0].exited || !lr[n - 1].exited) {
                reap(lr, n);
                int left = 0;
                for (int r = 0; r < n; r++) {
                    left += !lr[r].exited;
                }
                if (left == 0) {
                    break;
                }
                usleep(10000);
            }
            reap(lr, n);
            break;
        }
    }
    if (link) {
        snprintf(cmd, sizeof(cmd), "ip -n %s link set %s up", link_ns, link_dev);
        if (system(cmd) != 0) {
            printf("fold_fault: could not bring %s in %s up again\n", link_dev, link_ns);
        }
    }
    usleep(20000);
    char leftover_names[4096];
    int leftovers = count_leftovers(lr[0].pid, leftover_names, sizeof(leftover_names));

    /* Verdict per rank. */
    int survivors = 0, clean = 0, wrong = 0, failed = setup_error != NULL;
    double slowest = 0, slowest_fin = 0;
    for (int r = 0; r < n; r++) {
        rank_state_t *s = &sh->rank[r];
        char msg[MSG_LEN];
        first_error(logs[r], msg, sizeof(msg));
        wrong |= s->wrong;
        if (r == v) {
            const char *what;
            char buf[256];
            if (!stop) {
                what = lr[r].exited && WIFSIGNALED(lr[r].wstatus) &&
                               WTERMSIG(lr[r].wstatus) == SIGKILL
                           ? "killed" : "NOT KILLED";
            } else if (hard_killed[r]) {
                what = "HUNG after SIGCONT";
                failed = 1;
            } else {
                snprintf(buf, sizeof(buf), "resumed, then %s, finalize %s, exit %d",
                         s->err_status ? fold_status_string(s->err_status) : "no error",
                         s->fin_status == 1 ? "not reached" : fold_status_string(s->fin_status),
                         WIFEXITED(lr[r].wstatus) ? WEXITSTATUS(lr[r].wstatus) : -1);
                what = buf;
                if (!WIFEXITED(lr[r].wstatus) || WEXITSTATUS(lr[r].wstatus) != 0) {
                    failed = 1;
                }
            }
            printf("rank %d (victim): %s after %d calls (%s); %s\n", r, opt.fault,
                   victim_calls, victim_in_call ? "in a call" : "between calls", what);
            continue;
        }
        survivors++;
        double detect = s->err_status != 0 ? s->err_time - t_fault : -1;
        const char *why = NULL;
        if (hard_killed[r] && s->err_status == 0) {
            why = "HANG: no error";
        } else if (s->err_status != FOLD_ERR_PEER_FAILED && s->err_status != FOLD_ERR_TIMEOUT) {
            why = "wrong status";
        } else if (detect > bound) {
            why = "too slow";
        } else if (!names_peer_and_step(logs[r], r)) {
            why = "message names no peer and step";
        } else if (s->fin_status == 1) {
            why = "HANG in fold_finalize";
        } else if (!lr[r].exited || !WIFEXITED(lr[r].wstatus) ||
                   WEXITSTATUS(lr[r].wstatus) != 0) {
            why = "did not exit cleanly";
        } else if (s->wrong) {
            why = "wrong result before the fault";
        }
        if (s->fin_status != 1 && s->fin_seconds > slowest_fin) {
            slowest_fin = s->fin_seconds;
        }
        if (why == NULL) {
            clean++;
            slowest = detect > slowest ? detect : slowest;
        } else {
            failed = 1;
            if (detect > slowest) {
                slowest = detect;
            }
        }
        printf("rank %d: %s at call %d after %.2f s, finalize %s in %.2f s: %s%s%s\n    \"%s\"\n",
               r, s->err_status ? fold_status_string(s->err_status) : "no error", s->err_call,
               detect, s->fin_status == 1 ? "not reached" : fold_status_string(s->fin_status),
               s->fin_seconds, why ? "FAIL (" : "ok", why ? why : "", why ? ")" : "", msg);
    }
    if (leftovers > 0) {
        printf("leftovers in /dev/shm:%s\n", leftover_names);
        failed = 1;
    }
    if (setup_error != NULL) {
        printf("set-up: %s (logs in %s)\n", setup_error, dir);
    }
    failed |= wrong;
    const char *ucx_tls = strcmp(opt.transport, "ucp") == 0 ? getenv("UCX_TLS") : NULL;
    printf("RESULT coll=%s%s%s alg=%s tl=%s%s%s%s%s n=%d fault=%s victim=%d root=%d seed=%u "
           "survivors=%d clean=%d slowest=%.2f bound=%.2f finalize=%.2f leftovers=%d verdict=%s\n",
           opt.coll, opt.nonblocking ? "(nb)" : "", opt.churn ? "(split)" : "", opt.alg, opt.transport,
           opt.provider ? "/" : "", opt.provider ? opt.provider : "", ucx_tls ? "/" : "",
           ucx_tls ? ucx_tls : "", n, opt.fault, v, opt.root, opt.seed, survivors,
           clean, slowest, bound, slowest_fin, leftovers, setup_error ? "setup" : failed ? "FAIL" : "ok");
    if (failed) {
        printf("logs kept in %s\n", dir);
    } else if (opt.log_dir == NULL) {
        for (int r = 0; r < n; r++) {
            unlink(logs[r]);
        }
        rmdir(dir);
    }
    munmap(sh, sizeof(*sh));
    return failed ? 1 : 0;
}
