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

#include "bench_half_sim.h"
#include "bench_util.h"

#include "keyer/nn.h"
#include "keyer/registry.h"
#include "nn/graph.h"
#include "nn/model.h"

#define MAX_ITEMS 64

typedef struct {
    double max_abs[MAX_ITEMS], rms[MAX_ITEMS], agree[MAX_ITEMS];
} row_stats;

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
    row_stats st = {{0}, {0}, {0}};
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
    kb_sim s;
    memset(&s, 0, sizeof(s));
    float *items[MAX_ITEMS] = {0}, *want[MAX_ITEMS] = {0};
    if (!photo || in_n != kr_tensor_elements(it) || it->rank != 4) {
        fprintf(stderr, "bench_nn_precision: %s: missing, or not %s's input shape\n", in_path,
                name);
        goto done;
    }
    if (kb_sim_init(&s, g, 0)) {
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
        memcpy(want[i], kb_sim_run(&s, items[i], in_n, 0, 0, NULL, NULL, NULL),
               out_n * sizeof(float));
    }
    static const char *const sim_rows[2] = {"sim: half input", "sim: half storage"};
    for (int mode = 1; mode <= 2; mode++) {
        row_stats st = {{0}, {0}, {0}};
        for (int i = 0; i < n_items; i++)
            compare(kb_sim_run(&s, items[i], in_n, 1, mode == 2, NULL, NULL, NULL), want[i],
                    out_n, &st, i);
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
    kb_sim_free(&s);
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
