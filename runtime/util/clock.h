/*
 * The one monotonic clock of the runtime: seconds since an arbitrary start.
 */
#ifndef FOLD_UTIL_CLOCK_H
#define FOLD_UTIL_CLOCK_H

double fold_time_now(void);

#endif
