/*
 * The node segments' flags during a replay: each post's landing time and value per
 * (rank, flag), and the waits parked until a value comes.
 */
#ifndef FOLD_SIM_FLAGS_H
#define FOLD_SIM_FLAGS_H

#include <stddef.h>
#include <stdint.h>

typedef struct sim_flags sim_flags_t;

/* Called for each parked wait a post meets: wait step g of rank, the post step that
 * met it and when it landed. */
typedef void (*sim_flag_met_fn)(void *arg, int rank, uint32_t g, uint32_t post, double t);

sim_flags_t *sim_flags_new(int ranks);
void         sim_flags_free(sim_flags_t *f);
/* When owner's flag first reached value (*post: the post step), or -1 if it has not. */
double sim_flags_reached(const sim_flags_t *f, int owner, int flag, uint64_t value,
                         uint32_t *post);
/* Parks wait step g of rank until owner's flag reaches value. 0, or -1 out of memory. */
int    sim_flags_park(sim_flags_t *f, int owner, int flag, uint64_t value, int rank, uint32_t g);
/* Post step `post` of owner set its flag to value at t (values never go down); met
 * is called for each parked wait it meets. 0, or -1 out of memory. */
int    sim_flags_post(sim_flags_t *f, int owner, int flag, uint64_t value, uint32_t post,
                      double t, sim_flag_met_fn met, void *arg);

#endif
