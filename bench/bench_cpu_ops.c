/*
 * bench_cpu_ops: where the CPU backend's time goes, operator by operator.
 *
 *   bench_cpu_ops MODEL.tflite [--threads N] [--batch N] [--iterations N] [--top N]
 *                 [--thread-clock]
 *
 * Creates the CPU backend three times: as it runs normally (segments = maximal XNNPACK runs, with
 * XNNPACK's fusions, and the backend's own kernels between them), without the backend's own
 * kernels (XNNPACK and the reference only: what they gain), and with one segment per node, whose
 * segments are timed one by one (median over the iterations). The whole runs report wall time
 * and the process's CPU time per inference (all threads: steadier on a busy machine).
 * --thread-clock times the segments by the calling thread's CPU time instead of the wall clock
 * (meaningful with --threads 1, where that thread does all the work; steady on a busy machine). Prints the per-operator-type totals, the slowest nodes with
 * their MACs and achieved GFLOP/s, and the normal run's median for comparison (the per-node sum
 * is larger: no clamp fusion, one thread-pool dispatch per node). Uses private headers.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "keyer/nn.h"
#include "nn/cpu/cpu.h"
#include "nn/model.h"

static uint64_t node_macs(const kr_graph *g, const kr_node *n)
{
    const kr_tensor *out = &g->tensors[n->outputs[0]], *in = &g->tensors[n->inputs[0]];
    const kr_window_params *w = &n->p.window;
    uint64_t o = kr_tensor_elements(out);
    switch (n->op) {
    case KR_OP_CONV_2D:
        return o * (uint64_t)w->kernel_h * (uint64_t)w->kernel_w * (uint64_t)in->dims[3] /
               (uint64_t)(in->dims[3] / g->tensors[n->inputs[1]].dims[3]);
    case KR_OP_DEPTHWISE_CONV_2D: return o * (uint64_t)w->kernel_h * (uint64_t)w->kernel_w;
    case KR_OP_TRANSPOSE_CONV_BIAS: {
        const kr_tensor *f = &g->tensors[n->inputs[1]];
        return kr_tensor_elements(in) * (uint64_t)f->dims[0] * (uint64_t)f->dims[1] *
               (uint64_t)f->dims[2];
    }
    default: return 0;
    }
}

/* This thread's CPU time in seconds (the per-segment clock with --thread-clock). */
static double thread_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Process CPU time in seconds (every thread). */
static double cpu_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* 10 warm-up runs, then @p iters timed ones: the median wall time and the mean CPU time. */
static keyer_status time_runs(kr_backend_instance *inst, int iters, double *samples,
                              double *median, double *cpu, keyer_error *err)
{
    for (int i = 0; i < 10; i++)
        if (kr_backend_cpu.run(inst, err) != KEYER_OK)
            return err->status;
    double c0 = cpu_now_s();
    for (int i = 0; i < iters; i++) {
        double t0 = kb_now_s();
        if (kr_backend_cpu.run(inst, err) != KEYER_OK)
            return err->status;
        samples[i] = kb_now_s() - t0;
    }
    *cpu = (cpu_now_s() - c0) / iters;
    qsort(samples, (size_t)iters, sizeof(double), kb_cmp_double);
    *median = samples[iters / 2];
    return KEYER_OK;
}

typedef struct row {
    int node;
    double median_s;
} row;

static int cmp_row(const void *a, const void *b)
{
    const row *x = a, *y = b;
    return (x->median_s < y->median_s) - (x->median_s > y->median_s);
}

#define PROG "bench_cpu_ops"

int main(int argc, char **argv)
{
    const char *path = NULL;
    int threads = 1, batch = 1, iters = 200, top = 15;
    double (*clock_fn)(void) = kb_now_s; /* per-segment clock: wall, or --thread-clock */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = kb_int_arg(PROG, "--threads", argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = kb_int_arg(PROG, "--batch", argv[++i]);
        else if (!strcmp(argv[i], "--iterations") && i + 1 < argc)
            iters = kb_int_arg(PROG, "--iterations", argv[++i]);
        else if (!strcmp(argv[i], "--top") && i + 1 < argc)
            top = kb_int_arg(PROG, "--top", argv[++i]);
        else if (!strcmp(argv[i], "--thread-clock"))
            clock_fn = thread_now_s;
        else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else {
            fprintf(stderr, "usage: bench_cpu_ops MODEL.tflite [--threads N] [--batch N] "
                            "[--iterations N] [--top N] [--thread-clock]\n");
            return 2;
        }
    }
    if (!path || iters < 1 || batch < 1) {
        fprintf(stderr, "bench_cpu_ops: a model file and positive counts are required\n");
        return 2;
    }
    int rc = 1;
    keyer_error err = {0};
    keyer_model *model = NULL;
    kr_backend_instance *whole = NULL, *split = NULL, *xnn_only = NULL;
    double *samples = NULL, *node_s = NULL;
    row *rows = NULL;
    if (keyer_model_load_file(path, &model, &err) != KEYER_OK) {
        fprintf(stderr, "bench_cpu_ops: %s\n", err.message);
        return 1;
    }
    const kr_graph *g = kr_model_graph(model);
    kr_backend_config cfg = {.batch = batch, .threads = threads};
    kr_cpu_options per_node = {.node_per_segment = 1}, no_kernels = {.no_kernels = 1};
    if (kr_cpu_create(g, &cfg, NULL, &whole, &err) != KEYER_OK ||
        kr_cpu_create(g, &cfg, &no_kernels, &xnn_only, &err) != KEYER_OK ||
        kr_cpu_create(g, &cfg, &per_node, &split, &err) != KEYER_OK) {
        fprintf(stderr, "bench_cpu_ops: %s\n", err.message);
        goto done;
    }
    int n_seg = kr_cpu_segment_count(split);
    samples = calloc((size_t)iters, sizeof(double));
    node_s = calloc((size_t)g->n_nodes, sizeof(double));
    rows = calloc((size_t)g->n_nodes, sizeof(row));
    double *seg_samples = calloc((size_t)iters * (size_t)n_seg, sizeof(double));
    if (!samples || !node_s || !rows || !seg_samples) {
        free(seg_samples);
        fprintf(stderr, "bench_cpu_ops: out of memory\n");
        goto done;
    }
    for (int i = 0; i < g->n_inputs; i++) {
        float *a = kr_backend_cpu.tensor_data(whole, g->inputs[i]);
        float *b = kr_backend_cpu.tensor_data(split, g->inputs[i]);
        float *c = kr_backend_cpu.tensor_data(xnn_only, g->inputs[i]);
        size_t n = kr_tensor_bytes(&g->tensors[g->inputs[i]], batch) / sizeof(float);
        for (size_t k = 0; k < n; k++)
            a[k] = b[k] = c[k] = (float)((k * 7919u) % 1000u) / 1000.0f;
    }
    /* The normal run, and the run without the backend's own kernels. */
    double whole_median, whole_cpu, xnn_median, xnn_cpu;
    if (time_runs(whole, iters, samples, &whole_median, &whole_cpu, &err) != KEYER_OK ||
        time_runs(xnn_only, iters, samples, &xnn_median, &xnn_cpu, &err) != KEYER_OK) {
        fprintf(stderr, "bench_cpu_ops: %s\n", err.message);
        free(seg_samples);
        goto done;
    }

    /* One runtime per node, each timed. */
    for (int i = 0; i < 10; i++)
        kr_backend_cpu.run(split, &err);
    for (int i = 0; i < iters; i++)
        for (int s = 0; s < n_seg; s++) {
            double t0 = clock_fn();
            kr_cpu_run_segment(split, s, &err);
            seg_samples[(size_t)s * (size_t)iters + (size_t)i] = clock_fn() - t0;
        }
    double sum = 0;
    double op_s[KR_OP_COUNT] = {0};
    uint64_t op_macs[KR_OP_COUNT] = {0};
    int op_count[KR_OP_COUNT] = {0};
    for (int s = 0; s < n_seg; s++) {
        kr_cpu_segment_info info;
        kr_cpu_segment_get(split, s, &info, &err);
        double *v = seg_samples + (size_t)s * (size_t)iters;
        qsort(v, (size_t)iters, sizeof(double), kb_cmp_double);
        double med = v[iters / 2];
        /* A reference segment's time is split evenly over its nodes. */
        int nn = info.last_node - info.first_node + 1;
        for (int ni = info.first_node; ni <= info.last_node; ni++)
            node_s[ni] = med / nn;
        sum += med;
    }
    free(seg_samples);
    for (int ni = 0; ni < g->n_nodes; ni++) {
        kr_op op = g->nodes[ni].op;
        op_s[op] += node_s[ni];
        op_macs[op] += node_macs(g, &g->nodes[ni]) * (uint64_t)batch;
        op_count[op]++;
        rows[ni].node = ni;
        rows[ni].median_s = node_s[ni];
    }
    printf("model %s  threads %d  batch %d  nodes %d\n", path, kr_cpu_threads(whole), batch,
           g->n_nodes);
    printf("normal run: %d segments, median %.3f ms, %.1f GFLOP/s\n",
           kr_cpu_segment_count(whole), whole_median * 1e3,
           2.0 * (double)keyer_model_macs(model) * batch / whole_median * 1e-9);
    printf("            cpu time %.3f ms per inference (all threads)\n", whole_cpu * 1e3);
    printf("without the CPU kernels (XNNPACK and reference only): %d segments, median %.3f ms, "
           "cpu time %.3f ms\n",
           kr_cpu_segment_count(xnn_only), xnn_median * 1e3, xnn_cpu * 1e3);
    printf("one segment per node: sum of medians %.3f ms\n\n", sum * 1e3);
    printf("%-28s %5s %9s %6s %9s\n", "operator", "count", "ms", "share", "GFLOP/s");
    for (int op = 0; op < KR_OP_COUNT; op++) {
        if (!op_count[op])
            continue;
        printf("%-28s %5d %9.3f %5.1f%% ", kr_op_name((kr_op)op), op_count[op], op_s[op] * 1e3,
               100.0 * op_s[op] / sum);
        if (op_macs[op])
            printf("%9.1f", 2.0 * (double)op_macs[op] / op_s[op] * 1e-9);
        printf("\n");
    }
    qsort(rows, (size_t)g->n_nodes, sizeof(row), cmp_row);
    printf("\nslowest nodes:\n%5s %-24s %-22s %9s %9s\n", "node", "operator", "output", "us",
           "GFLOP/s");
    for (int i = 0; i < top && i < g->n_nodes; i++) {
        const kr_node *n = &g->nodes[rows[i].node];
        const kr_tensor *o = &g->tensors[n->outputs[0]];
        char shape[64] = "";
        size_t used = 0;
        for (int d = 0; d < o->rank && used < sizeof(shape); d++)
            used += (size_t)snprintf(shape + used, sizeof(shape) - used, "%s%d", d ? "x" : "",
                                     o->dims[d]);
        uint64_t m = node_macs(g, n) * (uint64_t)batch;
        printf("%5d %-24s %-22s %9.1f", rows[i].node, kr_op_name(n->op), shape,
               rows[i].median_s * 1e6);
        if (m)
            printf(" %9.1f", 2.0 * (double)m / rows[i].median_s * 1e-9);
        printf("\n");
    }
    /* The normal run's segments (fusions included), each timed alone. */
    int n_whole = kr_cpu_segment_count(whole);
    row *segs = calloc((size_t)n_whole, sizeof(row));
    double *v = calloc((size_t)iters, sizeof(double));
    if (!segs || !v) {
        free(segs);
        free(v);
        fprintf(stderr, "bench_cpu_ops: out of memory\n");
        goto done;
    }
    double seg_sum = 0;
    for (int sgi = 0; sgi < n_whole; sgi++) {
        for (int i = 0; i < iters; i++) {
            double t0 = clock_fn();
            kr_cpu_run_segment(whole, sgi, &err);
            v[i] = clock_fn() - t0;
        }
        qsort(v, (size_t)iters, sizeof(double), kb_cmp_double);
        segs[sgi].node = sgi;
        segs[sgi].median_s = v[iters / 2];
        seg_sum += v[iters / 2];
    }
    qsort(segs, (size_t)n_whole, sizeof(row), cmp_row);
    printf("\nslowest segments of the normal run (sum %.3f ms):\n%5s %5s %5s %-8s %9s  %s\n",
           seg_sum * 1e3, "seg", "first", "last", "kind", "us", "first node");
    for (int i = 0; i < top && i < n_whole; i++) {
        kr_cpu_segment_info info;
        kr_cpu_segment_get(whole, segs[i].node, &info, &err);
        const kr_node *n = &g->nodes[info.first_node];
        const kr_tensor *o = &g->tensors[n->outputs[0]];
        printf("%5d %5d %5d %-8s %9.1f  %s", segs[i].node, info.first_node, info.last_node,
               info.xnnpack ? "xnnpack" : "kernels", segs[i].median_s * 1e6, kr_op_name(n->op));
        for (int d = 0; d < o->rank; d++)
            printf("%s%d", d ? "x" : " ", o->dims[d]);
        printf("\n");
    }
    free(segs);
    free(v);
    rc = 0;
done:
    kr_backend_cpu.destroy(&whole);
    kr_backend_cpu.destroy(&xnn_only);
    kr_backend_cpu.destroy(&split);
    keyer_model_destroy(&model);
    free(samples);
    free(node_s);
    free(rows);
    return rc;
}
