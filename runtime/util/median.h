/*
 * The median of a few measurements (calibrations, probes agreed across ranks).
 */
#ifndef FOLD_UTIL_MEDIAN_H
#define FOLD_UTIL_MEDIAN_H

/* The median of v[0..n), n >= 1; sorts v. */
double fold_util_median(double *v, int n);

#endif
