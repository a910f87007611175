/*
 * How DPML cuts a call into chunks, partitions and sub-partitions (alg_dpml.h).
 * The segment is split into `stages` equal parts, each holding one chunk's rows
 * for the largest node; rows are cache-line multiples so no two ranks write
 * one line. A call that needs less than the segment uses less (small messages
 * keep their rows close together).
 */
#include "alg_dpml.h"
#include "node/topo.h"

#include <fold/fold_status.h>

#define PART_ALIGN   64   /* elements: at least one cache line for any datatype */
#define MAX_SUBPARTS 4    /* inter-node operations per leader per chunk */

static int gcd(int a, int b)
{
    while (b != 0) {
        int r = a % b;
        a = b;
        b = r;
    }
    return a;
}

static size_t div_up(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

int fold_dpml_layout(const fold_coll_args_t *a, int pipelined, fold_dpml_layout_t *lay)
{
    const fold_topo_t *t = a->topo;
    int l = a->leaders < 1 ? 1 : a->leaders;
    l = l < t->min_ppn ? l : t->min_ppn;
    size_t per_leader = div_up(a->count ? a->count : 1, (size_t)l);
    size_t unit = div_up(a->seg_count ? a->seg_count : 1, PART_ALIGN) * PART_ALIGN;
    int depth = a->depth > 2 ? a->depth : 2;
    /* A row (leaders x part_cap) is written by one rank alone: whole lines of any
     * type (PART_ALIGN elements) keep two rows apart. Aligning each part so cut a
     * 64-rank node's parts of 126 elements to 64: chunks of half the size, twice
     * as many of them. 64 parts of any size make whole lines. */
    const size_t align = (size_t)(PART_ALIGN / gcd(l, PART_ALIGN));
    size_t part;

    lay->leaders  = l;
    lay->uses_shm = t->max_ppn > 1;
    /* With two leaders a rank copies out at most one block besides its own, which
     * its fold copies along: a result row would cost a third of the segment. */
    lay->results  = lay->uses_shm && l >= 3;
    if (lay->uses_shm) {
        lay->stages = pipelined ? depth : 2;
        size_t row = a->shm_count / ((size_t)lay->stages * ((size_t)t->max_ppn +
                                                             (size_t)lay->results));
        part = row / (size_t)l;
        if (part >= align) {
            part -= part % align;
        }
        if (part == 0) {
            return FOLD_ERR_INVALID_ARG;   /* FOLD_SHM_SIZE too small for this node */
        }
        size_t needed = div_up(per_leader, align) * align;
        part = part < needed ? part : needed;
    } else {
        lay->stages = pipelined ? depth : 1;
        part = per_leader;
    }
    if (pipelined && part > MAX_SUBPARTS * unit) {
        part = MAX_SUBPARTS * unit;   /* more, smaller chunks: the phases overlap */
    }
    lay->subparts = 1;
    if (pipelined) {
        size_t q = div_up(part, unit);
        lay->subparts = q > MAX_SUBPARTS ? MAX_SUBPARTS : (int)q;
    }
    lay->part_cap  = part;
    lay->chunk_cap = (size_t)l * part;
    lay->nchunks   = div_up(a->count, lay->chunk_cap);
    return FOLD_OK;
}
