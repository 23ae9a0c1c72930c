/*
 * bench_nn_half_layers: where half precision loses a model's accuracy, node by node, on real
 * frames; the CPU measurement behind the cuda backend's mixed-precision plan (nn/precision_plan.h).
 *
 *   bench_nn_half_layers [--models pose-lite,pose-full] [--step N] [--layers] [--sweep]
 *                        [--single] [--f32 a-b,c,...] [--limit X] [--greedy PX]
 *
 * Frames: both test photos and every Nth frame (--step, default 6) of the two sample clips
 * ($KEYER_TEST_DATA or tests/data), decoded on the CPU and prepared as the main job prepares
 * them (keyer_prepare with the registry's fit and normalisation). Every run is the reference
 * backend's float kernels node by node on one float buffer per storage tensor:
 *  - "f32": as they are (the reference);
 *  - "sim half": the cuda f16 instance's rounding points (bench_half_sim.h: the input, every
 *    stored node output and every element-wise constant rounded to half), except for the
 *    nodes kept in float32 by the row.
 * Printed per model:
 *  - the plan of nn/precision_plan.h (which nodes it keeps in float32 and why);
 *  - per row (all half; the plan; other sets with --sweep): the largest move of the landmark
 *    x/y outputs over the frames (models with a 39 x 5 output: input pixels; x 7.5 for a
 *    1080p frame letterboxed into 256), the worst mask mean abs difference (sigmoid of the
 *    logits) and share of the activation elements kept in float32;
 *  - with --layers: per node, its operator, output shape, largest |activation| over the frames
 *    (f32; "OVER HALF" past 65504), and the largest difference of "sim half" at that node,
 *    absolute and relative to the node's largest |activation| (where the error grows);
 *  - --sweep: float32 for the last or the first 5-70% of the nodes, and for the nodes whose
 *    largest |activation| passes 16384, 4096, 1024, 256, 64; --limit X: that row for one X;
 *  - --single: every node alone in half, the rest in float32 (one row per node);
 *  - --f32 a-b,c: one row with those nodes (indices as --layers prints them) in float32;
 *  - --greedy PX: from the plan's float32 set, each node (last first) goes to half when the
 *    landmarks then still move by at most PX input pixels; the set left is printed.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_half_sim.h"
#include "bench_util.h"

#include "keyer/effects.h"
#include "keyer/nn.h"
#include "keyer/registry.h"
#include "nn/graph.h"
#include "nn/model.h"
#include "nn/precision_plan.h"
#include "kt_frames.h"

#define MAX_FRAMES 48

/* The emulation (bench_half_sim.h) and what the rows record per node. */
typedef struct {
    kb_sim sim;
    const kr_graph *g;
    double *amax;  /* per node: largest |output| of the f32 runs */
    double *dmax;  /* per node: largest |sim half - f32| at its output */
    float **ref;   /* per node: output 0 of the current frame's f32 run (for dmax) */
    int mode;      /* what the hook records: 0 amax and ref, 1 dmax, 2 nothing */
} sim;

static void record(void *ctx, int k, const float *y, size_t e)
{
    sim *s = ctx;
    if (s->mode == 0) {
        double m = s->amax[k];
        for (size_t i = 0; i < e; i++)
            m = fabs((double)y[i]) > m ? fabs((double)y[i]) : m;
        s->amax[k] = m;
        memcpy(s->ref[k], y, e * sizeof(float));
    } else if (s->mode == 1) {
        double m = s->dmax[k];
        for (size_t i = 0; i < e; i++) {
            double d = fabs((double)y[i] - (double)s->ref[k][i]);
            if (isnan(d))
                d = INFINITY;
            m = d > m ? d : m;
        }
        s->dmax[k] = m;
    }
}

static int sim_init(sim *s, const kr_graph *g)
{
    memset(s, 0, sizeof(*s));
    s->g = g;
    if (kb_sim_init(&s->sim, g, 1))
        return -1;
    s->amax = calloc((size_t)g->n_nodes, sizeof(double));
    s->dmax = calloc((size_t)g->n_nodes, sizeof(double));
    s->ref = calloc((size_t)g->n_nodes, sizeof(float *));
    if (!s->amax || !s->dmax || !s->ref)
        return -1;
    for (int k = 0; k < g->n_nodes; k++) {
        s->ref[k] = malloc((kr_tensor_elements(&g->tensors[g->nodes[k].outputs[0]]) + 1) *
                           sizeof(float));
        if (!s->ref[k])
            return -1;
    }
    return 0;
}

static void sim_free(sim *s)
{
    if (!s->g)
        return;
    kb_sim_free(&s->sim);
    if (s->ref)
        for (int k = 0; k < s->g->n_nodes; k++)
            free(s->ref[k]);
    free(s->amax);
    free(s->dmax);
    free(s->ref);
}

/* One run on @p x (@p n floats). @p half 0: the float32 reference (records amax and every
 * node's output); 1: the f16 rounding points except for the nodes marked in @p f32 (NULL:
 * none), recording dmax against the reference with @p track. */
static void sim_run(sim *s, const float *x, size_t n, int half, const unsigned char *f32,
                    int track)
{
    s->mode = !half ? 0 : track ? 1 : 2;
    kb_sim_run(&s->sim, x, n, half, half, f32, record, s);
}

typedef struct {
    int pts, mask, mask_logit; /* output indices; -1: none */
    size_t pts_n, mask_n;
} outs;

/* The largest landmark x/y move (input pixels) and mask mean abs difference of the current
 * sim state against @p want_pts / @p want_mask. */
static void score(const sim *s, const outs *o, const float *want_pts, const float *want_mask,
                  double *lm, int *lm_at, double *mask)
{
    const kr_graph *g = s->g;
    if (o->pts >= 0) {
        const float *p = s->sim.buf[g->outputs[o->pts]];
        for (size_t i = 0; i < o->pts_n / 5; i++)
            for (int k = 0; k < 2; k++) {
                double d = fabs((double)p[i * 5 + k] - want_pts[i * 5 + k]);
                d = isnan(d) ? INFINITY : d;
                if (d > *lm) {
                    *lm = d;
                    *lm_at = (int)i;
                }
            }
    }
    if (o->mask >= 0) {
        const float *m = s->sim.buf[g->outputs[o->mask]];
        double sum = 0;
        for (size_t i = 0; i < o->mask_n; i++) {
            double a = m[i], b = want_mask[i];
            if (o->mask_logit) {
                a = 1.0 / (1.0 + exp(-a));
                b = 1.0 / (1.0 + exp(-b));
            }
            double d = fabs(a - b);
            sum += isnan(d) ? INFINITY : d;
        }
        *mask = fmax(*mask, sum / (double)o->mask_n);
    }
}

typedef struct {
    float *x[MAX_FRAMES];
    char name[MAX_FRAMES][64];
    int n;
} frames;

static void frames_free(frames *f)
{
    for (int i = 0; i < f->n; i++)
        free(f->x[i]);
    f->n = 0;
}

/* What add_frame prepares with, and where it puts the result. */
typedef struct {
    frames *fs;
    keyer_prepare *prep;
    size_t in_n;
} frame_sink;

/* kt_sample_frames' callback: @p f prepared into a new input tensor, until the set is full. */
static int add_frame(keyer_frame *f, const char *name, int index, void *user)
{
    frame_sink *k = user;
    frames *fs = k->fs;
    keyer_error err = {0};
    float *x = malloc(k->in_n * sizeof(float));
    const keyer_frame *src = f;
    if (!x || keyer_prepare_run(k->prep, &src, NULL, 1, x, NULL, &err)) {
        fprintf(stderr, "bench_nn_half_layers: %s: %s\n", name, x ? err.message : "no memory");
        free(x);
        keyer_frame_destroy(&f);
        return -1;
    }
    keyer_frame_destroy(&f);
    fs->x[fs->n] = x;
    if (index < 0)
        snprintf(fs->name[fs->n], sizeof(fs->name[0]), "%s", name);
    else
        snprintf(fs->name[fs->n], sizeof(fs->name[0]), "%s#%d", name, index);
    fs->n++;
    return fs->n == MAX_FRAMES;
}

static int load_frames(frames *fs, const keyer_model_entry *e, int w, int h, int step)
{
    keyer_error err = {0};
    keyer_prepare_params pp = kt_entry_prepare_params(e, w, h);
    frame_sink k = {fs, NULL, (size_t)w * (size_t)h * 3};
    if (keyer_prepare_create(&pp, &k.prep, &err)) {
        fprintf(stderr, "bench_nn_half_layers: %s\n", err.message);
        return -1;
    }
    int rc = kt_sample_frames(step, add_frame, &k, &err);
    if (rc && err.message[0])
        fprintf(stderr, "bench_nn_half_layers: %s\n", err.message);
    keyer_prepare_destroy(&k.prep);
    return rc;
}

/* One row: @p f32 (NULL: all half) over every frame, against the f32 outputs in want. */
static double row(sim *s, const frames *fs, size_t in_n, const outs *o, float *const *want_pts,
                  float *const *want_mask, const unsigned char *f32, int track, const char *what)
{
    const kr_graph *g = s->g;
    double lm = 0, mask = 0, kept = 0, all = 0;
    int lm_at = -1, lm_frame = -1;
    for (int k = 0; k < g->n_nodes; k++) {
        double e = (double)kr_tensor_elements(&g->tensors[g->nodes[k].outputs[0]]);
        all += e;
        kept += f32 && f32[k] ? e : 0;
    }
    for (int i = 0; i < fs->n; i++) {
        if (track)
            sim_run(s, fs->x[i], in_n, 0, NULL, 0);
        sim_run(s, fs->x[i], in_n, 1, f32, track);
        double before = lm;
        score(s, o, want_pts[i], want_mask[i], &lm, &lm_at, &mask);
        if (lm > before)
            lm_frame = i;
    }
    printf("  %-44s landmarks move <= %7.3f px (x7.5 at 1080p: %6.2f; landmark %d of %s), "
           "mask mean abs <= %.2e, f32 activations %5.1f%%\n",
           what, lm, lm * 7.5, lm_at, lm_frame >= 0 ? fs->name[lm_frame] : "-", mask,
           100.0 * kept / all);
    fflush(stdout);
    return lm;
}

static int run_model(const char *name, int step, int layers, int sweep, int single,
                     const char *ranges, double limit, double greedy)
{
    char path[1024];
    keyer_error err = {0};
    keyer_model *model = NULL;
    const keyer_model_entry *e = keyer_registry_find(name);
    if (!e || keyer_registry_resolve(name, path, sizeof(path), &err) != KEYER_OK ||
        keyer_model_load_file(path, &model, &err) != KEYER_OK) {
        fprintf(stderr, "bench_nn_half_layers: %s: %s\n", name,
                e ? err.message : "not a registry model");
        return 1;
    }
    const kr_graph *g = kr_model_graph(model);
    const kr_tensor *it = &g->tensors[g->inputs[0]];
    size_t in_n = kr_tensor_elements(it);
    frames fs;
    memset(&fs, 0, sizeof(fs));
    sim s;
    memset(&s, 0, sizeof(s));
    float *want_pts[MAX_FRAMES] = {0}, *want_mask[MAX_FRAMES] = {0};
    unsigned char *f32 = calloc((size_t)g->n_nodes + 1, 1);
    kr_precision_plan plan;
    memset(&plan, 0, sizeof(plan));
    int rc = 1;
    outs o = {-1, -1, 0, 0, 0};
    if (e->task == KEYER_TASK_POSE_LANDMARKS || e->task == KEYER_TASK_FACE_LANDMARKS)
        for (int i = 0; i < g->n_outputs; i++)
            if (o.pts < 0 && kr_tensor_elements(&g->tensors[g->outputs[i]]) == 39 * 5)
                o.pts = i;
    if (e->mask_output >= 0 && e->mask_output < g->n_outputs) {
        o.mask = e->mask_output;
        o.mask_logit = e->mask_is_logit;
    }
    if (o.pts >= 0)
        o.pts_n = kr_tensor_elements(&g->tensors[g->outputs[o.pts]]);
    if (o.mask >= 0) {
        const kr_tensor *mt = &g->tensors[g->outputs[o.mask]];
        o.mask_n = kr_tensor_elements(mt) / (size_t)(mt->rank == 4 ? mt->dims[3] : 1);
    }
    if (!f32 || it->rank != 4 || it->dims[3] != 3 ||
        load_frames(&fs, e, it->dims[2], it->dims[1], step) || fs.n == 0 || sim_init(&s, g)) {
        fprintf(stderr, "bench_nn_half_layers: %s: no frames, no memory or not a float RGB "
                        "model\n", name);
        goto done;
    }
    for (int i = 0; i < fs.n; i++) {
        sim_run(&s, fs.x[i], in_n, 0, NULL, 0);
        if (o.pts >= 0) {
            want_pts[i] = malloc(o.pts_n * sizeof(float));
            if (!want_pts[i])
                goto done;
            memcpy(want_pts[i], s.sim.buf[g->outputs[o.pts]], o.pts_n * sizeof(float));
        }
        if (o.mask >= 0) {
            want_mask[i] = malloc(o.mask_n * sizeof(float) * 2);
            if (!want_mask[i])
                goto done;
            const float *m = s.sim.buf[g->outputs[o.mask]];
            const kr_tensor *mt = &g->tensors[g->outputs[o.mask]];
            int ch = mt->rank == 4 ? mt->dims[3] : 1;
            for (size_t p = 0; p < o.mask_n; p++)
                want_mask[i][p] = m[p * (size_t)ch];
        }
    }
    printf("%s: %d nodes, %d frames (2 photos, every %dth frame of the sample clips)\n", name,
           g->n_nodes, fs.n, step);
    if (kr_precision_plan_make(g, &plan, &err)) {
        fprintf(stderr, "bench_nn_half_layers: %s\n", err.message);
        goto done;
    }
    printf("  plan: %s\n", plan.summary);
    row(&s, &fs, in_n, &o, want_pts, want_mask, NULL, 1, "all half");
    if (plan.n_f32)
        row(&s, &fs, in_n, &o, want_pts, want_mask, plan.f32, 0, "the plan (nn/precision_plan.h)");
    if (layers) {
        printf("  node op                   out shape            max|f32|    |half-f32|  rel\n");
        for (int k = 0; k < g->n_nodes; k++) {
            const kr_tensor *ot = &g->tensors[g->nodes[k].outputs[0]];
            char shape[48];
            int w = 0;
            shape[0] = 0;
            for (int d = 0; d < ot->rank && w < (int)sizeof(shape) - 8; d++)
                w += snprintf(shape + w, sizeof(shape) - (size_t)w, d ? "x%d" : "%d",
                              ot->dims[d]);
            printf("  %4d %-20s %-18s %10.4g %12.4g %8.2e%s%s%s\n", k,
                   kr_op_name(g->nodes[k].op), shape, s.amax[k], s.dmax[k],
                   s.amax[k] > 0 ? s.dmax[k] / s.amax[k] : 0.0, s.sim.fused[k] ? " fused" : "",
                   s.amax[k] > 65504 ? " OVER HALF" : "",
                   plan.f32 && plan.f32[k] ? " [f32]" : "");
        }
    }
    if (ranges) {
        /* --f32 a-b,c,...: those nodes in float32 */
        memset(f32, 0, (size_t)g->n_nodes);
        char *list = strdup(ranges);
        for (char *save = NULL, *r = list ? strtok_r(list, ",", &save) : NULL; r;
             r = strtok_r(NULL, ",", &save)) {
            int a = atoi(r), b = strchr(r, '-') ? atoi(strchr(r, '-') + 1) : a;
            for (int k = a; k <= b && k < g->n_nodes; k++)
                if (k >= 0)
                    f32[k] = 1;
        }
        free(list);
        row(&s, &fs, in_n, &o, want_pts, want_mask, f32, 0, ranges);
    }
    if (limit > 0) {
        char what[64];
        for (int k = 0; k < g->n_nodes; k++)
            f32[k] = s.amax[k] > limit;
        snprintf(what, sizeof(what), "f32 where max|f32| > %g", limit);
        row(&s, &fs, in_n, &o, want_pts, want_mask, f32, 0, what);
    }
    if (greedy > 0 && plan.n_f32) {
        /* the smallest float32 set found from the plan's: each of its nodes, last first, goes
         * to half when the landmarks then still move by at most --greedy input pixels */
        memcpy(f32, plan.f32, (size_t)g->n_nodes);
        for (int k = g->n_nodes - 1; k >= 0; k--) {
            if (!f32[k])
                continue;
            f32[k] = 0;
            char what[64];
            snprintf(what, sizeof(what), "  try node %d (%s) in half", k,
                     kr_op_name(g->nodes[k].op));
            if (row(&s, &fs, in_n, &o, want_pts, want_mask, f32, 0, what) > greedy)
                f32[k] = 1;
        }
        int kept = 0, w = 0;
        char list[4096];
        list[0] = 0;
        for (int k = 0; k < g->n_nodes; k++)
            if (f32[k]) {
                kept++;
                if (w < (int)sizeof(list) - 16)
                    w += snprintf(list + w, sizeof(list) - (size_t)w, "%s%d", w ? "," : "", k);
            }
        char what[64];
        snprintf(what, sizeof(what), "greedy: %d nodes in float32", kept);
        row(&s, &fs, in_n, &o, want_pts, want_mask, f32, 0, what);
        printf("  greedy float32 nodes (--f32): %s\n", list);
    }
    if (single) {
        /* every node alone in half (the input too for node 0), the rest in float32 */
        for (int k = 0; k < g->n_nodes; k++) {
            char what[64];
            for (int j = 0; j < g->n_nodes; j++)
                f32[j] = j != k;
            snprintf(what, sizeof(what), "only node %d (%s) half", k, kr_op_name(g->nodes[k].op));
            row(&s, &fs, in_n, &o, want_pts, want_mask, f32, 0, what);
        }
    }
    if (sweep) {
        /* float32 from node k to the end, and up to node k */
        static const double fracs[] = {0.95, 0.9, 0.8, 0.7, 0.5, 0.3};
        for (size_t fi = 0; fi < sizeof(fracs) / sizeof(fracs[0]); fi++) {
            int k0 = (int)(fracs[fi] * g->n_nodes);
            char what[64];
            for (int k = 0; k < g->n_nodes; k++)
                f32[k] = k >= k0;
            snprintf(what, sizeof(what), "f32 from node %d (last %.0f%%)", k0,
                     100 * (1 - fracs[fi]));
            row(&s, &fs, in_n, &o, want_pts, want_mask, f32, 0, what);
            for (int k = 0; k < g->n_nodes; k++)
                f32[k] = k < g->n_nodes - k0;
            snprintf(what, sizeof(what), "f32 up to node %d (first %.0f%%)", g->n_nodes - k0,
                     100 * (1 - fracs[fi]));
            row(&s, &fs, in_n, &o, want_pts, want_mask, f32, 0, what);
        }
        static const double limits[] = {16384, 4096, 1024, 256, 64};
        for (size_t li = 0; li < sizeof(limits) / sizeof(limits[0]); li++) {
            char what[64];
            for (int k = 0; k < g->n_nodes; k++)
                f32[k] = s.amax[k] > limits[li];
            snprintf(what, sizeof(what), "f32 where max|f32| > %g", limits[li]);
            row(&s, &fs, in_n, &o, want_pts, want_mask, f32, 0, what);
        }
    }
    rc = 0;
done:
    for (int i = 0; i < MAX_FRAMES; i++) {
        free(want_pts[i]);
        free(want_mask[i]);
    }
    kr_precision_plan_free(&plan);
    sim_free(&s);
    frames_free(&fs);
    free(f32);
    keyer_model_destroy(&model);
    return rc;
}

#define PROG "bench_nn_half_layers"

int main(int argc, char **argv)
{
    const char *models = "pose-lite,pose-full";
    int step = 6, layers = 0, sweep = 0, single = 0;
    const char *ranges = NULL;
    double limit = 0, greedy = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--models") && i + 1 < argc)
            models = argv[++i];
        else if (!strcmp(argv[i], "--step") && i + 1 < argc)
            step = kb_int_arg(PROG, "--step", argv[++i]);
        else if (!strcmp(argv[i], "--layers"))
            layers = 1;
        else if (!strcmp(argv[i], "--sweep"))
            sweep = 1;
        else if (!strcmp(argv[i], "--single"))
            single = 1;
        else if (!strcmp(argv[i], "--f32") && i + 1 < argc)
            ranges = argv[++i];
        else if (!strcmp(argv[i], "--greedy") && i + 1 < argc)
            greedy = kb_number_arg(PROG, "--greedy", argv[++i]);
        else if (!strcmp(argv[i], "--limit") && i + 1 < argc)
            limit = kb_number_arg(PROG, "--limit", argv[++i]);
        else {
            fprintf(stderr, "usage: bench_nn_half_layers [--models a,b] [--step N] [--layers] "
                            "[--sweep] [--single] [--f32 a-b,c] [--limit X] [--greedy PX]\n");
            return 2;
        }
    }
    if (step < 1) {
        fprintf(stderr, "bench_nn_half_layers: --step must be >= 1\n");
        return 2;
    }
    int rc = 0;
    char *list = strdup(models);
    if (!list)
        return 1;
    for (char *save = NULL, *m = strtok_r(list, ",", &save); m; m = strtok_r(NULL, ",", &save))
        rc |= run_model(m, step, layers, sweep, single, ranges, limit, greedy);
    free(list);
    return rc;
}
