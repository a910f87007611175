/*
 * The ucp transport's start-up: a UCP context and worker from UCX's own
 * configuration (UCX_* variables).
 *
 * UCX's shared-memory transports (posix and sysv, its "mm") map a receive pool when
 * the worker starts, about 4 MiB per process in UCX 1.13, posix's from /dev/shm.
 * Where /dev/shm is small (a container's 64 MiB shared by many ranks) or full, the
 * worker does not start. Start-up then tries once more without them: UCX_TLS less
 * "mm", so single copy (cma) and the network stay. It says why in `fallback`, which
 * the transport's caps carry to the context, which reports it once per node.
 *
 * UCX's own error lines are held back while it tries: the first of an attempt goes
 * into fold's message, the warning of a retry that worked or the error of one that
 * did not.
 */
#include "transport/tl_ucp_start.h"
#include "log.h"

#include <errno.h>
#include <fold/fold_status.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <ucs/debug/log_def.h>

#define SHM_DIR "/dev/shm"   /* where UCX's posix transport maps its pool from */

/* One start at a time: UCX's log handlers are global. */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static char            held_error[256];   /* UCX's first error line of an attempt */

static ucs_log_func_rc_t hold_errors(const char *file, unsigned line, const char *function,
                                     ucs_log_level_t level,
                                     const ucs_log_component_config_t *comp_conf,
                                     const char *message, va_list ap)
{
    (void)file;
    (void)line;
    (void)function;
    (void)comp_conf;
    if (level != UCS_LOG_LEVEL_ERROR) {
        return UCS_LOG_FUNC_RC_CONTINUE;
    }
    if (held_error[0] == '\0') {
        char text[sizeof(held_error)];
        vsnprintf(text, sizeof(text), message, ap);
        size_t end = strlen(text);
        while (end > 0 && strchr(". \n", text[end - 1]) != NULL) {
            text[--end] = '\0';   /* it goes inside a sentence of fold's */
        }
        snprintf(held_error, sizeof(held_error), "%s", text + strspn(text, " "));
    }
    return UCS_LOG_FUNC_RC_STOP;
}

/* UCX warns about a setting that no loaded transport reads, so leave shared-memory
 * settings alone when UCX_TLS rules shared memory out. */
static int tls_may_use_shm(const char *tls)
{
    static const char *const shm_names[] = {"all", "sm", "mm", "posix", "sysv"};

    if (tls == NULL || tls[0] == '^') {
        return 1;
    }
    for (size_t i = 0; i < sizeof(shm_names) / sizeof(shm_names[0]); i++) {
        if (strstr(tls, shm_names[i]) != NULL) {
            return 1;
        }
    }
    return 0;
}

/* Peer error handling excludes every transport that cannot report a peer failure.
 * In UCX 1.13 that includes the shared-memory ones (posix, sysv) unless their
 * error handling is switched on, so without this even local peers (and the rank
 * itself) talk over TCP loopback, several times slower. An explicit UCX_* setting
 * wins. */
static void enable_shm_error_handling(ucp_config_t *config, const char *tls)
{
    if (!tls_may_use_shm(tls) || getenv("UCX_MM_ERROR_HANDLING") != NULL ||
        getenv("UCX_POSIX_ERROR_HANDLING") != NULL || getenv("UCX_SYSV_ERROR_HANDLING") != NULL) {
        return;
    }
    ucs_status_t ucs_status = ucp_config_modify(config, "MM_ERROR_HANDLING", "y");
    if (ucs_status != UCS_OK) {
        fold_debug("ucp: cannot enable shared-memory error handling: %s",
                   ucs_status_string(ucs_status));
    }
}

static int is_mm_name(const char *t)
{
    return strcmp(t, "mm") == 0 || strcmp(t, "posix") == 0 || strcmp(t, "sysv") == 0 ||
           strcmp(t, "xpmem") == 0;
}

/* UCX_TLS without the transports that map shared memory (UCX's "mm": posix, sysv,
 * xpmem; the aliases sm and shm keep their cma). 0 when nothing that reaches
 * another process would be left, so that a retry cannot help. */
static int tls_without_shm(const char *tls, char *out, size_t len)
{
    if (tls == NULL || tls[0] == '\0' || strcmp(tls, "all") == 0) {
        snprintf(out, len, "^mm");
        return 1;
    }
    if (tls[0] == '^') {
        return (size_t)snprintf(out, len, "%s,mm", tls) < len;
    }
    char copy[256], *save;
    if ((size_t)snprintf(copy, sizeof(copy), "%s", tls) >= sizeof(copy)) {
        return 0;
    }
    size_t pos = 0;
    int reaches = 0;
    out[0] = '\0';
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        if (strcmp(t, "all") == 0) {
            snprintf(out, len, "^mm");
            return 1;
        }
        if (is_mm_name(t)) {
            continue;
        }
        const char *keep = strcmp(t, "sm") == 0 || strcmp(t, "shm") == 0 ? "cma" : t;
        pos += (size_t)snprintf(out + pos, len - pos, "%s%s", pos ? "," : "", keep);
        if (pos >= len) {
            return 0;
        }
        reaches |= strcmp(keep, "self") != 0;
    }
    return reaches;
}

/* The transports behind the context's resources, from UCX's own description of it
 * ("resource 1 : md 1 dev 1 flags -- tcp/lo"), each once, in its order. */
static void context_tls(ucp_context_h context, char *out, size_t len)
{
    char *text = NULL;
    size_t text_len = 0;
    FILE *f = open_memstream(&text, &text_len);
    out[0] = '\0';
    if (f == NULL) {
        return;
    }
    ucp_context_print_info(context, f);
    fclose(f);
    size_t pos = 0;
    for (char *line = text, *next; line != NULL && *line != '\0'; line = next) {
        next = strchr(line, '\n');
        if (next != NULL) {
            *next++ = '\0';
        }
        const char *name = strstr(line, "resource") ? strstr(line, "-- ") : NULL;
        if (name == NULL) {
            continue;
        }
        name += 3;
        char tl[32];
        snprintf(tl, sizeof(tl), "%.*s", (int)strcspn(name, "/"), name);
        char padded[40], have[160];
        snprintf(padded, sizeof(padded), ",%s,", tl);
        snprintf(have, sizeof(have), ",%s,", out);
        if (strstr(have, padded) == NULL && pos + strlen(tl) + 2 < len) {
            pos += (size_t)snprintf(out + pos, len - pos, "%s%s", pos ? "," : "", tl);
        }
    }
    free(text);
}

/* "/dev/shm has N bytes free of M", for messages. */
static void shm_space(char *out, size_t len)
{
    struct statvfs st;
    if (statvfs(SHM_DIR, &st) != 0) {
        snprintf(out, len, SHM_DIR ": %s", strerror(errno));
        return;
    }
    snprintf(out, len, SHM_DIR " has %llu bytes free of %llu",
             (unsigned long long)st.f_bavail * st.f_frsize,
             (unsigned long long)st.f_blocks * st.f_frsize);
}

/* One attempt with `tls` over UCX_TLS (NULL: UCX_TLS as it is, which may include
 * shared memory; otherwise a list without it); *step names the call that failed.
 * Leaves nothing behind on failure. */
static ucs_status_t attempt(const ucp_params_t *params, const char *tls, tl_ucp_started_t *out,
                            const char **step)
{
    ucp_config_t *config;
    *step = "ucp_config_read";
    ucs_status_t status = ucp_config_read(NULL, NULL, &config);
    if (status != UCS_OK) {
        return status;
    }
    *step = "ucp_config_modify(TLS)";
    if (tls != NULL && (status = ucp_config_modify(config, "TLS", tls)) != UCS_OK) {
        ucp_config_release(config);
        return status;
    }
    if (tls == NULL) {
        enable_shm_error_handling(config, getenv("UCX_TLS"));
    }
    *step = "ucp_init";
    status = ucp_init(params, config, &out->context);
    ucp_config_release(config);
    if (status != UCS_OK) {
        return status;
    }
    ucp_worker_params_t worker_params = {
        .field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SERIALIZED,
    };
    *step = "ucp_worker_create";
    status = ucp_worker_create(out->context, &worker_params, &out->worker);
    if (status != UCS_OK) {
        ucp_cleanup(out->context);
        out->context = NULL;
    }
    return status;
}

int tl_ucp_start(const ucp_params_t *params, tl_ucp_started_t *out)
{
    const char *user_tls = getenv("UCX_TLS");
    char first[sizeof(held_error)], second[sizeof(held_error)], retry_tls[256], space[128];
    const char *first_step, *second_step = NULL;
    memset(out, 0, sizeof(*out));

    pthread_mutex_lock(&start_lock);
    held_error[0] = '\0';
    ucs_log_push_handler(hold_errors);
    ucs_status_t first_status = attempt(params, NULL, out, &first_step), status = first_status;
    snprintf(first, sizeof(first), "%s", held_error);
    int retried = status != UCS_OK && tls_without_shm(user_tls, retry_tls, sizeof(retry_tls));
    if (retried) {
        held_error[0] = '\0';
        status = attempt(params, retry_tls, out, &second_step);
    }
    ucs_log_pop_handler();
    snprintf(second, sizeof(second), "%s", held_error);
    pthread_mutex_unlock(&start_lock);

    shm_space(space, sizeof(space));
    if (status != UCS_OK && !retried) {
        fold_error("ucp: %s failed: %s%s%s (%s); UCX_TLS=%s leaves no transport to try "
                   "without shared memory", first_step, ucs_status_string(first_status),
                   first[0] ? ": " : "", first, space, user_tls ? user_tls : "");
        return FOLD_ERR_TRANSPORT;
    }
    if (status != UCS_OK) {
        fold_error("ucp: %s failed: %s%s%s (%s); without UCX's shared-memory transports "
                   "(UCX_TLS=%s) %s failed too: %s%s%s", first_step,
                   ucs_status_string(first_status), first[0] ? ": " : "", first, space,
                   retry_tls, second_step, ucs_status_string(status), second[0] ? ": " : "",
                   second);
        return FOLD_ERR_TRANSPORT;
    }
    if (retried) {
        snprintf(out->fallback, sizeof(out->fallback), "UCX's shared-memory transports "
                 "could not start (%s: %s%s%s; %s): running over UCX_TLS=%s instead",
                 first_step, ucs_status_string(first_status), first[0] ? ": " : "", first,
                 space, retry_tls);
    }
    context_tls(out->context, out->tls, sizeof(out->tls));
    return FOLD_OK;
}
