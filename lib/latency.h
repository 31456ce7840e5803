/*
 * Latency histograms (lith.h, LITH_LAT_BUCKETS): the bucket of a duration,
 * and the public bucket bounds and quantiles. In the floor because both the
 * writer's figures and the read pool's (sqlite/) count durations so.
 */
#ifndef LITH_LIB_LATENCY_H
#define LITH_LIB_LATENCY_H

#include <stdint.h>

#include "lith.h"

/* The latency bucket of a duration in ns: 0 .. LITH_LAT_BUCKETS - 1. */
int lith__lat_bucket(uint64_t ns);

#endif
