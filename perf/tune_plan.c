/*
 * fold_tune's plan and verdicts (tune.h): the cases of a shape, the fastest case per
 * size, and the size ranges the tuning file's rule and serve lines cover.
 */
#include "tune.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the cases -------------------------------------------------------------- */

/* Leader counts to time: 1, 2, 4, ... below the fewest ranks on a node, and that. */
static int leader_counts(const fold_shape_t *shape, int *out, int cap)
{
    int n = 0, min_ppn = shape->min_ppn > 0 ? shape->min_ppn : 1;
    for (int l = 1; l < min_ppn && n < cap - 1; l *= 2) {
        out[n++] = l;
    }
    out[n++] = min_ppn;
    return n;
}

static int add_case(tune_case_t *out, int n, int cap, const char *alg, int leaders)
{
    if (n < cap) {
        snprintf(out[n].alg, sizeof(out[n].alg), "%s", alg);
        out[n].leaders = leaders;
        return n + 1;
    }
    return n;
}

int tune_plan_cases(fold_coll_t coll, const fold_shape_t *shape, tune_case_t *out, int cap)
{
    int n = 0, leaders[32];
    int nleaders = leader_counts(shape, leaders, 32);
    int shared_node = shape->max_ppn > 1;
    for (int i = 0; fold_alg_all[i] != NULL; i++) {
        const fold_alg_t *a = fold_alg_all[i];
        if (fold_alg_builder(a, coll) == NULL) {
            continue;
        }
        if (!(a->flags & FOLD_ALG_NODE_AWARE)) {
            n = add_case(out, n, cap, a->name, 0);
        } else if (strcmp(a->name, "shm_flat") == 0) {
            /* one node only (across nodes it is dpml); it has no leaders */
            if (shared_node && shape->nnodes == 1) {
                n = add_case(out, n, cap, a->name, 0);
            }
        } else if (shared_node && (shape->nnodes == 1 || !(a->flags & FOLD_ALG_SINGLE_COPY))) {
            /* single copy: one node only (across nodes it is dpml) */
            for (int l = 0; l < nleaders; l++) {
                n = add_case(out, n, cap, a->name, leaders[l]);
            }
        }
    }
    return add_case(out, n, cap, "auto", 0);
}

void tune_case_label(const char *alg, const char *ran, int leaders, char *buf, size_t len)
{
    if (strcmp(alg, "auto") == 0) {
        snprintf(buf, len, "auto:%s", ran != NULL && ran[0] != '\0' ? ran : "?");
    } else if (leaders > 0) {
        snprintf(buf, len, "%s(%d)", alg, leaders);
    } else {
        snprintf(buf, len, "%s", alg);
    }
}

int tune_segment_tries(size_t bytes)
{
    for (int g = 0; g < FOLD_SELECT_SEG_TRIES; g++) {
        if (bytes > fold_select_seg_tries[g]) {
            return FOLD_SELECT_SEG_TRIES;   /* cut into several by at least one of them */
        }
    }
    return 0;
}

int tune_segment_variants(const tune_case_t *fastest, size_t bytes, tune_case_t *out, int cap)
{
    const fold_alg_t *a = fold_alg_find(fastest->alg);
    int n = 0;
    for (int g = 0; a != NULL && g < tune_segment_tries(bytes) && n < cap; g++, n++) {
        fold_select_format_alg(a, fold_select_seg_tries[g], out[n].alg, sizeof(out[n].alg));
        out[n].leaders = fastest->leaders;
    }
    return n;
}

/* ---- verdicts per size ------------------------------------------------------ */

static int compare_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int usable(const tune_point_t *p)
{
    return isfinite(p->us) && p->us >= 0;
}

int tune_fastest(const tune_point_t *pts, size_t npts, fold_coll_t coll, size_t bytes,
                 const char *alg)
{
    int best = -1;
    for (size_t i = 0; i < npts; i++) {
        const tune_point_t *p = &pts[i];
        if (p->coll != coll || p->bytes != bytes || !usable(p) ||
            strcmp(p->alg, "auto") == 0 || (alg != NULL && strcmp(p->alg, alg) != 0)) {
            continue;
        }
        if (best < 0 || p->us < pts[best].us) {
            best = (int)i;
        }
    }
    return best;
}

/* How far apart two timings of the same algorithm came out at (coll, bytes): auto
 * against the case of the algorithm auto ran (the closest of its leader counts).
 * 0 when auto was not measured there. */
static double noise_at(const tune_point_t *pts, size_t npts, fold_coll_t coll, size_t bytes)
{
    const tune_point_t *a = NULL;
    for (size_t i = 0; i < npts && a == NULL; i++) {
        if (pts[i].coll == coll && pts[i].bytes == bytes && strcmp(pts[i].alg, "auto") == 0 &&
            usable(&pts[i])) {
            a = &pts[i];
        }
    }
    double noise = INFINITY;
    for (size_t i = 0; a != NULL && i < npts; i++) {
        const tune_point_t *p = &pts[i];
        if (p->coll == coll && p->bytes == bytes && strcmp(p->alg, a->ran) == 0 && usable(p) &&
            p->us > 0 && a->us > 0) {
            double d = fabs(log(a->us / p->us));
            noise = d < noise ? d : noise;
        }
    }
    return isfinite(noise) ? exp(noise) - 1 : 0;
}

size_t tune_decide_sizes(const tune_point_t *pts, size_t npts, fold_coll_t coll,
                         double tolerance, tune_size_t *out, size_t cap)
{
    size_t *sizes = malloc((npts ? npts : 1) * sizeof(size_t));
    double *mpi = malloc((npts ? npts : 1) * sizeof(double));
    size_t nsizes = 0, n = 0;
    if (sizes == NULL || mpi == NULL) {
        free(sizes);
        free(mpi);
        return 0;
    }
    for (size_t i = 0; i < npts; i++) {
        if (pts[i].coll == coll) {
            sizes[nsizes++] = pts[i].bytes;
        }
    }
    qsort(sizes, nsizes, sizeof(size_t), compare_size);
    const char *previous = NULL;
    for (size_t s = 0; s < nsizes && n < cap; s++) {
        if (s > 0 && sizes[s] == sizes[s - 1]) {
            continue;
        }
        size_t bytes = sizes[s];
        int best = tune_fastest(pts, npts, coll, bytes, NULL);
        if (best < 0) {
            continue;   /* only auto was measured here: nothing to decide */
        }
        int chosen = best;
        double tol = tolerance;
        if (tolerance > 0) {
            double noise = noise_at(pts, npts, coll, bytes);
            tol = noise > tol ? (noise < TUNE_MAX_TOLERANCE ? noise : TUNE_MAX_TOLERANCE) : tol;
        }
        if (previous != NULL && strcmp(previous, pts[best].alg) != 0) {
            int keep = tune_fastest(pts, npts, coll, bytes, previous);
            if (keep >= 0 && pts[keep].us <= pts[best].us * (1.0 + tol)) {
                chosen = keep;
            }
        }
        tune_size_t *v = &out[n++];
        memset(v, 0, sizeof(*v));
        v->coll      = coll;
        v->bytes     = bytes;
        v->best      = best;
        v->chosen    = chosen;
        v->auto_case = -1;
        v->fold_us   = pts[chosen].us;
        v->tolerance = tol;
        size_t nmpi = 0;
        for (size_t i = 0; i < npts; i++) {
            const tune_point_t *p = &pts[i];
            if (p->coll != coll || p->bytes != bytes) {
                continue;
            }
            if (strcmp(p->alg, "auto") == 0 && usable(p)) {
                v->auto_case = (int)i;
            }
            if (isfinite(p->mpi_us) && p->mpi_us >= 0) {
                mpi[nmpi++] = p->mpi_us;
            }
        }
        if (nmpi == 0) {
            v->mpi_us      = NAN;
            v->fold_serves = -1;
        } else {
            qsort(mpi, nmpi, sizeof(double), compare_double);
            v->mpi_us = nmpi % 2 ? mpi[nmpi / 2] : 0.5 * (mpi[nmpi / 2 - 1] + mpi[nmpi / 2]);
            v->fold_serves = v->fold_us <= v->mpi_us;
        }
        previous = pts[chosen].alg;
    }
    free(sizes);
    free(mpi);
    return n;
}

/* ---- ranges ----------------------------------------------------------------- */

void tune_format_bytes(size_t bytes, char *buf, size_t len)
{
    if (bytes >= ((size_t)1 << 30) && bytes % ((size_t)1 << 30) == 0) {
        snprintf(buf, len, "%zu GiB", bytes >> 30);
    } else if (bytes >= ((size_t)1 << 20) && bytes % ((size_t)1 << 20) == 0) {
        snprintf(buf, len, "%zu MiB", bytes >> 20);
    } else if (bytes >= 1024 && bytes % 1024 == 0) {
        snprintf(buf, len, "%zu KiB", bytes >> 10);
    } else if (bytes >= ((size_t)1 << 20)) {
        snprintf(buf, len, "%.1f MiB", (double)bytes / (1 << 20));
    } else if (bytes >= 1024) {
        snprintf(buf, len, "%.1f KiB", (double)bytes / 1024);
    } else {
        snprintf(buf, len, "%zu B", bytes);
    }
}

static void span_text(size_t first, size_t last, char *buf, size_t len)
{
    char a[32], b[32];
    tune_format_bytes(first, a, sizeof(a));
    tune_format_bytes(last, b, sizeof(b));
    if (first == last) {
        snprintf(buf, len, "%s", a);
    } else {
        snprintf(buf, len, "%s..%s", a, b);
    }
}

static void appendf(char *buf, size_t len, const char *fmt, const char *a, const char *b)
{
    size_t used = strlen(buf);
    if (used < len) {
        snprintf(buf + used, len - used, fmt, a, b);
    }
}

/* Merges sizes[i..] while key(i) is the same; fills the range's bounds. Returns the
 * index after the run. */
typedef int (*tune_key_fn)(const tune_point_t *pts, const tune_size_t *a,
                           const tune_size_t *b);

static size_t run_end(const tune_point_t *pts, const tune_size_t *sizes, size_t nsizes,
                      size_t i, tune_key_fn same)
{
    size_t j = i + 1;
    while (j < nsizes && same(pts, &sizes[i], &sizes[j])) {
        j++;
    }
    return j;
}

static void range_bounds(const tune_size_t *sizes, size_t nsizes, size_t i, size_t j,
                         tune_range_t *r)
{
    memset(r, 0, sizeof(*r));
    r->coll  = sizes[i].coll;
    r->lo    = i == 0 ? 0 : sizes[i].bytes;
    /* The last range stops after the largest size measured: above it the model
     * decides, not a winner measured at smaller sizes (a --quick sweep to 1 MiB
     * must not fix what runs at 64 MiB). */
    r->hi    = j >= nsizes ? sizes[nsizes - 1].bytes + 1 : sizes[j].bytes;
    r->first = sizes[i].bytes;
    r->last  = sizes[j - 1].bytes;
}

static int same_alg(const tune_point_t *pts, const tune_size_t *a, const tune_size_t *b)
{
    return strcmp(pts[a->chosen].alg, pts[b->chosen].alg) == 0;
}

static int same_serve(const tune_point_t *pts, const tune_size_t *a, const tune_size_t *b)
{
    (void)pts;
    return a->fold_serves == b->fold_serves;
}

size_t tune_rule_ranges(const tune_point_t *pts, const tune_size_t *sizes, size_t nsizes,
                        tune_range_t *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < nsizes && n < cap;) {
        size_t j = run_end(pts, sizes, nsizes, i, same_alg);
        tune_range_t *r = &out[n++];
        range_bounds(sizes, nsizes, i, j, r);
        const tune_point_t *c = &pts[sizes[i].chosen];
        snprintf(r->what, sizeof(r->what), "%s", c->alg);
        char span[80];
        span_text(r->first, r->last, span, sizeof(span));
        snprintf(r->note, sizeof(r->note), "measured %s", span);
        /* the leader counts that measured fastest, size by size, merged */
        for (size_t k = i; k < j && c->leaders > 0;) {
            int leaders = pts[sizes[k].chosen].leaders;
            size_t m = k + 1;
            while (m < j && pts[sizes[m].chosen].leaders == leaders) {
                m++;
            }
            char count[16];
            snprintf(count, sizeof(count), "%d", leaders);
            span_text(sizes[k].bytes, sizes[m - 1].bytes, span, sizeof(span));
            appendf(r->note, sizeof(r->note), k == i ? "; leaders %s at %s" : ", %s at %s",
                    count, span);
            k = m;
        }
        i = j;
    }
    return n;
}

size_t tune_serve_ranges(const tune_point_t *pts, const tune_size_t *sizes, size_t nsizes,
                         tune_range_t *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < nsizes && n < cap;) {
        size_t j = run_end(pts, sizes, nsizes, i, same_serve);
        if (sizes[i].fold_serves < 0) {
            i = j;
            continue;
        }
        tune_range_t *r = &out[n++];
        range_bounds(sizes, nsizes, i, j, r);
        snprintf(r->what, sizeof(r->what), "%s", sizes[i].fold_serves ? "fold" : "mpi");
        double lo = INFINITY, hi = 0;
        for (size_t k = i; k < j; k++) {
            double ratio = sizes[k].fold_us > 0 ? sizes[k].mpi_us / sizes[k].fold_us : 1;
            lo = ratio < lo ? ratio : lo;
            hi = ratio > hi ? ratio : hi;
        }
        char span[80];
        span_text(r->first, r->last, span, sizeof(span));
        snprintf(r->note, sizeof(r->note), "measured %s; MPI time / fold time %.2f..%.2f",
                 span, lo, hi);
        i = j;
    }
    return n;
}

void tune_range_where(const tune_range_t *r, const fold_shape_t *shape, char *buf, size_t len)
{
    fold_tune_rule_t rule;
    memset(&rule, 0, sizeof(rule));
    rule.coll      = r->coll;
    rule.min_bytes = r->lo;
    rule.max_bytes = r->hi;
    rule.ranks     = (fold_range_t){1, LONG_MAX};
    rule.nodes     = (fold_range_t){shape->nnodes, shape->nnodes};
    rule.ppn       = (fold_range_t){shape->max_ppn, shape->max_ppn};
    rule.nalgs     = 0;
    fold_tune_rule_format(&rule, buf, len);
    size_t used = strlen(buf);
    if (used > 0 && buf[used - 1] == ':') {
        buf[used - 1] = '\0';   /* no algorithms: the caller appends its last field */
    }
}
