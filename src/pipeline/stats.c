/* Log-linear latency histograms and per-stage counters. */
#include "pipeline/stats.h"

#include <math.h>
#include <string.h>

void kr_histogram_reset(kr_histogram *h)
{
    memset(h, 0, sizeof(*h));
}

int kr_histogram_bin(int64_t ns)
{
    if (ns < KR_HIST_SUB)
        return ns < 0 ? 0 : (int)ns;
    uint64_t v = (uint64_t)ns;
    int e = 63 - __builtin_clzll(v); /* floor(log2 v) >= KR_HIST_SUB_BITS */
    if (e > KR_HIST_MAX_EXP)
        return KR_HIST_BINS - 1;
    int sub = (int)((v >> (e - KR_HIST_SUB_BITS)) & (KR_HIST_SUB - 1));
    return (e - KR_HIST_SUB_BITS + 1) * KR_HIST_SUB + sub;
}

int64_t kr_histogram_bin_low(int bin)
{
    if (bin < KR_HIST_SUB)
        return bin;
    int e = bin / KR_HIST_SUB + KR_HIST_SUB_BITS - 1;
    int sub = bin % KR_HIST_SUB;
    return ((int64_t)1 << e) + ((int64_t)sub << (e - KR_HIST_SUB_BITS));
}

void kr_histogram_add(kr_histogram *h, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    h->bins[kr_histogram_bin(ns)]++;
    if (h->count == 0 || ns < h->min)
        h->min = ns;
    if (h->count == 0 || ns > h->max)
        h->max = ns;
    h->count++;
    h->sum += (double)ns;
}

void kr_histogram_merge(kr_histogram *dst, const kr_histogram *src)
{
    if (src->count == 0)
        return;
    for (int i = 0; i < KR_HIST_BINS; i++)
        dst->bins[i] += src->bins[i];
    if (dst->count == 0 || src->min < dst->min)
        dst->min = src->min;
    if (dst->count == 0 || src->max > dst->max)
        dst->max = src->max;
    dst->count += src->count;
    dst->sum += src->sum;
}

double kr_histogram_quantile(const kr_histogram *h, double q)
{
    if (h->count == 0)
        return 0.0;
    if (!(q > 0.0))
        return (double)h->min;
    if (q >= 1.0)
        return (double)h->max;
    int64_t rank = (int64_t)ceil(q * (double)h->count);
    if (rank < 1)
        rank = 1;
    int64_t seen = 0;
    for (int i = 0; i < KR_HIST_BINS; i++) {
        seen += h->bins[i];
        if (seen >= rank) {
            double lo = (double)kr_histogram_bin_low(i);
            double hi = i + 1 < KR_HIST_BINS ? (double)kr_histogram_bin_low(i + 1) : lo;
            double v = i < KR_HIST_SUB ? lo : 0.5 * (lo + hi);
            if (v < (double)h->min)
                v = (double)h->min;
            if (v > (double)h->max)
                v = (double)h->max;
            return v;
        }
    }
    return (double)h->max;
}

double kr_histogram_mean(const kr_histogram *h)
{
    return h->count ? h->sum / (double)h->count : 0.0;
}

int kr_stage_stats_init(kr_stage_stats *s, const char *name, int workers)
{
    memset(s, 0, sizeof(*s));
    s->name = name;
    s->workers = workers < 1 ? 1 : workers;
    return pthread_mutex_init(&s->lock, NULL) == 0 ? 0 : -1;
}

void kr_stage_stats_fini(kr_stage_stats *s)
{
    pthread_mutex_destroy(&s->lock);
}

void kr_stage_stats_record(kr_stage_stats *s, int items, int64_t start_ns, int64_t end_ns)
{
    int64_t d = end_ns - start_ns;
    if (d < 0)
        d = 0;
    pthread_mutex_lock(&s->lock);
    s->items += items;
    s->calls++;
    s->busy_ns += d;
    kr_histogram_add(&s->latency, d);
    pthread_mutex_unlock(&s->lock);
}

void kr_stage_stats_count(kr_stage_stats *s, int items)
{
    pthread_mutex_lock(&s->lock);
    s->items += items;
    pthread_mutex_unlock(&s->lock);
}

void kr_stage_stats_snapshot(kr_stage_stats *s, kr_stage_stats *out)
{
    pthread_mutex_lock(&s->lock);
    out->name = s->name;
    out->workers = s->workers;
    out->items = s->items;
    out->calls = s->calls;
    out->busy_ns = s->busy_ns;
    out->latency = s->latency;
    pthread_mutex_unlock(&s->lock);
}

int kr_stage_stats_bottleneck(const kr_stage_stats *snaps, int n)
{
    int best = -1;
    double best_load = 0.0;
    for (int i = 0; i < n; i++) {
        double load = (double)snaps[i].busy_ns / (double)(snaps[i].workers < 1 ? 1 : snaps[i].workers);
        if (load > best_load) {
            best_load = load;
            best = i;
        }
    }
    return best;
}

void kr_output_stats_add(kr_output_stats *o, int64_t t_in, int64_t now)
{
    pthread_mutex_lock(&o->lock);
    kr_histogram_add(&o->e2e, now - t_in);
    if (now > o->t_last)
        o->t_last = now;
    pthread_mutex_unlock(&o->lock);
}
