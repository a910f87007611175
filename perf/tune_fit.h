/*
 * The cost model against measurements: predictions on a shape (through a virtual
 * context, exactly as selection makes them), parameters solved so that the model
 * reproduces a measurement (latencies, bandwidths), and the fit of what cannot be
 * measured directly (step_us, flag_us, eager_bytes) by minimising the squared log
 * error over many measurements. Pure computation: every rank given the same
 * measurements gets the same parameters.
 */
#ifndef FOLD_TUNE_FIT_H
#define FOLD_TUNE_FIT_H

#include "comm.h"

#include <stddef.h>

/* The model's view of one shape: a virtual context with its world communicator. */
typedef struct tune_model {
    fold_context_t *ctx;
} tune_model_t;

/* size ranks, rank r on node node_of[r] (0-based). Returns a fold status. */
int  tune_model_open(tune_model_t *m, int size, const int *node_of);
void tune_model_close(tune_model_t *m);

/* The predicted time of alg for bytes (float32 sum) on the model's shape with
 * parameters p: cut into segments of seg_bytes (0: the segment the model would pick),
 * for node-aware algorithms with `leaders` per node (0: the count the model itself
 * would pick). INFINITY when the model cannot replay it. */
double tune_model_predict(tune_model_t *m, const fold_model_params_t *p, fold_coll_t coll,
                          const fold_alg_t *alg, size_t seg_bytes, int leaders, size_t bytes);

/* One measured time and what it was measured on. */
typedef struct tune_obs {
    tune_model_t     *model;
    fold_coll_t       coll;
    const fold_alg_t *alg;
    size_t            seg_bytes;   /* alg@SIZE's; 0: the model's pick */
    int               leaders;
    size_t            bytes;
    double            us;
} tune_obs_t;

double tune_obs_predict(const tune_obs_t *o, const fold_model_params_t *p);

/* A parameter that takes whatever value makes the model reproduce one measurement
 * (a latency: the time grows with it). */
typedef struct tune_anchor {
    tune_obs_t obs;
    size_t     offset;     /* offsetof(fold_model_params_t, the parameter) */
} tune_anchor_t;

/* Solves every anchor's parameter in p (kept >= 0 and <= the measured time). */
void tune_solve_anchors(fold_model_params_t *p, const tune_anchor_t *anchors, size_t n);

/* Root-mean-square of log(predicted / measured) over the observations, with the
 * anchors solved first in a copy of p. */
double tune_log_rms(const fold_model_params_t *p, const tune_obs_t *obs, size_t n,
                    const tune_anchor_t *anchors, size_t nanchors);

/* Sets the bandwidth (GB/s) at `offset` so that the model matches the observations
 * on average (the mean of log(predicted / measured) is 0), by bisection on its
 * logarithm within [lo, hi]. Returns 0, or -1 without observations (p unchanged). */
int tune_solve_rate(fold_model_params_t *p, const tune_obs_t *obs, size_t n,
                    const tune_anchor_t *anchors, size_t nanchors, size_t offset,
                    double lo, double hi);

/* A bandwidth and the observations that determine it (tune_solve_rate). */
typedef struct tune_rate {
    const tune_obs_t *obs;
    size_t            n;
    size_t            offset;
    double            lo, hi;
} tune_rate_t;

/* tune_solve_rate for each; those without observations keep their value. */
void tune_solve_rates(fold_model_params_t *p, const tune_rate_t *rates, size_t nrates,
                      const tune_anchor_t *anchors, size_t nanchors);

typedef struct tune_fit_report {
    size_t nobs;
    double rms_before;    /* log rms error with the starting parameters */
    double rms_after;
    int    evaluations;   /* of the objective */
} tune_fit_report_t;

/* Fits step_us and flag_us (a log grid, then Levenberg-Marquardt on the log
 * residuals), starting from p and keeping a parameter that does not change the error.
 * The anchors are re-solved for every candidate and are solved in p at the end. */
int tune_fit_overheads(fold_model_params_t *p, const tune_obs_t *obs, size_t n,
                       const tune_anchor_t *anchors, size_t nanchors, tune_fit_report_t *rep);

/* Tries cache_bytes among 256 KiB, 512 KiB, ... up to twice its value, the rates
 * re-solved for each (the reductions of their measurements may leave the cache);
 * keeps the best (of equally good ones, the nearest to the start) only when it
 * lowers the error over obs by at least min_gain.
 * Returns 1 when it changed p. */
int tune_fit_cache(fold_model_params_t *p, const tune_obs_t *obs, size_t n,
                   const tune_anchor_t *anchors, size_t nanchors, const tune_rate_t *rates,
                   size_t nrates, double min_gain, tune_fit_report_t *rep);

/* Tries each of values for the parameter at offset (in fold_model_params_t); keeps
 * the best only when it lowers the error by at least min_gain (relative). Returns 1
 * when it changed p. */
int tune_fit_grid(fold_model_params_t *p, size_t offset, const double *values, size_t nvalues,
                  const tune_obs_t *obs, size_t n, const tune_anchor_t *anchors,
                  size_t nanchors, double min_gain, tune_fit_report_t *rep);

/* shm_gbs among 1.5 .. 48 GB/s: how fast a core reads what another core wrote. */
int tune_fit_shm(fold_model_params_t *p, const tune_obs_t *obs, size_t n,
                 const tune_anchor_t *anchors, size_t nanchors, double min_gain,
                 tune_fit_report_t *rep);

/* Tries eager_bytes among 1k, 2k, ..., 64k (tune_fit_grid). */
int tune_fit_eager(fold_model_params_t *p, const tune_obs_t *obs, size_t n,
                   const tune_anchor_t *anchors, size_t nanchors, double min_gain,
                   tune_fit_report_t *rep);

#endif
