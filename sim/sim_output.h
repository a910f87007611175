/* fold_sim's results: as text, or as a CSV row with fold_perf's columns. */
#ifndef FOLD_SIM_OUTPUT_H
#define FOLD_SIM_OUTPUT_H

#include "sim_path.h"
#include "sim_setup.h"

#include <stdio.h>

typedef struct sim_result {
    double      sim_us;      /* the last rank's finish */
    double      root_us;     /* reduce: the root's; else sim_us */
    double      model_us;    /* fold_model_predict of the same question (NAN: failed) */
    double      select_us;   /* what selection predicts for the choice (fold_select_predict) */
    double      build_s;     /* building the schedules, wall-clock seconds */
    double      replay_s;    /* replaying them */
    const char *requested;   /* "auto" or -A's */
    const char *platform;    /* the file, or "built-in" */
} sim_result_t;

void sim_output_text(FILE *out, const sim_setup_t *s, const sim_prog_t *g,
                     const sim_result_t *r, const sim_path_elem_t *path, size_t npath,
                     size_t limit);
void sim_output_csv(FILE *out, const sim_setup_t *s, const sim_result_t *r);

#endif
