/*
 * Online refinement of the cost model's pick (FOLD_ONLINE), after STAR-MPI (Faraj,
 * Yuan, Lowenthal, "STAR-MPI: self tuned adaptive routines for MPI collective
 * operations", ICS 2006): where the model predicts rivals within
 * FOLD_ONLINE_SPREAD of its pick for a blocking call, the first calls with the same
 * arguments try each candidate for FOLD_ONLINE calls (in blocks, over two passes),
 * every rank times them, one allgather gives every rank every rank's scores, and
 * the candidate whose slowest rank's score is least serves those calls from then on.
 *
 * The model prices data a core has just written (the application computed its
 * input); whether a peer's input is instead still in the reader's cache from the
 * call before (a loop over the same buffers, as the OSU benchmarks run) decides
 * between single copy and the segment by up to 1.6x either way on one node, and
 * only the calls themselves can tell.
 *
 * Trying costs the calls that run a slower candidate, and once per candidate its
 * first use, the rivals' evaluation and the agreement: the calls with the same
 * arguments pay for it only once they have taken FOLD_ONLINE_SHARE times more, by
 * the model's prediction of its pick (ski rental: a loop too short to earn the
 * trials back never pays more than that share for them, and a long one learns).
 * Until then they run the pick, and the rivals are not even evaluated.
 *
 * Every decision depends only on what every rank shares: the call's arguments
 * (collective, count, datatype, op, root), the sequence of blocking calls with
 * those arguments, and the agreed medians. Non-blocking calls take the model's
 * pick, or the agreed one, and are never timed.
 */
#ifndef FOLD_SELECT_ONLINE_H
#define FOLD_SELECT_ONLINE_H

#include "exec.h"
#include "select.h"

#define FOLD_ONLINE_MAX_CAND   4      /* the pick and up to three rivals */
#define FOLD_ONLINE_MAX_TRIALS 16     /* FOLD_ONLINE's largest value */
#define FOLD_ONLINE_KEYS       64     /* argument sets one communicator tries */
#define FOLD_ONLINE_SPREAD     2.0    /* rivals predicted within this of the pick */
#define FOLD_ONLINE_MARGIN     0.05   /* a rival must beat the pick by this much */
#define FOLD_ONLINE_BUDGET_US  20000.0  /* the trials' predicted time beyond the
                                         pick's, at most */
#define FOLD_ONLINE_SPAN_US    64000.0  /* and the predicted time of the trials that
                                         must run (every candidate's first pass, the
                                         pick's second block): the calls of a size see
                                         mixed times for a tenth of a second at most.
                                         Bounding it at 20 ms left 2-rank calls from 4
                                         MiB untried, and the pick of dpml ran 8 MiB
                                         allreduce at 1.15x single copy's time; counting
                                         every rival's second pass too left 16 MiB
                                         untried, and the pick of dpml_pipelined ran
                                         reduce at 1.3x single copy's time */
#define FOLD_ONLINE_PASS_MIN   3      /* calls per candidate and pass, for 2 passes */
#define FOLD_ONLINE_CULL       0.25   /* after the first pass, a candidate slower than
                                         the best by more than this is not tried again:
                                         2-rank 8 MiB allreduce tried dpml (1.45x single
                                         copy) for 8 of a benchmark's 32 timed calls,
                                         and its median came out 1.4x the pick's */
#define FOLD_ONLINE_MIN_BYTES  2048   /* calls of at most this many bytes keep the
                                         model's pick from the first call; larger ones
                                         on the tiny-message path are tried too: the
                                         model prices that path without the executor */

#define FOLD_ONLINE_FIXED_US   250.0  /* a candidate's part of trying beyond its calls'
                                         time: its first use, its evaluation, its
                                         part of the agreement */

typedef enum {
    FOLD_ONLINE_WAITING,  /* running the pick until the calls pay for trying */
    FOLD_ONLINE_TRYING,
    FOLD_ONLINE_DECIDED,
    FOLD_ONLINE_OFF,      /* nothing to try, or too costly to */
} fold_online_state_t;

/* One set of call arguments and what its calls learned. */
typedef struct fold_online_key {
    int           state;          /* fold_online_state_t */
    fold_coll_t   coll;
    size_t        count;
    fold_dtype_t  dtype;
    fold_op_t     op;
    int           root;
    int           ncand;
    int           nlive;          /* candidates of the second pass (all before it) */
    int           live[FOLD_ONLINE_MAX_CAND];   /* which, in order */
    int           trials;         /* calls per candidate (fold_online_trials_for) */
    int           rivals_known;   /* cand[], pred_us[] and trials are set */
    long          waited;         /* blocking calls run while WAITING */
    long          wait_until;     /* ... before the next step (fold_online_wait_calls) */
    int           calls;          /* blocking calls timed so far */
    int           pick;           /* the agreed candidate, once DECIDED */
    fold_choice_t cand[FOLD_ONLINE_MAX_CAND];
    double        pred_us[FOLD_ONLINE_MAX_CAND];
    float         us[FOLD_ONLINE_MAX_CAND][FOLD_ONLINE_MAX_TRIALS];
} fold_online_key_t;

typedef struct fold_online {
    fold_online_key_t *key[FOLD_ONLINE_KEYS];   /* nkeys of them allocated */
    int               nkeys;
    int               last;   /* the key found last */
} fold_online_t;

/* Whether the call keeps the model's pick whatever happened before (online off, a
 * call of at most FOLD_ONLINE_MIN_BYTES, or buffers in fold memory): then
 * fold_online_before leaves choice as it is and times nothing. */
int  fold_online_ignores(const fold_comm_t *comm, const fold_call_t *call,
                         const fold_choice_t *choice);
/* Before a call: *choice (the model's pick) becomes the candidate this call tries, or
 * the agreed one; *timed is set to the key whose trial this call is (time it and
 * hand the time to fold_online_after), else NULL. */
int  fold_online_before(fold_comm_t *comm, const fold_call_t *call, fold_choice_t *choice,
                        fold_online_key_t **timed);
/* After a timed call that succeeded: records its time; after a key's last trial,
 * the agreement (collective over comm: every rank reaches it at the same call). */
int  fold_online_after(fold_comm_t *comm, fold_online_key_t *key, double us);
/* The agreed candidate for these arguments (root -1: any root), if any
 * (fold_selected_algorithm). */
int  fold_online_agreed(const fold_comm_t *comm, fold_coll_t coll, size_t count,
                        fold_dtype_t dtype, fold_op_t op, int root, fold_choice_t *choice);
/* Whether blocking calls with these arguments (root -1: any root) have begun trying
 * candidates and not yet agreed (fold_selection_trying). */
int  fold_online_trying(const fold_comm_t *comm, fold_coll_t coll, size_t count,
                        fold_dtype_t dtype, fold_op_t op, int root);
void fold_online_free(fold_comm_t *comm);

/* The parts without a communicator, for the tests: */
/* The median of the n times after the first (the first call of a candidate pays
 * its first-use costs); n == 1: that one. */
double fold_online_median(const float *us, int n);
/* Two passes over the candidates where FOLD_ONLINE gives each at least
 * FOLD_ONLINE_PASS_MIN calls a pass, else one: a burst of noise on a shared machine
 * (another tenant, a descheduled rank) that spans one candidate's block of calls
 * must not decide, and its block in the other pass outvotes it. */
int    fold_online_passes(int trials);
/* The call-th timed call of a key (0-based): the candidate it tries (each candidate's
 * block of trials / passes calls in turn, in order in the first pass, and the nlive
 * candidates live[] that pass kept in reverse in the second, so that neither a trend
 * nor the order favours one) and the index of its time in that candidate's row. */
void   fold_online_slot(int call, int ncand, const int *live, int nlive, int trials,
                        int *cand, int *at);
/* The calls a key's trials take: every candidate's first pass, the kept ones' second. */
int    fold_online_trial_calls(int ncand, int nlive, int trials);
/* After the first pass: the model's pick (candidate 0) and the candidates whose
 * scores (one per candidate) are within FOLD_ONLINE_CULL of the least, in order, into
 * live[]; returns how many. The pick always has its second block: its first one comes
 * first, where the first calls with new arguments pay for touching their pages (a
 * large allreduce's first calls after smaller ones take up to 2.5x what later calls
 * take, whatever runs them), and culled on that block the pick would lose to a rival
 * a few percent slower. */
int    fold_online_cull(const double *score, int n, int *live);
/* A candidate's score from its row of times: the least over the passes it ran
 * (`passes`: 1 or fold_online_passes) of each pass's median (fold_online_median of
 * the pass's block). */
double fold_online_score(const float *us, int trials, int passes);
/* What trying costs beyond running the pick (candidate 0) for every trial, as the
 * model predicts: rivals close to the pick cost little to try, however long the
 * calls. */
double fold_online_excess_us(const double *pred_us, int n, int trials);
/* The predicted time of the trials that must run whatever they find: every
 * candidate's first pass and the pick's second block (rivals keep theirs only within
 * FOLD_ONLINE_CULL of the best, and then cost little more than the pick). */
double fold_online_span_us(const double *pred_us, int n, int trials);
/* Whether trials of these candidates fit FOLD_ONLINE_BUDGET_US (the excess over all
 * trials) and FOLD_ONLINE_SPAN_US (the span). */
int    fold_online_affordable(const double *pred_us, int n, int trials);
/* The calls per candidate a key tries: FOLD_ONLINE's `trials` where affordable, else
 * the fewest that still make two passes (2 * FOLD_ONLINE_PASS_MIN) where those are,
 * else 0 (the model's pick, untried). */
int    fold_online_trials_for(const double *pred_us, int n, int trials);
/* What trying these candidates costs beyond running the pick: the excess of their
 * calls (fold_online_excess_us) and FOLD_ONLINE_FIXED_US per candidate. */
double fold_online_cost_us(const double *pred_us, int n, int trials);
/* The least any trials cost (the pick and one rival, no excess): what the calls must
 * pay for before the rivals are evaluated. */
double fold_online_least_cost_us(void);
/* The calls predicted at pick_us each that pay for cost_us at share_percent of their
 * time (the calls run before trying); 0 where share_percent is 0, LONG_MAX where
 * pick_us is not positive or the count would overflow. */
long   fold_online_wait_calls(double pick_us, double cost_us, long share_percent);
/* The candidate with the least score; a rival only where it beats candidate 0 (the
 * model's pick) by more than `margin` of its score. */
int    fold_online_best(const double *score, int n, double margin);

#endif
