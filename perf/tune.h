/*
 * fold_tune's pure parts: which cases a shape calls for, the verdict at every measured
 * size (the fastest case, the algorithm a rule names, fold or MPI), those verdicts
 * merged into size ranges, and the tuning file written from them (select.h describes
 * the format). Nothing here measures or communicates, so tests/perf covers it all.
 */
#ifndef FOLD_TUNE_H
#define FOLD_TUNE_H

#include "coll/model.h"
#include "coll/select.h"

#include <stddef.h>
#include <stdio.h>

#define TUNE_NAME_LEN 64
#define TUNE_MAX_CASES 32

/* Adjacent sizes keep the previous size's algorithm while it is this close to the
 * fastest (relative), so that noise does not split a range; more where the size's own
 * timings disagree by more (auto against the same algorithm timed on its own), up to
 * TUNE_MAX_TOLERANCE. */
#define TUNE_MERGE_TOLERANCE 0.03
#define TUNE_MAX_TOLERANCE   0.25

/* One thing to time at every size: an algorithm with a leader count, or "auto". */
typedef struct tune_case {
    char alg[TUNE_NAME_LEN];   /* algorithm name, or "auto" (fold's own choice) */
    int  leaders;              /* node-aware: FOLD_DPML_LEADERS; 0: fold's choice */
} tune_case_t;

/* The cases for coll on a shape: every algorithm implementing it that fits the
 * shape (node-aware ones where a node holds several ranks, shm_flat on one node
 * only), node-aware ones once per leader count 1, 2, 4, ... and min_ppn, then
 * "auto". Returns how many (at most cap). */
int tune_plan_cases(fold_coll_t coll, const fold_shape_t *shape, tune_case_t *out, int cap);

/* "dpml(2)", "ring", "dpml@32k(2)", "auto:shm_flat" */
void tune_case_label(const char *alg, const char *ran, int leaders, char *buf, size_t len);

/* One measured (case, size). */
typedef struct tune_point {
    fold_coll_t coll;
    size_t      bytes;
    char        alg[TUNE_NAME_LEN];   /* as requested: an algorithm, with @SIZE where its
                                         segment was fixed, or "auto" */
    char        ran[TUNE_NAME_LEN];   /* what fold ran (auto: its choice) */
    int         leaders;              /* forced leaders per node; 0: none */
    double      us;                   /* median over iterations of the slowest rank */
    double      mpi_us;               /* the MPI library's median beside it; NAN: none */
} tune_point_t;

/* The cases to time after the others of a size, for its fastest case (an algorithm
 * without "@", not "auto"): alg@SIZE for each of fold_select_seg_tries with the same
 * leaders, none where a message of `bytes` is one segment whatever the size. The
 * plain case ran with the segment the model picked; these find out whether another
 * one is faster. Returns how many (at most cap). */
int tune_segment_variants(const tune_case_t *fastest, size_t bytes, tune_case_t *out, int cap);
/* How many segment sizes a size of `bytes` tries: 0 or FOLD_SELECT_SEG_TRIES. */
int tune_segment_tries(size_t bytes);

/* The fastest point of algorithm alg (as requested, any leaders; NULL: any but auto)
 * at (coll, bytes); -1 if none. */
int tune_fastest(const tune_point_t *pts, size_t npts, fold_coll_t coll, size_t bytes,
                 const char *alg);

/* The verdict at one measured size of one collective. Indices into the points. */
typedef struct tune_size {
    fold_coll_t coll;
    size_t      bytes;
    int         best;         /* the fastest case other than auto */
    int         chosen;       /* the case of the algorithm the rule names: best, or the
                                 previous size's algorithm while within the tolerance */
    int         auto_case;    /* -1: auto not measured */
    double      fold_us;      /* the chosen algorithm's time (its fastest leader count) */
    double      tolerance;    /* what counted as "as fast" at this size */
    double      mpi_us;       /* median of the MPI medians of every case; NAN: none */
    int         fold_serves;  /* fold_us <= mpi_us; -1 without MPI */
} tune_size_t;

/* The verdicts of coll at every size measured for it, in increasing size, with the
 * merge tolerance `tolerance` (0: none, every size takes its fastest; else widened by
 * the size's noise as above). Returns how many (at most cap). */
size_t tune_decide_sizes(const tune_point_t *pts, size_t npts, fold_coll_t coll,
                         double tolerance, tune_size_t *out, size_t cap);

/* A size range of one collective and what serves it. */
typedef struct tune_range {
    fold_coll_t coll;
    size_t      lo, hi;               /* [lo, hi); hi SIZE_MAX = inf */
    size_t      first, last;          /* measured sizes inside it */
    char        what[TUNE_NAME_LEN];  /* an algorithm, or "fold" / "mpi" */
    char        note[256];            /* comment for the file */
} tune_range_t;

/* Consecutive sizes with the same chosen algorithm, merged; the first range starts
 * at 0, the last ends at inf, a range ends where the next one's first size is.
 * The note gives the measured sizes and, for node-aware algorithms, the fastest
 * leader count at each. Returns how many (at most cap). */
size_t tune_rule_ranges(const tune_point_t *pts, const tune_size_t *sizes, size_t nsizes,
                        tune_range_t *out, size_t cap);

/* The same for fold / mpi (none without MPI). */
size_t tune_serve_ranges(const tune_point_t *pts, const tune_size_t *sizes, size_t nsizes,
                         tune_range_t *out, size_t cap);

/* "allreduce:0-4k:n1-1:ppn2-2" for a range on the measured shape. */
void tune_range_where(const tune_range_t *r, const fold_shape_t *shape, char *buf,
                      size_t len);

/* What the file's header says about the run. */
typedef struct tune_header {
    const char  *fold_version;
    const char  *date;
    const char  *host;
    const char  *mpi_library;   /* "" or NULL: not timed */
    const char  *sweep;         /* one line describing the sizes and budget */
    fold_shape_t shape;
} tune_header_t;

/* How each parameter was obtained, for the comment after its line; NULL: default. */
typedef struct tune_param_note {
    const char *name;
    const char *note;
} tune_param_note_t;

/* Writes the whole file. Returns 0, or -1 when writing failed. */
int tune_write_file(FILE *out, const tune_header_t *h, const fold_model_params_t *p,
                    const tune_param_note_t *notes, size_t nnotes,
                    const tune_range_t *rules, size_t nrules,
                    const tune_range_t *serve, size_t nserve);

/* Writes to path.tmp and renames it over path. Returns 0, or -1 after printing why. */
int tune_write_path(const char *path, const tune_header_t *h, const fold_model_params_t *p,
                    const tune_param_note_t *notes, size_t nnotes,
                    const tune_range_t *rules, size_t nrules,
                    const tune_range_t *serve, size_t nserve);

/* Reads path back through fold_tune_file_load (as fold will) and checks that it says
 * what was meant: nrules rules and nserve serve lines, the parameters p exactly, at
 * every measured size the decided algorithm and serve verdict on `shape`, and no rule
 * on a shape with one more node. Returns 0, or -1 with the reason in why. */
int tune_verify_file(const char *path, const fold_shape_t *shape, const fold_model_params_t *p,
                     const tune_point_t *pts, const tune_size_t *sizes, size_t nsizes,
                     size_t nrules, size_t nserve, char *why, size_t whylen);

/* "512 B", "4 KiB", "64 MiB" */
void tune_format_bytes(size_t bytes, char *buf, size_t len);

#endif
