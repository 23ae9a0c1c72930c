/*
 * bench_nn_precision: how far half precision moves a segmentation model's mask from float32's,
 * over variants of the test photo, for the cuda backend's schedules and for two simulations on
 * the reference kernels that show where the error comes from.
 *
 *   bench_nn_precision [--models selfie,selfie-landscape] [--variants N] [--no-cuda]
 *
 * Items: the model's reference input (tests/data/reference/<model>/grace_hopper/input.f32, or
 * $KEYER_TEST_DATA/reference/...) scaled in brightness by 1.00, 0.98, 0.96, ... and each of
 * those mirrored left-right: N items (default 22). The float32 reference is the reference
 * backend's kernels run node by node on float tensors. Rows:
 *  - "sim: half input": the input rounded to half (round to nearest even), every node in float:
 *    the error that the model makes of the input's rounding alone;
 *  - "sim: half storage": the input and every node's output rounded to half, except an output
 *    that the cuda per-node schedule never stores (one read only by the next node when that is
 *    an activation, or a residual ADD following a convolution, depthwise, transpose, ADD or
 *    MUL node): the per-node schedule's rounding points, computed with float arithmetic;
 *  - "cuda <precision> <schedule>": keyer_runtime on the cuda backend at batch 1 (when built
 *    with it and a device answers; --no-cuda skips).
 * Per row, over the items: the mean and the largest per-item max abs difference from the
 * reference on the mask (output 0), the items whose max abs exceeds 0.02, the lowest share of
 * pixels on the same side of 0.5, and the mean root-mean-square difference.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

#include "keyer/nn.h"
#include "keyer/registry.h"
#include "nn/graph.h"
#include "nn/model.h"
#include "nn/reference/ops.h"
#include "render/fx_math.h"

#define MAX_ITEMS 64

typedef struct {
    double max_abs[MAX_ITEMS], rms[MAX_ITEMS], agree[MAX_ITEMS];
} row_stats;

static float round_half(float v) { return kr_half_to_float(kr_float_to_half(v)); }

static float *read_floats(const char *path, size_t *count)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    float *data = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
        data = malloc((size_t)n);
        if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
            free(data);
            data = NULL;
        }
    }
    fclose(f);
    *count = data ? (size_t)n / sizeof(float) : 0;
    return data;
}

/* Item @p v of the photo @p x (NHWC, @p w wide, @p c channels, @p n floats) into @p dst. */
static void make_item(float *dst, const float *x, size_t n, int w, int c, int v)
{
    float scale = 1.0f - 0.02f * (float)(v / 2);
    size_t rows = n / ((size_t)w * (size_t)c);
    for (size_t r = 0; r < rows; r++)
        for (int xx = 0; xx < w; xx++)
            for (int k = 0; k < c; k++) {
                int sx = v % 2 ? w - 1 - xx : xx;
                dst[(r * (size_t)w + (size_t)xx) * (size_t)c + (size_t)k] =
                    x[(r * (size_t)w + (size_t)sx) * (size_t)c + (size_t)k] * scale;
            }
}

/* The reference kernels node by node on one float buffer per storage tensor. */
typedef struct {
    const kr_graph *g;
    float **buf;        /* per tensor: its storage's buffer (NULL for constants) */
    unsigned char *keep; /* per node: 1 when the cuda per-node schedule never stores its output */
} sim;

static int is_activation(kr_op op)
{
    return op == KR_OP_RELU || op == KR_OP_RELU6 || op == KR_OP_HARD_SWISH ||
           op == KR_OP_LOGISTIC;
}

static int sim_init(sim *s, const kr_graph *g)
{
    s->g = g;
    s->buf = calloc((size_t)g->n_tensors, sizeof(float *));
    s->keep = calloc((size_t)g->n_nodes + 1, 1);
    if (!s->buf || !s->keep)
        return -1;
    for (int t = 0; t < g->n_tensors; t++) {
        const kr_tensor *tt = &g->tensors[t];
        if (kr_tensor_is_const(tt) || kr_tensor_storage(g, t) != t)
            continue;
        if (tt->dtype != KR_DTYPE_F32)
            return -1;
        s->buf[t] = calloc(kr_tensor_elements(tt) + 16, sizeof(float));
        if (!s->buf[t])
            return -1;
    }
    for (int t = 0; t < g->n_tensors; t++)
        if (!s->buf[t] && !kr_tensor_is_const(&g->tensors[t]))
            s->buf[t] = s->buf[kr_tensor_storage(g, t)];
    for (int k = 0; k + 1 < g->n_nodes; k++) {
        const kr_tensor *o = &g->tensors[g->nodes[k].outputs[0]];
        kr_op op = g->nodes[k].op, next = g->nodes[k + 1].op;
        if (o->last_consumer != k + 1 || o->graph_output >= 0)
            continue;
        if (is_activation(next) ||
            (next == KR_OP_ADD &&
             (op == KR_OP_CONV_2D || op == KR_OP_DEPTHWISE_CONV_2D ||
              op == KR_OP_TRANSPOSE_CONV_BIAS || op == KR_OP_ADD || op == KR_OP_MUL)))
            s->keep[k] = 1;
    }
    return 0;
}

static void sim_free(sim *s)
{
    if (s->buf)
        for (int t = 0; t < s->g->n_tensors; t++)
            if (s->buf[t] && kr_tensor_storage(s->g, t) == t)
                free(s->buf[t]);
    free(s->buf);
    free(s->keep);
}

/* Runs the graph on @p x; mode 0 float, 1 half input, 2 half storage. Returns output 0. */
static const float *sim_run(sim *s, const float *x, size_t n, int mode)
{
    const kr_graph *g = s->g;
    float *in = s->buf[g->inputs[0]];
    for (size_t i = 0; i < n; i++)
        in[i] = mode ? round_half(x[i]) : x[i];
    for (int k = 0; k < g->n_nodes; k++) {
        const kr_node *node = &g->nodes[k];
        kr_op_ctx c;
        memset(&c, 0, sizeof(c));
        c.graph = g;
        c.node = node;
        c.batch = 1;
        for (int i = 0; i < node->n_inputs; i++) {
            int t = node->inputs[i];
            if (t >= 0)
                c.in[i] = kr_tensor_is_const(&g->tensors[t]) ? g->tensors[t].data
                                                              : (const void *)s->buf[t];
        }
        for (int i = 0; i < node->n_outputs; i++)
            c.out[i] = s->buf[node->outputs[i]];
        kr_ref_ops[node->op](&c);
        if (mode == 2 && !s->keep[k]) {
            float *y = s->buf[node->outputs[0]];
            size_t e = kr_tensor_elements(&g->tensors[node->outputs[0]]);
            for (size_t i = 0; i < e; i++)
                y[i] = round_half(y[i]);
        }
    }
    return s->buf[g->outputs[0]];
}

static void compare(const float *got, const float *want, size_t n, row_stats *st, int item)
{
    double mx = 0, ss = 0;
    size_t agree = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        mx = d > mx ? d : mx;
        ss += d * d;
        agree += (got[i] >= 0.5f) == (want[i] >= 0.5f);
    }
    st->max_abs[item] = mx;
    st->rms[item] = sqrt(ss / (double)n);
    st->agree[item] = 100.0 * (double)agree / (double)n;
}

static void print_row(const char *model, const char *what, const row_stats *st, int items)
{
    double mean = 0, worst = 0, rms = 0, agree = 100;
    int over = 0;
    for (int i = 0; i < items; i++) {
        mean += st->max_abs[i];
        rms += st->rms[i];
        worst = st->max_abs[i] > worst ? st->max_abs[i] : worst;
        agree = st->agree[i] < agree ? st->agree[i] : agree;
        over += st->max_abs[i] > 0.02;
    }
    printf("%-17s %-28s max abs: item 0 %.4f  mean %.4f  worst %.4f  over 0.02: %2d/%d  "
           "agreement >= %.4f%%  rms %.2e\n",
           model, what, st->max_abs[0], mean / items, worst, over, items, agree, rms / items);
    fflush(stdout);
}

#ifdef KEYER_HAVE_CUDA_NN
/* The cuda backend at @p prec and @p sched on every item. Returns 0; 1 when it failed; 2 when
 * no device answers (printed; the caller skips the other cuda rows). */
static int cuda_row(const char *model_name, const keyer_model *model, keyer_precision prec,
                    keyer_cuda_schedule sched, const char *what, float *const *items,
                    const float *const *want, int n_items, size_t in_n, size_t out_n)
{
    keyer_runtime_params p = keyer_runtime_params_defaults();
    p.backend = KEYER_BACKEND_CUDA;
    p.precision = prec;
    p.cuda_schedule = sched;
    keyer_runtime *rt = NULL;
    keyer_error err = {0};
    keyer_status cs = keyer_runtime_create(model, &p, &rt, &err);
    if (cs != KEYER_OK) {
        printf("%-17s %-28s cannot run: %s\n", model_name, what, err.message);
        return cs == KEYER_STATUS_DEVICE ? 2 : 1;
    }
    float *out = malloc(out_n * sizeof(float));
    row_stats st;
    int ok = out != NULL;
    for (int i = 0; ok && i < n_items; i++) {
        ok = keyer_runtime_set_input(rt, 0, items[i], in_n * sizeof(float), &err) == KEYER_OK &&
             keyer_runtime_run(rt, &err) == KEYER_OK &&
             keyer_runtime_get_output(rt, 0, out, out_n * sizeof(float), &err) == KEYER_OK;
        if (ok)
            compare(out, want[i], out_n, &st, i);
    }
    if (ok)
        print_row(model_name, what, &st, n_items);
    else
        printf("%-17s %-28s failed: %s\n", model_name, what, out ? err.message : "out of memory");
    free(out);
    keyer_runtime_destroy(&rt);
    return !ok;
}
#endif

static int run_model(const char *name, int n_items, int use_cuda)
{
    char path[1024], in_path[1024];
    keyer_error err = {0};
    keyer_model *model = NULL;
    if (keyer_registry_resolve(name, path, sizeof(path), &err) != KEYER_OK ||
        keyer_model_load_file(path, &model, &err) != KEYER_OK) {
        fprintf(stderr, "bench_nn_precision: %s\n", err.message);
        return 1;
    }
    const kr_graph *g = kr_model_graph(model);
    const char *data = getenv("KEYER_TEST_DATA");
    snprintf(in_path, sizeof(in_path), "%s/reference/%s/grace_hopper/input.f32",
             data ? data : "tests/data", name);
    size_t in_n = 0;
    float *photo = read_floats(in_path, &in_n);
    const kr_tensor *it = &g->tensors[g->inputs[0]];
    const kr_tensor *ot = &g->tensors[g->outputs[0]];
    size_t out_n = kr_tensor_elements(ot);
    int rc = 1;
    sim s;
    memset(&s, 0, sizeof(s));
    float *items[MAX_ITEMS] = {0}, *want[MAX_ITEMS] = {0};
    if (!photo || in_n != kr_tensor_elements(it) || it->rank != 4) {
        fprintf(stderr, "bench_nn_precision: %s: missing, or not %s's input shape\n", in_path,
                name);
        goto done;
    }
    if (sim_init(&s, g)) {
        fprintf(stderr, "bench_nn_precision: %s: out of memory, or not a float model\n", name);
        goto done;
    }
    for (int i = 0; i < n_items; i++) {
        items[i] = malloc(in_n * sizeof(float));
        want[i] = malloc(out_n * sizeof(float));
        if (!items[i] || !want[i]) {
            fprintf(stderr, "bench_nn_precision: out of memory\n");
            goto done;
        }
        make_item(items[i], photo, in_n, it->dims[2], it->dims[3], i);
        memcpy(want[i], sim_run(&s, items[i], in_n, 0), out_n * sizeof(float));
    }
    static const char *const sim_rows[2] = {"sim: half input", "sim: half storage"};
    for (int mode = 1; mode <= 2; mode++) {
        row_stats st;
        for (int i = 0; i < n_items; i++)
            compare(sim_run(&s, items[i], in_n, mode), want[i], out_n, &st, i);
        print_row(name, sim_rows[mode - 1], &st, n_items);
    }
    rc = 0;
#ifdef KEYER_HAVE_CUDA_NN
    if (use_cuda) {
        static const keyer_cuda_schedule scheds[3] = {KEYER_CUDA_SCHEDULE_KERNELS,
                                                      KEYER_CUDA_SCHEDULE_PERSISTENT,
                                                      KEYER_CUDA_SCHEDULE_PERSISTENT_GRID};
        static const char *const snames[3] = {"kernels", "persistent", "persistent-grid"};
        int r = 0;
        for (int pi = 0; pi < 2 && r != 2; pi++)
            for (int si = 0; si < 3 && r != 2; si++) {
                char what[64];
                snprintf(what, sizeof(what), "cuda %s %s", pi ? "f16" : "f32", snames[si]);
                r = cuda_row(name, model, pi ? KEYER_PRECISION_F16 : KEYER_PRECISION_F32,
                             scheds[si], what, items, (const float *const *)want, n_items, in_n,
                             out_n);
                rc |= r == 1;
            }
    }
#else
    (void)use_cuda;
#endif
done:
    for (int i = 0; i < n_items; i++) {
        free(items[i]);
        free(want[i]);
    }
    sim_free(&s);
    free(photo);
    keyer_model_destroy(&model);
    return rc;
}

#define PROG "bench_nn_precision"

int main(int argc, char **argv)
{
    const char *models = "selfie,selfie-landscape";
    int n_items = 22, use_cuda = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--models") && i + 1 < argc)
            models = argv[++i];
        else if (!strcmp(argv[i], "--variants") && i + 1 < argc)
            n_items = kb_int_arg(PROG, "--variants", argv[++i]);
        else if (!strcmp(argv[i], "--no-cuda"))
            use_cuda = 0;
        else {
            fprintf(stderr, "usage: bench_nn_precision [--models a,b] [--variants N] "
                            "[--no-cuda]\n");
            return 2;
        }
    }
    if (n_items < 1 || n_items > MAX_ITEMS) {
        fprintf(stderr, "bench_nn_precision: --variants must be 1..%d\n", MAX_ITEMS);
        return 2;
    }
    printf("bench_nn_precision: %d items per model (brightness 1.00 down by 0.02, each also "
           "mirrored); against float32 reference kernels\n",
           n_items);
    int rc = 0;
    char *list = strdup(models);
    if (!list)
        return 1;
    for (char *save = NULL, *m = strtok_r(list, ",", &save); m; m = strtok_r(NULL, ",", &save))
        rc |= run_model(m, n_items, use_cuda);
    free(list);
    return rc;
}
