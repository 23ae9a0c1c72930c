/*
 * The runtime's cuda backend on every shipped model against the reference backend, on real
 * photos (the reference fixtures' input tensors: tests/data/reference/<model>/grace_hopper/
 * input.f32; models without a fixture of their own take a fixture of the same input size).
 *
 *  float32: |cuda - reference| <= 1e-3 * max(1, |reference|) on every output (absolute up to
 *           1, relative above: pose landmarks are pixels up to ~255 and segmentation logits
 *           reach the hundreds). The absolute maximum is printed. Exception, as in
 *           tests/golden/test_reference_outputs.c: the pose models' body-mask logits (output
 *           Identity_2) are ill-conditioned (one float ulp on the input moves them by ~0.01) and
 *           are held to 5e-3 relative, the bound the cpu backend (float accumulation, like this
 *           one) is held to.
 *  float16: segmentation masks thresholded at 0.5 agree on >= 99.5% of pixels with a mean
 *           absolute difference <= 5e-3 (the bounds of the precision issue: half storage alone
 *           moves a few outline pixels by up to ~0.07, so the max abs is printed, not bounded);
 *           the pose models' presence flag (in [0,1]) within 2e-2 for the models AUTO runs in
 *           half (registry half_ok), printed for the others; face detection gives the same
 *           faces (same count, IoU >= 0.9 each) after decoding; other outputs are printed.
 *           tests/unit/test_precision_gpu.c measures the same bounds on clip frames.
 *  batch:   batch 4 (four different inputs) equals four batch-1 runs, bit for bit (the kernels'
 *           summation order does not depend on the batch), in f32 and f16.
 *  schedules: all of the above for the cuda schedules: a kernel per node, the persistent kernel
 *           (with its cluster segment where the model has one: selfie, selfie-landscape) and
 *           the persistent kernel alone (PERSISTENT_GRID); models the persistent kernel cannot
 *           run print why and are skipped for it.
 *  graph:   repeated runs give identical outputs; a run on the caller's own stream works.
 *  auto:    AUTO's batch limits: the persistent kernel up to KEYER_CUDA_SEGMENT_MAX_BATCH for
 *           the models with a cluster segment, the per-node kernels above it and, for the others,
 *           above KEYER_CUDA_PERSISTENT_MAX_BATCH (each item bit for bit against a batch-1 run
 *           of the expected schedule).
 *
 * Label gpu (file name *_gpu.c); exits 77 without a CUDA device. KEYER_TEST_FILTER (a cmocka pattern,
 * tests/common/kt_gpu.h) runs only the matching cases; KEYER_TEST_MODELS (model names separated
 * by commas, kt_gpu.h) only those models in test_models and test_auto_batch_limits, which skip
 * when it lists none of theirs (scripts/sanitize-gpu-tests.sh runs them one model at a time).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gpu_caps.h"
#include "keyer/detect.h"
#include "keyer/nn.h"
#include "keyer/registry.h"
#include "nn/cuda/tuning.h" /* AUTO's batch limits */
#include "kt_gpu.h"
#include "testutil.h"

typedef struct {
    const char *model;
    const char *fixture; /* reference fixture whose input.f32 has this model's input shape */
    int mask_output;     /* index of an output in [0,1] (segmentation mask), or -1 */
    int face;            /* 1: face-short, 2: face-full (decode and compare faces) */
    int unit_output;     /* index of another output in [0,1] (a probability), or -1 */
} model_case;

/* The pose models' output 1 is the pose-presence flag, already a sigmoid in the model
 * (docs/models.md 3.3). */
static const model_case cases[] = {
    {"selfie", "selfie", 0, 0, -1},
    {"selfie-landscape", "selfie-landscape", 0, 0, -1},
    {"face-short", "face-short", -1, 1, -1},
    {"face-full", "face-full", -1, 2, -1},
    {"pose-lite", "pose-lite", -1, 0, 1},
    {"pose-full", "pose-lite", -1, 0, 1},
    {"pose-heavy", "pose-lite", -1, 0, 1},
    {"face-mesh", "face-full", -1, 0, -1},
};

typedef struct {
    int n;
    float *out[5];
    size_t bytes[5];
    char schedule[24]; /* keyer_runtime_schedule() of the run */
} outputs;

static void outputs_free(outputs *o)
{
    for (int i = 0; i < o->n; i++)
        free(o->out[i]);
    memset(o, 0, sizeof(*o));
}

static float *load_input(const char *fixture, size_t want)
{
    char rel[256], path[1024];
    snprintf(rel, sizeof(rel), "reference/%s/grace_hopper/input.f32", fixture);
    kt_data_path(path, sizeof(path), rel);
    size_t n = 0;
    float *x = kt_read_file(path, &n);
    if (!x)
        fail_msg("cannot read %s", path);
    assert_int_equal(n, want);
    return x;
}

/* Batch item @p b derived from the photo tensor @p item: item 0 is the photo, odd items are it
 * mirrored left-right, even items darkened by 10% per step (every item differs). */
static void make_item(float *dst, const float *item, size_t item_floats, int w, int c, int b)
{
    size_t rows = item_floats / ((size_t)w * c);
    for (size_t r = 0; r < rows; r++)
        for (int xx = 0; xx < w; xx++)
            for (int k = 0; k < c; k++) {
                size_t s = (r * w + (size_t)(b % 2 ? w - 1 - xx : xx)) * c + k;
                float v = item[s];
                dst[(r * w + xx) * c + k] = (b % 2 || b == 0) ? v : v * (1.0f - 0.1f * b);
            }
}

/* Runs @p model on @p backend at @p batch on items first..first+batch-1 with the cuda
 * @p schedule. Returns 0, or 1 (printing why) when the schedule cannot run the model. */
static int run(const keyer_model *model, keyer_backend backend, keyer_precision prec,
               keyer_cuda_schedule schedule, int batch, int first, const float *item,
               size_t item_floats, int w, int c, outputs *o)
{
    keyer_runtime_params p = keyer_runtime_params_defaults();
    p.backend = backend;
    p.precision = prec;
    p.batch = batch;
    p.cuda_schedule = schedule;
    keyer_runtime *rt = NULL;
    keyer_error err = {0};
    keyer_status st = keyer_runtime_create(model, &p, &rt, &err);
    if (st == KEYER_STATUS_UNSUPPORTED && (schedule == KEYER_CUDA_SCHEDULE_PERSISTENT ||
                                           schedule == KEYER_CUDA_SCHEDULE_PERSISTENT_GRID)) {
        printf("    %s\n", err.message);
        return 1;
    }
    if (st != KEYER_OK)
        fail_msg("%s", err.message);
    float *x = malloc(item_floats * (size_t)batch * sizeof(float));
    assert_non_null(x);
    for (int b = 0; b < batch; b++)
        make_item(x + item_floats * (size_t)b, item, item_floats, w, c, first + b);
    assert_int_equal(keyer_runtime_set_input(rt, 0, x, keyer_runtime_input_bytes(rt, 0), &err),
                     KEYER_OK);
    free(x);
    if (keyer_runtime_run(rt, &err) != KEYER_OK)
        fail_msg("%s", err.message);
    snprintf(o->schedule, sizeof(o->schedule), "%s", keyer_runtime_schedule(rt));
    o->n = keyer_model_output_count(model);
    for (int i = 0; i < o->n; i++) {
        o->bytes[i] = keyer_runtime_output_bytes(rt, i);
        o->out[i] = malloc(o->bytes[i]);
        assert_non_null(o->out[i]);
        assert_int_equal(keyer_runtime_get_output(rt, i, o->out[i], o->bytes[i], &err), KEYER_OK);
    }
    keyer_runtime_destroy(&rt);
    return 0;
}

/* Whether the device runs thread-block clusters as keyer sees it: compute 9.0 or newer, and
 * no older class emulated (KEYER_CUDA_EMULATE_CC; ctest runs this test once per class). */
static int clusters_expected(void)
{
    int dev = 0, major = 0;
    assert_int_equal(cudaGetDevice(&dev), cudaSuccess);
    assert_int_equal(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev),
                     cudaSuccess);
    int emu_major = 0, emu_minor = 0;
    assert_int_equal(kr_gpu_emulate_parse(getenv(KR_GPU_EMULATE_ENV), KR_GPU_EMULATE_ENV,
                                          &emu_major, &emu_minor, NULL),
                     KEYER_OK);
    if (emu_major) /* an emulated class: clusters from 9.0 only */
        return emu_major >= 9 && major >= 9;
    return major >= 9;
}

/* Whether @p model's PERSISTENT schedule has a cluster segment here (selfie, selfie-landscape
 * on a device with clusters). */
static int segment_expected(const char *model)
{
    return clusters_expected() &&
           (!strcmp(model, "selfie") || !strcmp(model, "selfie-landscape"));
}

static void diff(const float *got, const float *want, size_t n, double *max_abs, double *max_rel)
{
    *max_abs = *max_rel = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (isnan(d))
            d = INFINITY;
        *max_abs = fmax(*max_abs, d);
        *max_rel = fmax(*max_rel, d / fmax(1.0, fabs((double)want[i])));
    }
}

static void compare_faces(int which, const outputs *ref, const outputs *f16)
{
    keyer_detector_params dp = which == 1 ? keyer_detector_params_face_short()
                                          : keyer_detector_params_face_full();
    keyer_detector *d = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_detector_create(&dp, &d, &err), KEYER_OK);
    keyer_detection a[16], b[16];
    int na = 0, nb = 0;
    assert_int_equal(keyer_detector_decode(d, ref->out[0], ref->out[1], a, 16, &na, &err), KEYER_OK);
    assert_int_equal(keyer_detector_decode(d, f16->out[0], f16->out[1], b, 16, &nb, &err), KEYER_OK);
    printf("    faces: reference %d, cuda f16 %d", na, nb);
    assert_int_equal(na, nb);
    assert_true(na >= 1); /* the photo has a face */
    for (int i = 0; i < na; i++) {
        float best = 0;
        for (int j = 0; j < nb; j++)
            best = fmaxf(best, keyer_detection_iou(&a[i], &b[j]));
        printf(", IoU %.4f", best);
        assert_true(best >= 0.9f);
    }
    printf("\n");
    keyer_detector_destroy(&d);
}

static void test_models(void **state)
{
    (void)state;
    int failures = 0; /* every model is checked and printed before the verdict */
    int ran = 0;
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const model_case *mc = &cases[ci];
        if (!kt_test_model(mc->model))
            continue; /* KEYER_TEST_MODELS */
        ran++;
        char path[1024];
        keyer_error err = {0};
        assert_int_equal(keyer_registry_resolve(mc->model, path, sizeof(path), &err), KEYER_OK);
        keyer_model *model = NULL;
        if (keyer_model_load_file(path, &model, &err) != KEYER_OK)
            fail_msg("%s", err.message);
        keyer_tensor_info in;
        assert_int_equal(keyer_model_input_info(model, 0, &in, &err), KEYER_OK);
        size_t item = (size_t)in.dims[1] * in.dims[2] * in.dims[3];
        float *x = load_input(mc->fixture, item * sizeof(float));
        outputs ref = {0};
        run(model, KEYER_BACKEND_REFERENCE, KEYER_PRECISION_F32, KEYER_CUDA_SCHEDULE_AUTO, 1, 0,
            x, item, in.dims[2], in.dims[3], &ref);
        printf("%s (input from the %s fixture):\n", mc->model, mc->fixture);
        for (int si = 0; si < 3; si++) {
            static const keyer_cuda_schedule scheds[3] = {KEYER_CUDA_SCHEDULE_KERNELS,
                                                          KEYER_CUDA_SCHEDULE_PERSISTENT,
                                                          KEYER_CUDA_SCHEDULE_PERSISTENT_GRID};
            static const char *const names[3] = {"kernels", "persistent", "persistent-grid"};
            keyer_cuda_schedule sched = scheds[si];
            const char *sname = names[si];
            outputs f32 = {0}, f16 = {0};
            printf("  schedule %s:\n", sname);
            if (run(model, KEYER_BACKEND_CUDA, KEYER_PRECISION_F32, sched, 1, 0, x, item,
                    in.dims[2], in.dims[3], &f32))
                continue;
            run(model, KEYER_BACKEND_CUDA, KEYER_PRECISION_F16, sched, 1, 0, x, item, in.dims[2],
                in.dims[3], &f16);
            printf("    runs as: %s (f32), %s (f16)\n", f32.schedule, f16.schedule);
            /* KERNELS is per node; PERSISTENT_GRID never has a cluster segment; PERSISTENT has
             * one exactly when the device (or the emulated class) has clusters and the model a
             * run for it (selfie, selfie-landscape) */
            const char *want = si == 0                                ? "per-node"
                               : si == 2 || !segment_expected(mc->model) ? "persistent"
                                                                     : "persistent+cluster";
            assert_string_equal(f32.schedule, want);
            assert_string_equal(f16.schedule, want);
            for (int i = 0; i < ref.n; i++) {
                size_t n = ref.bytes[i] / sizeof(float);
                double a32, r32, a16, r16;
                diff(f32.out[i], ref.out[i], n, &a32, &r32);
                diff(f16.out[i], ref.out[i], n, &a16, &r16);
                keyer_tensor_info info;
                keyer_model_output_info(model, i, &info, &err);
                printf("    output %d %-28s f32 max abs %.3g (rel %.3g)   f16 max abs %.3g (rel "
                       "%.3g)",
                       i, info.name, a32, r32, a16, r16);
                double tol32 = strcmp(info.name, "Identity_2") == 0 ? 5e-3 : 1e-3;
                if (!(r32 <= tol32)) {
                    printf("  FAIL (f32 > %.0e)", tol32);
                    failures++;
                }
                if (i == mc->mask_output) {
                    size_t agree = 0;
                    double sum = 0;
                    for (size_t k = 0; k < n; k++) {
                        agree += (f16.out[i][k] >= 0.5f) == (ref.out[i][k] >= 0.5f);
                        sum += fabs((double)f16.out[i][k] - ref.out[i][k]);
                    }
                    double mean = sum / (double)n;
                    printf("   mask agreement %.4f%%, mean abs %.2e",
                           100.0 * (double)agree / (double)n, mean);
                    if (!(mean <= 5e-3) || (double)agree < 0.995 * (double)n) {
                        printf("  FAIL (f16 mask: mean abs <= 5e-3 and >= 99.5%% agreement "
                               "required)");
                        failures++;
                    }
                }
                const keyer_model_entry *entry = keyer_registry_find(mc->model);
                if (i == mc->unit_output && entry && entry->half_ok && !(a16 <= 2e-2)) {
                    printf("  FAIL (f16 output in [0,1] of a half_ok model: max abs <= 2e-2 "
                           "required)");
                    failures++;
                }
                printf("\n");
            }
            if (mc->face)
                compare_faces(mc->face, &ref, &f16);
            /* batch 4 == 4 single runs of the same schedule, bit for bit, f32 and f16 */
            for (int prec = 0; prec < 2; prec++) {
                outputs batch4 = {0};
                run(model, KEYER_BACKEND_CUDA, (keyer_precision)prec, sched, 4, 0, x, item,
                    in.dims[2], in.dims[3], &batch4);
                for (int bi = 0; bi < 4; bi++) {
                    outputs one = {0};
                    run(model, KEYER_BACKEND_CUDA, (keyer_precision)prec, sched, 1, bi, x, item,
                        in.dims[2], in.dims[3], &one);
                    for (int i = 0; i < one.n; i++)
                        assert_memory_equal((const char *)batch4.out[i] +
                                                one.bytes[i] * (size_t)bi,
                                            one.out[i], one.bytes[i]);
                    outputs_free(&one);
                }
                outputs_free(&batch4);
            }
            printf("    batch 4 == 4 batch-1 runs: identical (f32 and f16)\n");
            outputs_free(&f32);
            outputs_free(&f16);
        }
        outputs_free(&ref);
        free(x);
        keyer_model_destroy(&model);
    }
    assert_int_equal(failures, 0);
    if (!ran) {
        printf("KEYER_TEST_MODELS=%s lists none of this test's models\n",
               getenv("KEYER_TEST_MODELS"));
        skip();
    }
}

/* Repeated graph replays are deterministic; the caller's stream is honoured. */
static void test_replay_and_stream(void **state)
{
    (void)state;
    char path[1024];
    keyer_error err = {0};
    assert_int_equal(keyer_registry_resolve("selfie", path, sizeof(path), &err), KEYER_OK);
    keyer_model *model = NULL;
    assert_int_equal(keyer_model_load_file(path, &model, &err), KEYER_OK);
    cudaStream_t stream = NULL;
    assert_int_equal(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    keyer_runtime_params p = keyer_runtime_params_defaults();
    p.backend = KEYER_BACKEND_CUDA;
    p.stream = stream;
    keyer_runtime *rt = NULL;
    assert_int_equal(keyer_runtime_create(model, &p, &rt, &err), KEYER_OK);
    size_t in_bytes = keyer_runtime_input_bytes(rt, 0), out_bytes = keyer_runtime_output_bytes(rt, 0);
    float *x = load_input("selfie", in_bytes);
    float *a = malloc(out_bytes), *b = malloc(out_bytes);
    assert_non_null(a);
    assert_non_null(b);
    /* device-side input: copy straight into the runtime's device tensor on our stream */
    assert_int_equal(cudaMemcpyAsync(keyer_runtime_input_data(rt, 0), x, in_bytes,
                                     cudaMemcpyHostToDevice, stream),
                     cudaSuccess);
    assert_int_equal(keyer_runtime_run(rt, &err), KEYER_OK);
    assert_int_equal(cudaMemcpyAsync(a, keyer_runtime_output_data(rt, 0), out_bytes,
                                     cudaMemcpyDeviceToHost, stream),
                     cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(stream), cudaSuccess);
    for (int i = 0; i < 20; i++)
        assert_int_equal(keyer_runtime_run(rt, &err), KEYER_OK);
    assert_int_equal(keyer_runtime_get_output(rt, 0, b, out_bytes, &err), KEYER_OK);
    assert_memory_equal(a, b, out_bytes);
    keyer_runtime_destroy(&rt);
    cudaStreamDestroy(stream);
    free(a);
    free(b);
    free(x);
    keyer_model_destroy(&model);
}

/* AUTO above KEYER_CUDA_PERSISTENT_MAX_BATCH: a model with a cluster segment (selfie,
 * selfie-landscape) stays on the persistent kernel up to KEYER_CUDA_SEGMENT_MAX_BATCH, more
 * clusters than fit on the GPU at once; a model without one (face-short) gets the per-node
 * kernels. Each batch item is compared bit for bit with a batch-1 run of the schedule it should
 * have got (f16: the schedules round differently, so this also tells which one ran). */
static void test_auto_batch_limits(void **state)
{
    (void)state;
    static const struct {
        const char *model;
        int batch;
        keyer_cuda_schedule expect;
    } limits[] = {
        {"selfie", KEYER_CUDA_SEGMENT_MAX_BATCH, KEYER_CUDA_SCHEDULE_PERSISTENT},
        {"selfie-landscape", KEYER_CUDA_SEGMENT_MAX_BATCH, KEYER_CUDA_SCHEDULE_PERSISTENT},
        {"selfie", KEYER_CUDA_SEGMENT_MAX_BATCH + 1, KEYER_CUDA_SCHEDULE_KERNELS},
        {"face-short", KEYER_CUDA_PERSISTENT_MAX_BATCH + 1, KEYER_CUDA_SCHEDULE_KERNELS},
    };
    int ran = 0;
    for (size_t ci = 0; ci < sizeof(limits) / sizeof(limits[0]); ci++) {
        if (!kt_test_model(limits[ci].model))
            continue; /* KEYER_TEST_MODELS */
        ran++;
        char path[1024];
        keyer_error err = {0};
        assert_int_equal(keyer_registry_resolve(limits[ci].model, path, sizeof(path), &err),
                         KEYER_OK);
        keyer_model *model = NULL;
        assert_int_equal(keyer_model_load_file(path, &model, &err), KEYER_OK);
        keyer_tensor_info in;
        assert_int_equal(keyer_model_input_info(model, 0, &in, &err), KEYER_OK);
        size_t item = (size_t)in.dims[1] * in.dims[2] * in.dims[3];
        float *x = load_input(limits[ci].model, item * sizeof(float));
        /* without clusters (compute below 9.0, or emulating it) no model has a segment, so
         * AUTO above KEYER_CUDA_PERSISTENT_MAX_BATCH is per node for every model */
        const keyer_cuda_schedule expect =
            limits[ci].batch > KEYER_CUDA_PERSISTENT_MAX_BATCH && !segment_expected(limits[ci].model)
                ? KEYER_CUDA_SCHEDULE_KERNELS
                : limits[ci].expect;
        for (int prec = 0; prec < 2; prec++) {
            outputs all = {0};
            run(model, KEYER_BACKEND_CUDA, (keyer_precision)prec, KEYER_CUDA_SCHEDULE_AUTO,
                limits[ci].batch, 0, x, item, in.dims[2], in.dims[3], &all);
            assert_string_equal(all.schedule, expect == KEYER_CUDA_SCHEDULE_KERNELS
                                                  ? "per-node"
                                                  : "persistent+cluster");
            for (int bi = 0; bi < limits[ci].batch; bi++) {
                outputs one = {0};
                run(model, KEYER_BACKEND_CUDA, (keyer_precision)prec, expect, 1, bi, x, item,
                    in.dims[2], in.dims[3], &one);
                for (int i = 0; i < one.n; i++)
                    assert_memory_equal((const char *)all.out[i] + one.bytes[i] * (size_t)bi,
                                        one.out[i], one.bytes[i]);
                outputs_free(&one);
            }
            outputs_free(&all);
        }
        printf("%s AUTO batch %d == %d batch-1 runs %s: identical (f32 and f16)\n",
               limits[ci].model, limits[ci].batch, limits[ci].batch,
               expect == KEYER_CUDA_SCHEDULE_PERSISTENT ? "persistent" : "per node");
        free(x);
        keyer_model_destroy(&model);
    }
    if (!ran) {
        printf("KEYER_TEST_MODELS=%s lists none of this test's models\n",
               getenv("KEYER_TEST_MODELS"));
        skip();
    }
}

/* Impossible requests fail cleanly at set-up. */
static void test_errors(void **state)
{
    (void)state;
    char path[1024];
    keyer_error err = {0};
    assert_int_equal(keyer_registry_resolve("selfie", path, sizeof(path), &err), KEYER_OK);
    keyer_model *model = NULL;
    assert_int_equal(keyer_model_load_file(path, &model, &err), KEYER_OK);
    keyer_runtime_params p = keyer_runtime_params_defaults();
    p.backend = KEYER_BACKEND_CUDA;
    p.device = 999;
    keyer_runtime *rt = NULL;
    assert_int_equal(keyer_runtime_create(model, &p, &rt, &err), KEYER_STATUS_DEVICE);
    printf("device 999: %s\n", err.message);
    assert_null(rt);
    keyer_model_destroy(&model);
    /* pose-heavy at batch 4096 in f32 needs far more than an 80 GB device: a clean
     * OUT_OF_MEMORY naming the arena, nothing leaked (a device that fits it is also fine) */
    assert_int_equal(keyer_registry_resolve("pose-heavy", path, sizeof(path), &err), KEYER_OK);
    assert_int_equal(keyer_model_load_file(path, &model, &err), KEYER_OK);
    p.device = 0;
    p.batch = 4096;
    keyer_status st = keyer_runtime_create(model, &p, &rt, &err);
    printf("pose-heavy batch 4096: %s\n", st ? err.message : "created");
    assert_true(st == KEYER_OK || st == KEYER_STATUS_OUT_OF_MEMORY);
    if (st)
        assert_non_null(strstr(err.message, "arena"));
    keyer_runtime_destroy(&rt);
    /* and the device still works afterwards */
    p.batch = 2;
    assert_int_equal(keyer_runtime_create(model, &p, &rt, &err), KEYER_OK);
    assert_int_equal(keyer_runtime_run(rt, &err), KEYER_OK);
    assert_int_equal(keyer_runtime_synchronize(rt, &err), KEYER_OK);
    keyer_runtime_destroy(&rt);
    keyer_model_destroy(&model);
}

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        fprintf(stderr, "test_nn_cuda_gpu: no CUDA device, skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models),
        cmocka_unit_test(test_replay_and_stream),
        cmocka_unit_test(test_auto_batch_limits),
        cmocka_unit_test(test_errors),
    };
    kt_gpu_apply_filter(); /* KEYER_TEST_FILTER: one case (scripts/sanitize-gpu-tests.sh) */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
