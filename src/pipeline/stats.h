/*
 * Pipeline statistics (internal, prefix kr_): latency histograms, per-stage counters and the
 * bottleneck estimate.
 *
 * kr_histogram records durations in nanoseconds in fixed log-linear bins (32 per octave,
 * so a percentile is within about 2% of the exact value) up to 2^40 ns; recording and
 * reading allocate nothing. The exact minimum, maximum and mean are kept beside the bins.
 *
 * kr_stage_stats collects, for one stage (all its workers together): items processed, the
 * service time of each item (histogram) and the busy time. Workers record under the stage's
 * mutex. The bottleneck is the stage whose busy time per worker is the largest share of the
 * run's wall time: it is the one that, sped up, would make the pipeline faster.
 */
#ifndef KEYER_PIPELINE_STATS_H
#define KEYER_PIPELINE_STATS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define KR_HIST_SUB_BITS 5
#define KR_HIST_SUB (1 << KR_HIST_SUB_BITS)
#define KR_HIST_MAX_EXP 40
#define KR_HIST_BINS ((KR_HIST_MAX_EXP - KR_HIST_SUB_BITS + 2) * KR_HIST_SUB)

/** A histogram of non-negative durations (ns). Zero-initialise (or kr_histogram_reset). */
typedef struct kr_histogram {
    uint32_t bins[KR_HIST_BINS];
    int64_t count;
    double sum;
    int64_t min, max;
} kr_histogram;

/** Empties @p h. */
void kr_histogram_reset(kr_histogram *h);

/** Records one value in nanoseconds (negative counts as 0, huge ones go to the last bin). */
void kr_histogram_add(kr_histogram *h, int64_t ns);

/** Adds every value of @p src into @p dst. */
void kr_histogram_merge(kr_histogram *dst, const kr_histogram *src);

/**
 * The @p q quantile (0..1) in nanoseconds: the centre of the bin holding the value of rank
 * ceil(q * count), clamped to [min, max]; 0 for an empty histogram.
 */
double kr_histogram_quantile(const kr_histogram *h, double q);

/** Mean in nanoseconds (0 when empty). */
double kr_histogram_mean(const kr_histogram *h);

/** Bin of a value, and the smallest value of a bin (exposed for tests). */
int kr_histogram_bin(int64_t ns);
int64_t kr_histogram_bin_low(int bin);

/** Counters of one stage. */
typedef struct kr_stage_stats {
    const char *name; /* static */
    int workers;
    pthread_mutex_t lock;
    int64_t items;   /* frames that went through */
    int64_t calls;   /* kr_stage_stats_record calls (a batch counts once) */
    int64_t busy_ns; /* sum of service times */
    kr_histogram latency; /* service time per call */
} kr_stage_stats;

/** Initialises @p s (the name is not copied). Returns 0 on success. */
int kr_stage_stats_init(kr_stage_stats *s, const char *name, int workers);

/** Releases the mutex of an initialised @p s. */
void kr_stage_stats_fini(kr_stage_stats *s);

/** Records one call of the stage that handled @p items frames from @p start to @p end ns. */
void kr_stage_stats_record(kr_stage_stats *s, int items, int64_t start_ns, int64_t end_ns);

/**
 * Adds @p items frames to the stage's count without recording a call: for a stage that may hand
 * frames on before its call ends (a model stage's batch op), which counts its frames when the
 * call starts and then records the call with kr_stage_stats_record(s, 0, ...), so that a
 * report read as soon as the last frame is written already counts every frame.
 */
void kr_stage_stats_count(kr_stage_stats *s, int items);

/** Copies the counters (under the lock) into @p out, which must not be initialised. */
void kr_stage_stats_snapshot(kr_stage_stats *s, kr_stage_stats *out);

/**
 * The bottleneck among @p n snapshots: the index with the largest busy_ns / workers;
 * -1 when no stage was busy.
 */
int kr_stage_stats_bottleneck(const kr_stage_stats *snaps, int n);

/** Batches of the session's batched stage (the keying model's, else the detector's). */
typedef struct kr_batch_counters {
    atomic_llong batches; /* batches run */
    atomic_llong frames;  /* frames in them */
    atomic_llong full;    /* batches that left the queue full */
} kr_batch_counters;

/** Frames that reached their output: end-to-end latency and the time of the last one. */
typedef struct kr_output_stats {
    pthread_mutex_t lock;
    kr_histogram e2e;  /* from entering (read or sent) to leaving (written or received) */
    int64_t t_start;   /* when the stages started */
    int64_t t_last;    /* when the last frame left */
} kr_output_stats;

/** Records a frame that entered at @p t_in and leaves at @p now (ns). Thread-safe. */
void kr_output_stats_add(kr_output_stats *o, int64_t t_in, int64_t now);

#endif
