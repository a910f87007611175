/*
 * Fitting the cost model to measurements (tune_fit.h).
 *
 * Errors are compared as logarithms, so a 10% miss at 1 us weighs what a 10% miss at
 * 1 ms does: the small sizes, where step_us and flag_us matter, are not drowned by the
 * large ones.
 */
#include "tune_fit.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- predictions ------------------------------------------------------------ */

int tune_model_open(tune_model_t *m, int size, const int *node_of)
{
    m->ctx = NULL;
    int status = fold_context_create_virtual(size, node_of, &m->ctx);
    if (status != FOLD_OK) {
        return status;
    }
    /* Selection rules of a tuning file must not steer the model's own choices. */
    fold_tune_file_release(&m->ctx->file);
    status = fold_select_topos(m->ctx->world);
    if (status != FOLD_OK) {
        tune_model_close(m);
    }
    return status;
}

void tune_model_close(tune_model_t *m)
{
    if (m->ctx != NULL) {
        fold_context_free_virtual(m->ctx);
        m->ctx = NULL;
    }
}

double tune_model_predict(tune_model_t *m, const fold_model_params_t *p, fold_coll_t coll,
                          const fold_alg_t *alg, size_t seg_bytes, int leaders, size_t bytes)
{
    if (m == NULL || m->ctx == NULL || alg == NULL || fold_alg_builder(alg, coll) == NULL) {
        return INFINITY;
    }
    m->ctx->model               = *p;
    m->ctx->config.dpml_leaders = leaders > 0 ? leaders : 0;
    fold_choice_t choice;
    return fold_select_evaluate_below(m->ctx->world, coll, alg, seg_bytes, bytes, INFINITY,
                                      &choice);
}

double tune_obs_predict(const tune_obs_t *o, const fold_model_params_t *p)
{
    return tune_model_predict(o->model, p, o->coll, o->alg, o->seg_bytes, o->leaders, o->bytes);
}

/* ---- anchors ---------------------------------------------------------------- */

static double *param_at(fold_model_params_t *p, size_t offset)
{
    return (double *)((char *)p + offset);
}

/* The time grows (about linearly) with the anchored parameter: a secant search from
 * 0 and 1 us, a few steps, kept within [0, the measured time]. */
static void solve_anchor(fold_model_params_t *p, const tune_anchor_t *a)
{
    double *x = param_at(p, a->offset);
    double target = a->obs.us, original = *x;
    double x0 = 0, x1 = 1;
    *x = x0;
    double y0 = tune_obs_predict(&a->obs, p) - target;
    if (!isfinite(y0) || y0 >= 0) {
        *x = isfinite(y0) ? 0 : original;   /* slower than measured even without it */
        return;
    }
    *x = x1;
    double y1 = tune_obs_predict(&a->obs, p) - target;
    if (!isfinite(y1) || y1 - y0 <= 1e-12) {
        *x = original;   /* the time does not depend on it here */
        return;
    }
    for (int it = 0; it < 6 && isfinite(y0) && isfinite(y1) && fabs(y1 - y0) > 1e-12; it++) {
        double x2 = x1 - y1 * (x1 - x0) / (y1 - y0);
        x2 = x2 < 0 ? 0 : (x2 > target ? target : x2);
        x0 = x1;
        y0 = y1;
        x1 = x2;
        *x = x1;
        y1 = tune_obs_predict(&a->obs, p) - target;
        if (fabs(y1) < 1e-6 * target) {
            break;
        }
    }
    *x = isfinite(x1) ? x1 : 0;
}

void tune_solve_anchors(fold_model_params_t *p, const tune_anchor_t *anchors, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        solve_anchor(p, &anchors[i]);
    }
}

/* ---- the objective ---------------------------------------------------------- */

/* A time the model cannot produce counts as a miss by a factor of e^4. */
#define MISS_PENALTY 16.0
#define TIME_FLOOR_US 1e-3

static double log_error(double predicted, double measured)
{
    if (!isfinite(predicted)) {
        return MISS_PENALTY;
    }
    double e = log(fmax(predicted, TIME_FLOOR_US)) - log(fmax(measured, TIME_FLOOR_US));
    return e * e;
}

/* Over the observations and the anchors' own measurements: an anchor the model
 * cannot reproduce (the rest already costs more) counts like any other miss. */
static double objective(const fold_model_params_t *p, const tune_obs_t *obs, size_t n,
                        const tune_anchor_t *anchors, size_t nanchors)
{
    fold_model_params_t q = *p;
    tune_solve_anchors(&q, anchors, nanchors);
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += log_error(tune_obs_predict(&obs[i], &q), obs[i].us);
    }
    for (size_t i = 0; i < nanchors; i++) {
        sum += log_error(tune_obs_predict(&anchors[i].obs, &q), anchors[i].obs.us);
    }
    return sum;
}

double tune_log_rms(const fold_model_params_t *p, const tune_obs_t *obs, size_t n,
                    const tune_anchor_t *anchors, size_t nanchors)
{
    size_t count = n + nanchors;
    return count ? sqrt(objective(p, obs, n, anchors, nanchors) / (double)count) : NAN;
}

/* ---- rates ------------------------------------------------------------------ */

/* Mean of log(predicted / measured): decreases as the bandwidth grows. */
static double mean_log_ratio(fold_model_params_t *p, const tune_obs_t *obs, size_t n,
                             const tune_anchor_t *anchors, size_t nanchors)
{
    fold_model_params_t q = *p;
    tune_solve_anchors(&q, anchors, nanchors);
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        double pred = tune_obs_predict(&obs[i], &q);
        if (!isfinite(pred)) {
            return INFINITY;
        }
        sum += log(fmax(pred, TIME_FLOOR_US)) - log(fmax(obs[i].us, TIME_FLOOR_US));
    }
    return sum / (double)n;
}

int tune_solve_rate(fold_model_params_t *p, const tune_obs_t *obs, size_t n,
                    const tune_anchor_t *anchors, size_t nanchors, size_t offset,
                    double lo, double hi)
{
    if (n == 0) {
        return -1;
    }
    fold_model_params_t q = *p;
    double *x = param_at(&q, offset);
    double a = log(lo), b = log(hi);
    *x = hi;
    if (mean_log_ratio(&q, obs, n, anchors, nanchors) > 0) {
        *param_at(p, offset) = hi;   /* too slow even at hi: the rest dominates */
        return 0;
    }
    *x = lo;
    if (mean_log_ratio(&q, obs, n, anchors, nanchors) < 0) {
        *param_at(p, offset) = lo;
        return 0;
    }
    for (int it = 0; it < 60 && b - a > 1e-6; it++) {
        double mid = 0.5 * (a + b);
        *x = exp(mid);
        if (mean_log_ratio(&q, obs, n, anchors, nanchors) > 0) {
            a = mid;   /* predicted too slow: more bandwidth */
        } else {
            b = mid;
        }
    }
    *param_at(p, offset) = exp(0.5 * (a + b));
    return 0;
}

void tune_solve_rates(fold_model_params_t *p, const tune_rate_t *rates, size_t nrates,
                      const tune_anchor_t *anchors, size_t nanchors)
{
    for (size_t i = 0; i < nrates; i++) {
        tune_solve_rate(p, rates[i].obs, rates[i].n, anchors, nanchors, rates[i].offset,
                        rates[i].lo, rates[i].hi);
    }
}

/* ---- step_us and flag_us ---------------------------------------------------- */

typedef struct fit_state {
    fold_model_params_t  p;
    const tune_obs_t    *obs;
    size_t               n;
    const tune_anchor_t *anchors;
    size_t               nanchors;
    double               best;
    int                  evaluations;
} fit_state_t;

/* Evaluates (step, flag); takes it when strictly better. */
static int try_point(fit_state_t *s, double step, double flag)
{
    fold_model_params_t q = s->p;
    q.step_us = step;
    q.flag_us = flag;
    double e = objective(&q, s->obs, s->n, s->anchors, s->nanchors);
    s->evaluations++;
    if (e < s->best * (1 - 1e-9)) {
        s->best = e;
        s->p    = q;
        return 1;
    }
    return 0;
}

/* log(predicted / measured) of every observation, the anchors solved first. */
static double residual(const tune_obs_t *o, const fold_model_params_t *q)
{
    double pred = tune_obs_predict(o, q);
    return isfinite(pred) ? log(fmax(pred, TIME_FLOOR_US)) - log(fmax(o->us, TIME_FLOOR_US))
                          : sqrt(MISS_PENALTY);
}

/* The residuals objective() sums the squares of: n observations, then the anchors. */
static void residuals(const fold_model_params_t *p, const tune_obs_t *obs, size_t n,
                      const tune_anchor_t *anchors, size_t nanchors, double *r)
{
    fold_model_params_t q = *p;
    tune_solve_anchors(&q, anchors, nanchors);
    for (size_t i = 0; i < n; i++) {
        r[i] = residual(&obs[i], &q);
    }
    for (size_t i = 0; i < nanchors; i++) {
        r[n + i] = residual(&anchors[i].obs, &q);
    }
}

static double sum_squares(const double *r, size_t n)
{
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        e += r[i] * r[i];
    }
    return e;
}

#define FIT_MIN_US 1e-4
#define FIT_MAX_US 20.0

static void set_log(fold_model_params_t *q, const double *x)
{
    q->step_us = fmin(fmax(exp(x[0]), FIT_MIN_US), FIT_MAX_US);
    q->flag_us = fmin(fmax(exp(x[1]), FIT_MIN_US), FIT_MAX_US);
}

/* Levenberg-Marquardt over (log step_us, log flag_us) from s->p, with a numerical
 * Jacobian; takes a point only when it lowers the error. */
static void levenberg_marquardt(fit_state_t *s)
{
    size_t n = s->n + s->nanchors;   /* residuals */
    double *r = malloc(n * sizeof(double)), *rt = malloc(n * sizeof(double));
    double *jac = malloc(2 * n * sizeof(double));
    if (r == NULL || rt == NULL || jac == NULL) {
        free(r);
        free(rt);
        free(jac);
        return;
    }
    const double h = 1e-4;
    double lambda = 1e-3;
    double x[2] = {log(s->p.step_us), log(s->p.flag_us)};
    residuals(&s->p, s->obs, s->n, s->anchors, s->nanchors, r);
    double e = sum_squares(r, n);
    for (int it = 0; it < 100 && e > 0; it++) {
        for (int k = 0; k < 2; k++) {
            double xk[2] = {x[0], x[1]};
            xk[k] += h;
            fold_model_params_t q = s->p;
            set_log(&q, xk);
            residuals(&q, s->obs, s->n, s->anchors, s->nanchors, rt);
            s->evaluations++;
            for (size_t i = 0; i < n; i++) {
                jac[k * n + i] = (rt[i] - r[i]) / h;
            }
        }
        double a00 = 0, a01 = 0, a11 = 0, g0 = 0, g1 = 0;
        for (size_t i = 0; i < n; i++) {
            a00 += jac[i] * jac[i];
            a01 += jac[i] * jac[n + i];
            a11 += jac[n + i] * jac[n + i];
            g0 += jac[i] * r[i];
            g1 += jac[n + i] * r[i];
        }
        int improved = 0;
        for (int tries = 0; tries < 12 && !improved; tries++) {
            double b00 = a00 + lambda * (a00 + 1e-12), b11 = a11 + lambda * (a11 + 1e-12);
            double det = b00 * b11 - a01 * a01;
            if (!(fabs(det) > 0)) {
                lambda *= 4;
                continue;
            }
            double dx0 = -(b11 * g0 - a01 * g1) / det, dx1 = -(b00 * g1 - a01 * g0) / det;
            double xt[2] = {x[0] + dx0, x[1] + dx1};
            fold_model_params_t q = s->p;
            set_log(&q, xt);
            residuals(&q, s->obs, s->n, s->anchors, s->nanchors, rt);
            s->evaluations++;
            double et = sum_squares(rt, n);
            if (et < e * (1 - 1e-12)) {
                improved = 1;
                s->p = q;
                x[0] = log(q.step_us);
                x[1] = log(q.flag_us);
                memcpy(r, rt, n * sizeof(double));
                double gain = e - et;
                e = et;
                lambda = fmax(lambda / 3, 1e-9);
                if (gain < 1e-14 * (1 + e) || (fabs(dx0) < 1e-9 && fabs(dx1) < 1e-9)) {
                    it = 100;   /* converged */
                }
            } else {
                lambda *= 4;
            }
        }
        if (!improved) {
            break;
        }
    }
    s->best = e;
    free(r);
    free(rt);
    free(jac);
}

int tune_fit_overheads(fold_model_params_t *p, const tune_obs_t *obs, size_t n,
                       const tune_anchor_t *anchors, size_t nanchors, tune_fit_report_t *rep)
{
    static const double grid[] = {0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2};
    const size_t ngrid = sizeof(grid) / sizeof(grid[0]);
    fit_state_t s = {.p = *p, .obs = obs, .n = n, .anchors = anchors, .nanchors = nanchors};
    memset(rep, 0, sizeof(*rep));
    rep->nobs = n;
    if (n == 0) {
        tune_solve_anchors(p, anchors, nanchors);
        return -1;
    }
    s.best = objective(&s.p, obs, n, anchors, nanchors);
    s.evaluations = 1;
    rep->rms_before = sqrt(s.best / (double)(n + nanchors));
    /* The grid takes a point only when it is strictly better, and tries the start's
     * value of each parameter first, so a parameter the measurements do not depend
     * on (flag_us without node-aware algorithms) keeps its value. */
    double step0 = s.p.step_us, flag0 = s.p.flag_us;
    for (size_t j = 0; j < ngrid; j++) {
        try_point(&s, step0, grid[j]);
    }
    for (size_t i = 0; i < ngrid; i++) {
        try_point(&s, grid[i], flag0);
        for (size_t j = 0; j < ngrid; j++) {
            try_point(&s, grid[i], grid[j]);
        }
    }
    /* Then Levenberg-Marquardt on the log residuals in log space: the two parameters
     * trade off along a narrow valley that a search along directions follows badly. */
    levenberg_marquardt(&s);
    *p = s.p;
    tune_solve_anchors(p, anchors, nanchors);
    rep->rms_after   = sqrt(s.best / (double)(n + nanchors));
    rep->evaluations = s.evaluations;
    return 0;
}

int tune_fit_grid(fold_model_params_t *p, size_t offset, const double *values, size_t nvalues,
                  const tune_obs_t *obs, size_t n, const tune_anchor_t *anchors,
                  size_t nanchors, double min_gain, tune_fit_report_t *rep)
{
    memset(rep, 0, sizeof(*rep));
    rep->nobs = n;
    if (n == 0) {
        return 0;
    }
    double start = objective(p, obs, n, anchors, nanchors), best = start;
    double kept = *param_at(p, offset), best_value = kept;
    rep->evaluations = 1;
    for (size_t i = 0; i < nvalues; i++) {
        fold_model_params_t q = *p;
        *param_at(&q, offset) = values[i];
        double e = objective(&q, obs, n, anchors, nanchors);
        rep->evaluations++;
        if (e < best * (1 - 1e-9)) {
            best       = e;
            best_value = values[i];
        }
    }
    rep->rms_before = sqrt(start / (double)(n + nanchors));
    if (best_value != kept && best <= start * (1 - min_gain)) {
        *param_at(p, offset) = best_value;
        tune_solve_anchors(p, anchors, nanchors);
        rep->rms_after = sqrt(best / (double)(n + nanchors));
        return 1;
    }
    rep->rms_after = rep->rms_before;
    return 0;
}

int tune_fit_eager(fold_model_params_t *p, const tune_obs_t *obs, size_t n,
                   const tune_anchor_t *anchors, size_t nanchors, double min_gain,
                   tune_fit_report_t *rep)
{
    static const double eager[] = {1024, 2048, 4096, 8192, 16384, 32768, 65536};
    return tune_fit_grid(p, offsetof(fold_model_params_t, eager_bytes), eager,
                         sizeof(eager) / sizeof(eager[0]), obs, n, anchors, nanchors, min_gain,
                         rep);
}

int tune_fit_shm(fold_model_params_t *p, const tune_obs_t *obs, size_t n,
                 const tune_anchor_t *anchors, size_t nanchors, double min_gain,
                 tune_fit_report_t *rep)
{
    static const double gbs[] = {1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48};
    return tune_fit_grid(p, offsetof(fold_model_params_t, shm_gbs), gbs,
                         sizeof(gbs) / sizeof(gbs[0]), obs, n, anchors, nanchors, min_gain, rep);
}

int tune_fit_cache(fold_model_params_t *p, const tune_obs_t *obs, size_t n,
                   const tune_anchor_t *anchors, size_t nanchors, const tune_rate_t *rates,
                   size_t nrates, double min_gain, tune_fit_report_t *rep)
{
    memset(rep, 0, sizeof(*rep));
    rep->nobs = n;
    if (n == 0) {
        return 0;
    }
    double start = objective(p, obs, n, anchors, nanchors), best = start;
    fold_model_params_t best_p = *p;
    rep->evaluations = 1;
    double limit = 2 * p->cache_bytes;
    for (double cache = 256.0 * 1024; cache <= limit; cache *= 2) {
        fold_model_params_t q = *p;
        q.cache_bytes = cache;
        tune_solve_rates(&q, rates, nrates, anchors, nanchors);
        double e = objective(&q, obs, n, anchors, nanchors);
        rep->evaluations++;
        /* among equally good sizes, the one nearest the start (hwloc's) */
        int tie = fabs(e - best) <= 1e-9 * (best + 1e-300) &&
                  fabs(log(cache / p->cache_bytes)) < fabs(log(best_p.cache_bytes / p->cache_bytes));
        if (e < best * (1 - 1e-9) || tie) {
            best   = e;
            best_p = q;
        }
    }
    rep->rms_before = sqrt(start / (double)(n + nanchors));
    if (best_p.cache_bytes != p->cache_bytes && best <= start * (1 - min_gain)) {
        *p = best_p;
        tune_solve_anchors(p, anchors, nanchors);
        rep->rms_after = sqrt(best / (double)(n + nanchors));
        return 1;
    }
    rep->rms_after = rep->rms_before;
    return 0;
}
