#include "size.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <strings.h>

int fold_util_parse_size(const char *text, size_t *out)
{
    if (text == NULL) {
        return -1;
    }
    if (strcasecmp(text, "inf") == 0) {
        *out = SIZE_MAX;
        return 0;
    }
    /* strtoull alone would take spaces, a sign, and wrap "-1" around. */
    if (!isdigit((unsigned char)text[0])) {
        return -1;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0) {
        return -1;
    }
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (shift != 0 && *end == 'i') {
        end++;
    }
    if (*end == 'b' || *end == 'B') {
        end++;
    }
    if (*end != '\0' || v > (SIZE_MAX >> shift)) {
        return -1;
    }
    *out = (size_t)v << shift;
    return 0;
}
