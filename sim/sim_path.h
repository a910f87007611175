/*
 * The critical path of a finished replay: from the step that finished last, back
 * through what each of its events waited for (the predecessor that was ready last,
 * the CPU's previous step, the message's other side, the flag's post), to the start.
 * Each element's time is its event's time less its cause's, so the elements add up
 * to the simulated time.
 */
#ifndef FOLD_SIM_PATH_H
#define FOLD_SIM_PATH_H

#include "sim_prog.h"

#include <stdio.h>

typedef enum sim_part {
    SIM_PART_CPU,      /* a step's slot on its rank's CPU (a flag post's step_us) */
    SIM_PART_NET,      /* a message's transfer, from when it could move */
    SIM_PART_FLAG,     /* a flag's trip to the waiting rank */
    SIM_PART_WAIT      /* a step that was done once posted (a receive of data already
                          there, a wait for flags already set) */
} sim_part_t;

typedef struct sim_path_elem {
    uint32_t   g;       /* the step */
    int        rank;
    sim_part_t part;
    double     start, end;   /* seconds */
} sim_path_elem_t;

/* The path ending at the latest t_done, in time order (malloc'd, *n elements; NULL
 * with *n = 0 for an empty program). Elements of no time are left out. */
sim_path_elem_t *sim_path_find(const sim_prog_t *g, size_t *n);

/* Prints the path: a line per kind of part with its total, then its elements (the
 * first and last `limit` / 2 of them where there are more than limit). */
void sim_path_print(FILE *out, const sim_prog_t *g, const sim_path_elem_t *path, size_t n,
                    size_t limit);

#endif
