/*
 * Online refinement of the model's pick (select_online.h): the trials of each set of
 * call arguments and the agreement that ends them.
 */
#include "select_online.h"
#include "comm.h"
#include "log.h"
#include "node/node.h"

#include <fold/fold_status.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double fold_online_median(const float *us, int n)
{
    float v[FOLD_ONLINE_MAX_TRIALS];
    int first = n > 1, m = n - first;
    memcpy(v, us + first, (size_t)m * sizeof(*v));
    for (int i = 1; i < m; i++) {   /* insertion sort: at most 15 values */
        float x = v[i];
        int j = i;
        for (; j > 0 && v[j - 1] > x; j--) {
            v[j] = v[j - 1];
        }
        v[j] = x;
    }
    return m % 2 ? v[m / 2] : 0.5 * ((double)v[m / 2 - 1] + (double)v[m / 2]);
}

int fold_online_passes(int trials)
{
    return trials >= 2 * FOLD_ONLINE_PASS_MIN ? 2 : 1;
}

/* A candidate's calls in each pass: FOLD_ONLINE over the passes (the remainder of an
 * odd count is not run). */
static int per_pass(int trials)
{
    return trials / fold_online_passes(trials);
}

void fold_online_slot(int call, int ncand, const int *live, int nlive, int trials,
                      int *cand, int *at)
{
    const int per = per_pass(trials);
    if (call < ncand * per) {
        *cand = call / per;
        *at   = call % per;
        return;
    }
    call -= ncand * per;
    *cand = live[nlive - 1 - call / per];
    *at   = per + call % per;
}

int fold_online_trial_calls(int ncand, int nlive, int trials)
{
    return (ncand + (fold_online_passes(trials) > 1 ? nlive : 0)) * per_pass(trials);
}

int fold_online_cull(const double *score, int n, int *live)
{
    double least = score[0];
    for (int i = 1; i < n; i++) {
        least = score[i] < least ? score[i] : least;
    }
    int nlive = 0;
    for (int i = 0; i < n; i++) {
        if (i == 0 || score[i] <= least * (1.0 + FOLD_ONLINE_CULL)) {
            live[nlive++] = i;
        }
    }
    return nlive;
}

double fold_online_score(const float *us, int trials, int passes)
{
    const int per = per_pass(trials);
    double best = fold_online_median(us, per);
    for (int p = 1; p < passes; p++) {
        double m = fold_online_median(us + p * per, per);
        best = m < best ? m : best;
    }
    return best;
}

double fold_online_excess_us(const double *pred_us, int n, int trials)
{
    double excess = 0;
    for (int i = 1; i < n; i++) {
        excess += pred_us[i] > pred_us[0] ? pred_us[i] - pred_us[0] : 0;
    }
    return excess * (double)trials;
}

double fold_online_span_us(const double *pred_us, int n, int trials)
{
    const int per = per_pass(trials);
    double span = fold_online_passes(trials) > 1 ? pred_us[0] * (double)per : 0;
    for (int i = 0; i < n; i++) {
        span += pred_us[i] * (double)per;
    }
    return span;
}

int fold_online_affordable(const double *pred_us, int n, int trials)
{
    return fold_online_excess_us(pred_us, n, trials) <= FOLD_ONLINE_BUDGET_US &&
           fold_online_span_us(pred_us, n, trials) <= FOLD_ONLINE_SPAN_US;
}

int fold_online_trials_for(const double *pred_us, int n, int trials)
{
    const int least = 2 * FOLD_ONLINE_PASS_MIN;
    if (n < 2 || trials < 1) {
        return 0;
    }
    if (fold_online_affordable(pred_us, n, trials)) {
        return trials;
    }
    return trials > least && fold_online_affordable(pred_us, n, least) ? least : 0;
}

double fold_online_cost_us(const double *pred_us, int n, int trials)
{
    return FOLD_ONLINE_FIXED_US * (double)n + fold_online_excess_us(pred_us, n, trials);
}

double fold_online_least_cost_us(void)
{
    return 2 * FOLD_ONLINE_FIXED_US;
}

long fold_online_wait_calls(double pick_us, double cost_us, long share_percent)
{
    if (share_percent <= 0) {
        return 0;
    }
    if (!(pick_us > 0)) {
        return LONG_MAX;
    }
    double calls = ceil(cost_us * 100.0 / ((double)share_percent * pick_us));
    return calls < (double)LONG_MAX / 2 ? (long)calls : LONG_MAX;
}

int fold_online_best(const double *score, int n, double margin)
{
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (score[i] < score[best]) {
            best = i;
        }
    }
    return best != 0 && score[best] < score[0] * (1.0 - margin) ? best : 0;
}

/* Whether k holds these arguments; root -1 matches any. */
static int matches(const fold_online_key_t *k, fold_coll_t coll, size_t count,
                   fold_dtype_t dtype, fold_op_t op, int root)
{
    return k->coll == coll && k->count == count && k->dtype == dtype && k->op == op &&
           (root < 0 || k->root == root);
}

static fold_online_key_t *find(fold_online_t *o, fold_coll_t coll, size_t count,
                               fold_dtype_t dtype, fold_op_t op, int root)
{
    if (o == NULL) {
        return NULL;
    }
    /* A loop of identical calls finds its key first. */
    if (o->nkeys > 0 && matches(o->key[o->last], coll, count, dtype, op, root)) {
        return o->key[o->last];
    }
    for (int i = 0; i < o->nkeys; i++) {
        if (matches(o->key[i], coll, count, dtype, op, root)) {
            o->last = i;
            return o->key[i];
        }
    }
    return NULL;
}

/* A new key for the call's arguments, WAITING for its calls to pay for the least
 * trials could cost. NULL when the table is full. Keys come one at a time: a call
 * adding one pays for its own key, not for zeroing the whole table. */
static fold_online_key_t *add(fold_comm_t *comm, const fold_call_t *call)
{
    fold_online_t *o = comm->online;
    if (o == NULL && (o = comm->online = calloc(1, sizeof(*o))) == NULL) {
        return NULL;
    }
    if (o->nkeys == FOLD_ONLINE_KEYS) {
        return NULL;
    }
    fold_online_key_t *k = malloc(sizeof(*k));
    if (k == NULL) {
        return NULL;
    }
    o->last = o->nkeys;
    o->key[o->nkeys++] = k;
    *k = (fold_online_key_t){.state = FOLD_ONLINE_WAITING, .coll = call->coll,
                             .count = call->count, .dtype = call->dtype, .op = call->op,
                             .root = call->root};
    /* Where the model did not decide (a forced algorithm, a rule's only one), there
     * is no prediction to wait by and, as a rule, nothing to try: look at once. */
    const size_t bytes = call->count * fold_dtype_size(call->dtype);
    const double pick_us = fold_select_class_us(comm, call->coll, bytes);
    k->wait_until = pick_us > 0 ? fold_online_wait_calls(pick_us, fold_online_least_cost_us(),
                                                         comm->ctx->config.online_share)
                                : 0;
    return k;
}

/* The rivals of the model's pick, and the calls that pay for trying them; OFF where
 * there is nothing to try or trying would cost too much. */
static void evaluate_rivals(fold_comm_t *comm, fold_online_key_t *k, const fold_choice_t *picked)
{
    k->ncand = fold_select_alternatives(comm, k->coll, k->count, k->dtype, k->op, picked,
                                        FOLD_ONLINE_SPREAD, k->cand, k->pred_us,
                                        FOLD_ONLINE_MAX_CAND);
    k->nlive = k->ncand;
    for (int i = 0; i < k->ncand; i++) {
        k->live[i] = i;
    }
    k->trials       = fold_online_trials_for(k->pred_us, k->ncand, (int)comm->ctx->config.online);
    k->rivals_known = 1;
    if (k->trials == 0) {
        k->state = FOLD_ONLINE_OFF;
        return;
    }
    const long more = fold_online_wait_calls(k->pred_us[0],
                                             fold_online_cost_us(k->pred_us, k->ncand, k->trials),
                                             comm->ctx->config.online_share);
    k->wait_until = more > k->wait_until ? more : k->wait_until;
}

/* A blocking call of a WAITING key: whether it still runs the pick. The ranks count
 * the same calls, so they begin trying at the same one. */
static int still_waiting(fold_comm_t *comm, fold_online_key_t *k, const fold_choice_t *picked)
{
    if (k->waited >= k->wait_until && !k->rivals_known) {
        evaluate_rivals(comm, k, picked);
    }
    if (k->state == FOLD_ONLINE_OFF) {
        return 1;
    }
    if (k->waited < k->wait_until) {
        k->waited++;
        return 1;
    }
    k->state = FOLD_ONLINE_TRYING;
    return 0;
}

int fold_online_ignores(const fold_comm_t *comm, const fold_call_t *call,
                        const fold_choice_t *choice)
{
    return comm->ctx->config.online <= 0 || choice->memory ||
           call->count * fold_dtype_size(call->dtype) <= FOLD_ONLINE_MIN_BYTES;
}

int fold_online_before(fold_comm_t *comm, const fold_call_t *call, fold_choice_t *choice,
                       fold_online_key_t **timed)
{
    *timed = NULL;
    if (fold_online_ignores(comm, call, choice)) {
        return FOLD_OK;
    }
    fold_online_key_t *k = find(comm->online, call->coll, call->count, call->dtype, call->op,
                                call->root);
    if (k == NULL && call->blocking) {
        k = add(comm, call);
    }
    if (k != NULL && k->state == FOLD_ONLINE_WAITING &&
        (!call->blocking || still_waiting(comm, k, choice))) {
        return FOLD_OK;
    }
    if (k == NULL || k->state == FOLD_ONLINE_OFF) {
        return FOLD_OK;
    }
    if (k->state == FOLD_ONLINE_DECIDED) {
        *choice = k->cand[k->pick];
        return FOLD_OK;
    }
    /* Trying: a non-blocking call takes the model's pick and is not counted. */
    if (call->blocking) {
        int cand, at;
        fold_online_slot(k->calls, k->ncand, k->live, k->nlive, k->trials, &cand, &at);
        *choice = k->cand[cand];
        *timed  = k;
    }
    return FOLD_OK;
}

static void log_decision(const fold_comm_t *comm, const fold_online_key_t *k,
                         const double *score, int trials)
{
    char line[512];
    size_t at = 0;
    for (int i = 0; i < k->ncand && at < sizeof(line); i++) {
        char name[96], weight[32] = "";
        fold_select_format_alg(k->cand[i].alg, k->cand[i].seg_bytes, name, sizeof(name));
        if (k->cand[i].root_weight > 0) {
            snprintf(weight, sizeof(weight), ", root's block %d%%", k->cand[i].root_weight);
        }
        at += (size_t)snprintf(line + at, sizeof(line) - at,
                               "%s%s (leaders %d%s) %.2f us (model %.2f)", i ? ", " : "", name,
                               k->cand[i].leaders, weight, score[i], k->pred_us[i]);
    }
    char pick[96];
    fold_select_format_alg(k->cand[k->pick].alg, k->cand[k->pick].seg_bytes, pick,
                           sizeof(pick));
    const int per = per_pass(trials);
    fold_debug("comm %u: %s of %zu %s (%s, root %d): tried %s, the slowest rank's best of "
               "%d passes' medians of %d calls each (%d kept for the second): %s from now on",
               comm->id, fold_coll_name(k->coll), k->count, fold_dtype_name(k->dtype),
               fold_op_name(k->op), k->root, line, fold_online_passes(trials),
               per > 1 ? per - 1 : 1, fold_online_passes(trials) > 1 ? k->nlive : 0, pick);
}

/* score[i]: candidate i's score on its slowest rank, from every rank's scores (one
 * allgather over comm; every rank calls it at the same trial). */
static int agree(fold_comm_t *comm, const fold_online_key_t *k, int trials, int passes,
                 double *score)
{
    float mine[FOLD_ONLINE_MAX_CAND] = {0};
    for (int i = 0; i < k->ncand; i++) {
        int kept = 0;
        for (int j = 0; j < k->nlive; j++) {
            kept |= k->live[j] == i;
        }
        mine[i] = (float)fold_online_score(k->us[i], trials, kept ? passes : 1);
    }
    float *all = malloc((size_t)comm->size * sizeof(mine));
    int status = all == NULL ? FOLD_ERR_NO_MEMORY
                             : fold_comm_allgather(comm, mine, all, sizeof(mine));
    for (int i = 0; i < k->ncand; i++) {
        score[i] = 0;
        for (int r = 0; r < comm->size && status == FOLD_OK; r++) {
            double v = all[(size_t)r * FOLD_ONLINE_MAX_CAND + (size_t)i];
            score[i] = v > score[i] ? v : score[i];
        }
    }
    free(all);
    return status;
}

static void decide(fold_comm_t *comm, fold_online_key_t *k, const double *score,
                   int trials)
{
    k->pick  = fold_online_best(score, k->ncand, FOLD_ONLINE_MARGIN);
    k->state = FOLD_ONLINE_DECIDED;
    log_decision(comm, k, score, trials);
}

int fold_online_after(fold_comm_t *comm, fold_online_key_t *k, double us)
{
    const int trials = k->trials, passes = fold_online_passes(trials);
    const int first_pass = k->ncand * per_pass(trials);
    int cand, at;
    fold_online_slot(k->calls, k->ncand, k->live, k->nlive, trials, &cand, &at);
    k->us[cand][at] = (float)us;
    ++k->calls;
    const int last = k->calls == fold_online_trial_calls(k->ncand, k->nlive, trials);
    if (!last && !(passes > 1 && k->calls == first_pass)) {
        return FOLD_OK;
    }
    /* The end of the first pass (which the rivals far behind leave) or of the last. */
    double score[FOLD_ONLINE_MAX_CAND];
    int status = agree(comm, k, trials, k->calls == first_pass ? 1 : passes, score);
    if (status != FOLD_OK) {
        k->state = FOLD_ONLINE_OFF;
        return status;
    }
    if (!last) {
        k->nlive = fold_online_cull(score, k->ncand, k->live);
        if (k->nlive > 1) {
            return FOLD_OK;
        }
    }
    decide(comm, k, score, trials);
    return FOLD_OK;
}

int fold_online_agreed(const fold_comm_t *comm, fold_coll_t coll, size_t count,
                       fold_dtype_t dtype, fold_op_t op, int root, fold_choice_t *choice)
{
    const fold_online_key_t *k = find(comm->online, coll, count, dtype, op, root);
    if (k == NULL || k->state != FOLD_ONLINE_DECIDED) {
        return 0;
    }
    *choice = k->cand[k->pick];
    return 1;
}

int fold_online_trying(const fold_comm_t *comm, fold_coll_t coll, size_t count,
                       fold_dtype_t dtype, fold_op_t op, int root)
{
    const fold_online_key_t *k = find(comm->online, coll, count, dtype, op, root);
    return k != NULL && k->state == FOLD_ONLINE_TRYING;
}

void fold_online_free(fold_comm_t *comm)
{
    fold_online_t *o = comm->online;
    for (int i = 0; o != NULL && i < o->nkeys; i++) {
        free(o->key[i]);
    }
    free(o);
    comm->online = NULL;
}
