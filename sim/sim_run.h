/*
 * The replay's logic, apart from the simulator that moves time: each rank's schedule
 * as a DAG (a step is ready once its predecessors are done), its CPU serving ready
 * steps one at a time in the order they became ready, its messages and its flags.
 * The simulator (sim_engine.cpp, SimGrid) runs the CPU slots and the transfers it
 * is asked to through the hooks, and reports back when each ends; every time here is
 * in seconds of simulated time.
 *
 *   CPU        a ready step takes its rank's CPU for its cost (sim_prog.h); sends,
 *              receives and waits post when their slot ends.
 *   messages   a send of at most eager_bytes moves once posted, a larger one once its
 *              receive is posted too; a send is done when its data has arrived, a
 *              receive at the later of its post and the arrival.
 *   flags      a post lands step_us after it is ready, whatever its CPU is busy with
 *              (the executor runs it between other steps); a wait is done at the later
 *              of its post and flag_us after the first post that brought each flag it
 *              waits for to its value.
 */
#ifndef FOLD_SIM_RUN_H
#define FOLD_SIM_RUN_H

#include "sim_prog.h"

typedef struct sim_hooks {
    void *arg;
    /* rank's CPU runs for `seconds` from now; sim_run_cpu_done when it ends */
    void (*start_cpu)(void *arg, int rank, double seconds);
    /* send step `send` of rank sender moves its bytes to receiver from now;
     * sim_run_arrived when they have arrived */
    void (*start_msg)(void *arg, int sender, uint32_t send, uint64_t bytes, int receiver);
    /* rank's state changed from elsewhere: its actor looks at it again */
    void (*ring)(void *arg, int rank);
} sim_hooks_t;

typedef struct sim_run sim_run_t;

sim_run_t *sim_run_new(sim_prog_t *g, const fold_model_params_t *p, const sim_hooks_t *hooks);
void       sim_run_free(sim_run_t *run);

void   sim_run_start(sim_run_t *run, int rank);                 /* at time 0 */
void   sim_run_cpu_done(sim_run_t *run, int rank, double now);
void   sim_run_arrived(sim_run_t *run, uint32_t send, double now);
/* Timers (flags landing, waits met) of rank due at or before now. */
void   sim_run_fire(sim_run_t *run, int rank, double now);
/* The rank's CPU takes its next ready step if it is idle. */
void   sim_run_kick(sim_run_t *run, int rank, double now);
double sim_run_next_timer(const sim_run_t *run, int rank);     /* INFINITY: none */
int    sim_run_rank_done(const sim_run_t *run, int rank);
/* FOLD_OK, or the first error (out of memory). */
int    sim_run_status(const sim_run_t *run);
size_t sim_run_steps_done(const sim_run_t *run);

#endif
