/* A communicator's shape on the command line (fold_shape.h). */
#include "fold_shape.h"

#include <stdlib.h>

int fold_parse_shape(const char *text, int **node_of, int *size)
{
    int counts[4096], n = 0;
    char *end;
    long a = strtol(text, &end, 10);
    if (*end == 'x') {
        long b = strtol(end + 1, &end, 10);
        if (*end != '\0' || a < 1 || b < 1 || a * b > 1000000) {
            return -1;
        }
        for (n = 0; n < a && n < 4096; n++) {
            counts[n] = (int)b;
        }
        if (a > 4096) {
            return -1;
        }
    } else {
        const char *p = text;
        while (*p != '\0' && n < 4096) {
            long c = strtol(p, &end, 10);
            if (end == p || c < 1 || c > 100000 || (*end != ',' && *end != '\0')) {
                return -1;
            }
            counts[n++] = (int)c;
            p = *end == ',' ? end + 1 : end;
        }
    }
    *size = 0;
    for (int i = 0; i < n; i++) {
        *size += counts[i];
    }
    if (n == 0 || (*node_of = malloc((size_t)*size * sizeof(int))) == NULL) {
        return -1;
    }
    for (int i = 0, r = 0; i < n; i++) {
        for (int k = 0; k < counts[i]; k++) {
            (*node_of)[r++] = i;
        }
    }
    return 0;
}
