/*
 * Nothing is left in /dev/shm when a process dies. Real processes: the test forks
 * ranks that bootstrap through an out-of-band allgather over shared memory and talk
 * over UCP; one rank is killed with SIGKILL either in the middle of a DPML or a
 * single-copy (cma) allreduce (its segment attached long before) or before it ever joins the
 * segment's setup. The survivors must fail (mid-call: FOLD_ERR_TIMEOUT, the
 * leader's log naming the rank and flag it waited for), and afterwards no fold
 * segment may remain.
 */
#include <criterion/criterion.h>

#include <fold/fold.h>

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NPROC      3
#define SLOT_BYTES (64 * 1024)
#define GOOD_CALLS 5

enum kill_point { KILL_MID_CALL, KILL_BEFORE_SETUP };

typedef struct shared {
    pthread_barrier_t barrier;
    int               status[NPROC];
    int               good_calls[NPROC];
    char              slots[NPROC][SLOT_BYTES];
} shared_t;

typedef struct oob {
    shared_t *sh;
    int       rank;
} oob_t;

static int oob_allgather(const void *in, void *out, size_t len, void *arg)
{
    oob_t *o = arg;
    if (len > SLOT_BYTES) {
        return -1;
    }
    memcpy(o->sh->slots[o->rank], in, len);
    pthread_barrier_wait(&o->sh->barrier);
    for (int r = 0; r < NPROC; r++) {
        memcpy((char *)out + (size_t)r * len, o->sh->slots[r], len);
    }
    pthread_barrier_wait(&o->sh->barrier);
    return 0;
}

static void log_path(char *buf, size_t len, int rank)
{
    snprintf(buf, len, "/tmp/fold-test-shm-kill-%d-rank%d.log", (int)getpid(), rank);
}

/* Names in /dev/shm of the job whose rank 0 is process `rank0` (fold names segments
 * "fold-<job>-...", an out-of-band job "<host>-<pid of rank 0>-<time>"), one per line,
 * into buf. Other jobs' segments, which may come and go meanwhile on a shared
 * machine, are not this test's business. */
static void list_job_segments(char *buf, size_t len, pid_t rank0)
{
    char pid_part[32];
    snprintf(pid_part, sizeof(pid_part), "-%d-", (int)rank0);
    buf[0] = '\0';
    DIR *d = opendir("/dev/shm");
    if (d == NULL) {
        return;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, "fold-", 5) == 0 && strstr(e->d_name, pid_part) != NULL &&
            strlen(buf) + strlen(e->d_name) + 2 < len) {
            strcat(buf, e->d_name);
            strcat(buf, "\n");
        }
    }
    closedir(d);
}

static int allreduce_ok(fold_comm_h w, int rank)
{
    float in[1000], out[1000];
    for (int i = 0; i < 1000; i++) {
        in[i] = (float)(rank + i);
    }
    if (fold_allreduce(in, out, 1000, FOLD_FLOAT32, FOLD_OP_SUM, w) != FOLD_OK) {
        return 0;
    }
    for (int i = 0; i < 1000; i++) {
        if (out[i] != (float)(NPROC * i + NPROC * (NPROC - 1) / 2)) {
            return 0;
        }
    }
    return 1;
}

static void child_main(shared_t *sh, int rank, int victim, enum kill_point point,
                       const char *alg, const char *log)
{
    /* UCX reports a vanished peer on stdout: keep both streams in the log. */
    if (freopen(log, "w", stderr) == NULL || dup2(fileno(stderr), STDOUT_FILENO) < 0) {
        _exit(2);
    }
    oob_t o = {sh, rank};
    fold_context_params_t params;
    fold_context_params_init(&params);
    params.transport     = "ucp";
    params.oob.allgather = oob_allgather;
    params.oob.arg       = &o;
    params.oob.rank      = rank;
    params.oob.size      = NPROC;
    fold_context_h ctx;
    if (fold_init(&params, &ctx) != FOLD_OK) {
        _exit(3);
    }
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "ALLREDUCE_ALG", alg);

    if (point == KILL_BEFORE_SETUP && rank == victim) {
        raise(SIGKILL);
    }
    int good = 0;
    for (int k = 0; point == KILL_MID_CALL && k < GOOD_CALLS; k++) {
        good += allreduce_ok(w, rank);
    }
    sh->good_calls[rank] = good;
    float in[4096], out[4096];
    memset(in, 0, sizeof(in));
    if (rank == victim) {
        /* Start the call, then die in the middle of it. */
        fold_request_h req;
        fold_iallreduce(in, out, 4096, FOLD_FLOAT32, FOLD_OP_SUM, w, &req);
        raise(SIGKILL);
    }
    sh->status[rank] = fold_allreduce(in, out, 4096, FOLD_FLOAT32, FOLD_OP_SUM, w);
    fflush(stderr);
    _exit(0);   /* no finalize: a peer is gone, as after an abort */
}

static int file_contains(const char *path, const char *needle)
{
    static char text[1 << 16];
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    return strstr(text, needle) != NULL;
}

static void run_scenario(enum kill_point point, const char *alg)
{
    const int victim = point == KILL_MID_CALL ? 1 : 2;
    char after[8192], logs[NPROC][128];
    shared_t *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    cr_assert_neq(sh, MAP_FAILED);
    pthread_barrierattr_t attr;
    pthread_barrierattr_init(&attr);
    pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&sh->barrier, &attr, NPROC);
    for (int r = 0; r < NPROC; r++) {
        sh->status[r] = 1;
        log_path(logs[r], sizeof(logs[r]), r);
    }
    setenv("FOLD_TIMEOUT", "3", 1);
    setenv("FOLD_LOG_LEVEL", "error", 1);

    pid_t pid[NPROC];
    for (int r = 0; r < NPROC; r++) {
        pid[r] = fork();
        cr_assert_geq(pid[r], 0);
        if (pid[r] == 0) {
            child_main(sh, r, victim, point, alg, logs[r]);
        }
    }
    /* The survivors fail after FOLD_TIMEOUT; give them ample time, then stop them. */
    int wstatus[NPROC];
    time_t deadline = time(NULL) + 60;
    for (int r = 0; r < NPROC; r++) {
        while (waitpid(pid[r], &wstatus[r], WNOHANG) == 0) {
            if (time(NULL) > deadline) {
                kill(pid[r], SIGKILL);
            }
            usleep(20000);
        }
    }
    list_job_segments(after, sizeof(after), pid[0]);

    cr_expect(WIFSIGNALED(wstatus[victim]) && WTERMSIG(wstatus[victim]) == SIGKILL);
    cr_expect_str_eq(after, "", "segments left in /dev/shm:\n%s", after);
    for (int r = 0; r < NPROC; r++) {
        if (r == victim) {
            continue;
        }
        cr_expect(WIFEXITED(wstatus[r]) && WEXITSTATUS(wstatus[r]) == 0,
                  "rank %d did not finish on its own", r);
        if (point == KILL_MID_CALL) {
            /* only flags connect the ranks of a node: a wait runs out */
            cr_expect_eq(sh->status[r], FOLD_ERR_TIMEOUT, "rank %d: %s", r,
                         fold_status_string(sh->status[r]));
            cr_expect_eq(sh->good_calls[r], GOOD_CALLS, "rank %d", r);
        } else {
            /* the setup's allgather goes over the transport, which may notice first */
            cr_expect_lt(sh->status[r], 0, "rank %d: %s", r, fold_status_string(sh->status[r]));
        }
    }
    if (point == KILL_MID_CALL) {
        /* dpml: rank 0 leads the one partition of this small message and waits for
         * the victim's copy-in; cma: rank 0 waits for the victim to publish its
         * buffers. Either says so. */
        cr_expect(file_contains(logs[0], "shm wait for rank 1 (local rank 1) to reach written"),
                  "rank 0's log does not name what it waited for");
    }
    for (int r = 0; r < NPROC; r++) {
        unlink(logs[r]);
    }
    pthread_barrier_destroy(&sh->barrier);
    munmap(sh, sizeof(*sh));
}

Test(shm_kill, rank_killed_mid_call_leaves_nothing, .timeout = 180)
{
    run_scenario(KILL_MID_CALL, "dpml");
}

Test(shm_kill, rank_killed_mid_single_copy_call_leaves_nothing, .timeout = 180)
{
    run_scenario(KILL_MID_CALL, "cma");
}

Test(shm_kill, rank_killed_before_setup_leaves_nothing, .timeout = 180)
{
    run_scenario(KILL_BEFORE_SETUP, "dpml");
}
