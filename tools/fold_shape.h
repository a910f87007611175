/* A communicator's shape on the command line (fold_info -S, fold_sim -S). */
#ifndef FOLD_TOOLS_SHAPE_H
#define FOLD_TOOLS_SHAPE_H

/* "8x64" (nodes x ranks per node) or "2,1,1" (ranks of each node): *node_of gets each
 * rank's node (malloc'd; the caller frees it) and *size the ranks. 0, or -1 for a
 * shape that is not one (at most 4096 nodes and 1,000,000 ranks). */
int fold_parse_shape(const char *text, int **node_of, int *size);

#endif
