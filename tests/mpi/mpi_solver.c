/*
 * An application-style test: conjugate gradients on a process grid, shaped like the
 * Lanczos loop of BIGSTICK. The ranks form R x C; rank (r, c) holds the matrix block
 * (row block r, column block c) and every vector in full. Each iteration:
 *
 *   q_r = sum over c of A(r, c) p_c     row communicator: MPI_Allreduce of the block
 *                                       (or MPI_Reduce to a rotating row root, then
 *                                       MPI_Bcast, every third iteration)
 *   q   = [q_0 .. q_R-1]                column communicator: MPI_Allgather
 *   p.q, r.r                            MPI_COMM_WORLD: MPI_Allreduce of one double
 *   |x - x*|                            MPI_Reduce (MPI_MAX) to rank 0, every 10th
 *
 * With the shim's default settings the row allreduces (tens of KiB) go to fold, and
 * the scalar reductions stay with the MPI library; the program prints how many row
 * allreduces it made ("expect-min: fold=N"). The matrix is sparse, symmetric and
 * diagonally dominant; b = A x* for a known x*, and the run passes when CG reaches x*
 * to 1e-8.
 */
#include "shim_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N          4800     /* unknowns; divisible by every R and C used */
#define MAX_ITERS  500
#define TOLERANCE  1e-11

static const int offsets[] = {-1600, -7, -1, 0, 1, 7, 1600};

static double entry(int i, int j)
{
    int d = j - i;
    if (d == 0) {
        return 4.6;   /* off-diagonal sum 4.5: SPD, a condition number near 90 */
    }
    return d == 1 || d == -1 ? -1.0 : d == 7 || d == -7 ? -0.75 : -0.5;
}

static unsigned row_allreduces;

typedef struct grid {
    int      rank, size, r, c, R, C;
    MPI_Comm row, col;
    int      row0, nrows, col0, ncols;   /* this rank's block */
} grid_t;

static grid_t make_grid(void)
{
    grid_t g;
    MPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g.size);
    g.C = g.size % 2 == 0 ? 2 : g.size;   /* 2 columns when it divides, else a row */
    g.R = g.size / g.C;
    g.r = g.rank / g.C;
    g.c = g.rank % g.C;
    MPI_Comm_split(MPI_COMM_WORLD, g.r, g.c, &g.row);
    MPI_Comm_split(MPI_COMM_WORLD, g.c, g.r, &g.col);
    g.nrows = N / g.R;
    g.row0 = g.r * g.nrows;
    g.ncols = N / g.C;
    g.col0 = g.c * g.ncols;
    return g;
}

/* q = A p: this rank's share of its row block, summed over the row, gathered. */
static void matvec(const grid_t *g, const double *p, double *q, double *part, int iter)
{
    for (int i = 0; i < g->nrows; i++) {
        int row = g->row0 + i;
        double s = 0;
        for (size_t k = 0; k < sizeof(offsets) / sizeof(offsets[0]); k++) {
            int j = row + offsets[k];
            if (j >= g->col0 && j < g->col0 + g->ncols) {
                s += entry(row, j) * p[j];
            }
        }
        part[i] = s;
    }
    double *block = q + g->row0;
    if (iter % 3 == 2) {
        int root = iter % g->C;
        MPI_Reduce(part, g->c == root ? block : NULL, g->nrows, MPI_DOUBLE, MPI_SUM, root,
                   g->row);
        MPI_Bcast(block, g->nrows, MPI_DOUBLE, root, g->row);
    } else if (iter % 3 == 1) {
        memcpy(block, part, (size_t)g->nrows * sizeof(double));
        MPI_Allreduce(MPI_IN_PLACE, block, g->nrows, MPI_DOUBLE, MPI_SUM, g->row);
        row_allreduces++;
    } else {
        MPI_Allreduce(part, block, g->nrows, MPI_DOUBLE, MPI_SUM, g->row);
        row_allreduces++;
    }
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, q, g->nrows, MPI_DOUBLE, g->col);
}

/* Each rank sums every size-th term; one small allreduce adds them up. */
static double dot(const grid_t *g, const double *a, const double *b)
{
    double mine = 0, all = 0;
    for (int i = g->rank; i < N; i += g->size) {
        mine += a[i] * b[i];
    }
    MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return all;
}

static double max_error(const grid_t *g, const double *x, const double *exact)
{
    double mine = 0, worst = 0;
    for (int i = g->rank; i < N; i += g->size) {
        mine = fmax(mine, fabs(x[i] - exact[i]));
    }
    MPI_Reduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    return worst;   /* significant at rank 0 */
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    grid_t g = make_grid();
    double *exact = malloc(N * sizeof(double)), *b = malloc(N * sizeof(double));
    double *x = calloc(N, sizeof(double)), *r = malloc(N * sizeof(double));
    double *p = malloc(N * sizeof(double)), *q = malloc(N * sizeof(double));
    double *part = malloc((size_t)g.nrows * sizeof(double));
    for (int i = 0; i < N; i++) {
        exact[i] = sin(0.01 * i) + 1.0;
    }
    matvec(&g, exact, b, part, 0);
    memcpy(r, b, N * sizeof(double));
    memcpy(p, b, N * sizeof(double));
    double rr = dot(&g, r, r), bb = rr, err = 0;
    int iter = 0;
    while (iter < MAX_ITERS && sqrt(rr) > TOLERANCE * sqrt(bb)) {
        iter++;
        matvec(&g, p, q, part, iter);
        double alpha = rr / dot(&g, p, q);
        for (int i = 0; i < N; i++) {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        double rr_new = dot(&g, r, r);
        for (int i = 0; i < N; i++) {
            p[i] = r[i] + rr_new / rr * p[i];
        }
        rr = rr_new;
        if (iter % 10 == 0) {
            err = max_error(&g, x, exact);
        }
    }
    err = max_error(&g, x, exact);
    int failed = g.rank == 0 && !(err < 1e-8);
    if (g.rank == 0) {
        printf("cg: %d ranks as %d x %d, %d unknowns, %d iterations, max error %.3g: %s\n",
               g.size, g.R, g.C, N, iter, err, failed ? "FAILED" : "converged");
        /* Every rank made as many row allreduces; the rest may go either way. */
        printf("expect-min: fold=%u\nallow: small large mpi_faster\n", row_allreduces * g.size);
    }
    MPI_Comm_free(&g.row);
    MPI_Comm_free(&g.col);
    free(exact); free(b); free(x); free(r); free(p); free(q); free(part);
    failed = test_finish(failed);
    MPI_Finalize();
    return failed;
}
