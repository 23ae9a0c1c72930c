/*
 * The public runtime API (src/nn/runtime.c) on a hand-built graph of eleven nodes (conv,
 * depthwise, hard-swish, mean, logistic, mul, add, reshape view, resize, pool, concat) with two
 * inputs and three outputs, one of which is also read inside the graph.
 *  - Batch: for each backend, a batch-3 run equals three batch-1 runs item by item: bit for bit
 *    on the reference backend, within 1e-6 (|d| / max(1, |y|)) on cpu and cuda.
 *  - Backends agree: cpu (and cuda) within 1e-4 of the reference.
 *  - Errors: batch 0 and too large, a negative device, unknown and unbuilt backends, NULL
 *    arguments, bad input/output indices, wrong byte counts and NULL data in set_input and
 *    get_output; backend names both ways; destroy of NULL and twice.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/nn.h"
#include "kt_graph.h"
#include "nn/graph.h"
#include "nn/model.h"
#include "testutil.h"

/* Builds the test graph into a model wrapper (the struct is internal; no file is involved). */
static keyer_model *make_model(void)
{
    kt_graph b;
    kt_graph_begin(&b, "runtime-test", 32, 16, 1 << 16);
    kt_rng rng = kt_rng_seed(77);
    float w[3 * 3 * 3 * 8], dw[3 * 3 * 8], bias[8];
    kt_rng_fill(&rng, w, sizeof(w) / sizeof(w[0]), -0.5f, 0.5f);
    kt_rng_fill(&rng, dw, sizeof(dw) / sizeof(dw[0]), -0.5f, 0.5f);
    kt_rng_fill(&rng, bias, 8, -0.1f, 0.1f);
    int x = kt_graph_act(&b, 4, (int[]){1, 9, 7, 3});
    int z = kt_graph_act(&b, 4, (int[]){1, 5, 4, 8});
    int wt = kt_graph_const(&b, KR_DTYPE_F32, 4, (int[]){8, 3, 3, 3}, w);
    int dwt = kt_graph_const(&b, KR_DTYPE_F32, 4, (int[]){1, 3, 3, 8}, dw);
    int bt = kt_graph_const(&b, KR_DTYPE_F32, 1, (int[]){8}, bias);
    int axes = kt_graph_const(&b, KR_DTYPE_I32, 1, (int[]){2}, (int32_t[]){1, 2});
    int size = kt_graph_const(&b, KR_DTYPE_I32, 1, (int[]){2}, (int32_t[]){10, 8});
    int a = kt_graph_act(&b, 4, (int[]){1, 5, 4, 8});
    kr_node *n = kt_graph_node(&b, KR_OP_CONV_2D, 3, (int[]){x, wt, bt}, a);
    n->p.window = (kr_window_params){.stride_h = 2, .stride_w = 2, .dilation_h = 1,
                                     .dilation_w = 1, .padding = KR_PADDING_SAME};
    n->activation = KR_ACT_RELU6;
    int bb = kt_graph_act(&b, 4, (int[]){1, 5, 4, 8});
    n = kt_graph_node(&b, KR_OP_DEPTHWISE_CONV_2D, 3, (int[]){a, dwt, bt}, bb);
    n->p.window = (kr_window_params){.stride_h = 1, .stride_w = 1, .dilation_h = 1,
                                     .dilation_w = 1, .padding = KR_PADDING_SAME,
                                     .depth_multiplier = 1};
    int c = kt_graph_act(&b, 4, (int[]){1, 5, 4, 8});
    kt_graph_node(&b, KR_OP_HARD_SWISH, 1, &bb, c);
    int m = kt_graph_act(&b, 4, (int[]){1, 1, 1, 8});
    n = kt_graph_node(&b, KR_OP_MEAN, 2, (int[]){c, axes}, m);
    n->p.mean.keep_dims = 1;
    int s = kt_graph_act(&b, 4, (int[]){1, 1, 1, 8});
    kt_graph_node(&b, KR_OP_LOGISTIC, 1, &m, s);
    int d = kt_graph_act(&b, 4, (int[]){1, 5, 4, 8});
    kt_graph_node(&b, KR_OP_MUL, 2, (int[]){c, s}, d);
    int e = kt_graph_act(&b, 4, (int[]){1, 5, 4, 8});
    n = kt_graph_node(&b, KR_OP_ADD, 2, (int[]){d, z}, e);
    n->activation = KR_ACT_RELU;
    int r = kt_graph_act(&b, 2, (int[]){1, 160});
    kt_graph_node(&b, KR_OP_RESHAPE, 1, &e, r);
    int f = kt_graph_act(&b, 4, (int[]){1, 10, 8, 8});
    n = kt_graph_node(&b, KR_OP_RESIZE_BILINEAR, 2, (int[]){e, size}, f);
    n->p.resize.half_pixel_centers = 1;
    int p = kt_graph_act(&b, 4, (int[]){1, 5, 4, 8});
    n = kt_graph_node(&b, KR_OP_AVERAGE_POOL_2D, 1, &f, p);
    n->p.window = (kr_window_params){.kernel_h = 2, .kernel_w = 2, .stride_h = 2, .stride_w = 2,
                                     .dilation_h = 1, .dilation_w = 1,
                                     .padding = KR_PADDING_VALID};
    int q = kt_graph_act(&b, 4, (int[]){1, 5, 4, 16});
    n = kt_graph_node(&b, KR_OP_CONCATENATION, 2, (int[]){p, e}, q);
    n->p.concat.axis = 3;
    kt_graph_input(&b, x);
    kt_graph_input(&b, z);
    kt_graph_output(&b, q);
    kt_graph_output(&b, r);
    kt_graph_output(&b, s);
    kr_graph *g = kt_graph_build(&b);
    keyer_model *model = calloc(1, sizeof(*model));
    assert_non_null(model);
    model->graph = g;
    model->macs = kr_graph_macs(g);
    model->weight_bytes = g->const_bytes;
    return model;
}

static void free_model(keyer_model **model)
{
    kr_graph_destroy(&(*model)->graph);
    free(*model);
    *model = NULL;
}

static double rel_error(const float *got, const float *want, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / fmax(1.0, fabs((double)want[i]));
        if (isnan(e))
            return INFINITY;
        worst = e > worst ? e : worst;
    }
    return worst;
}

/* Creates a runtime; returns NULL (and prints why) when the backend has no device here. */
static keyer_runtime *create(const keyer_model *model, keyer_backend backend, int batch)
{
    keyer_runtime_params p = keyer_runtime_params_defaults();
    p.backend = backend;
    p.batch = batch;
    p.threads = 2;
    keyer_runtime *rt = NULL;
    keyer_error err = {0};
    keyer_status st = keyer_runtime_create(model, &p, &rt, &err);
    if (st == KEYER_STATUS_DEVICE || (backend == KEYER_BACKEND_CUDA && st != KEYER_OK)) {
        printf("%s: not available here: %s\n", keyer_backend_name(backend), err.message);
        return NULL;
    }
    if (st != KEYER_OK)
        fail_msg("%s: %s", keyer_backend_name(backend), err.message);
    assert_int_equal(keyer_runtime_batch(rt), batch);
    assert_int_equal(keyer_runtime_backend(rt), backend);
    return rt;
}

#define N_IN 2
#define N_OUT 3
#define BATCH 3

/* Runs batch 3 and three batch-1 runs; returns the batch-3 outputs (caller frees) through
 * @p out_batch, or 0 when the backend is not available. */
static int batch_vs_single(const keyer_model *model, keyer_backend backend, float *const *inputs,
                           float **out_batch)
{
    keyer_runtime *rb = create(model, backend, BATCH);
    if (!rb)
        return 0;
    keyer_runtime *r1 = create(model, backend, 1);
    assert_non_null(r1);
    keyer_error err = {0};
    for (int i = 0; i < N_IN; i++) {
        size_t bytes = keyer_runtime_input_bytes(rb, i);
        assert_int_equal(bytes, BATCH * keyer_runtime_input_bytes(r1, i));
        assert_int_equal(keyer_runtime_set_input(rb, i, inputs[i], bytes, &err), KEYER_OK);
    }
    assert_int_equal(keyer_runtime_run(rb, &err), KEYER_OK);
    assert_int_equal(keyer_runtime_synchronize(rb, &err), KEYER_OK);
    for (int o = 0; o < N_OUT; o++) {
        out_batch[o] = malloc(keyer_runtime_output_bytes(rb, o));
        assert_non_null(out_batch[o]);
        assert_int_equal(keyer_runtime_get_output(rb, o, out_batch[o],
                                                  keyer_runtime_output_bytes(rb, o), &err),
                         KEYER_OK);
    }
    double worst = 0;
    for (int item = 0; item < BATCH; item++) {
        for (int i = 0; i < N_IN; i++) {
            size_t bytes = keyer_runtime_input_bytes(r1, i);
            const float *src = inputs[i] + bytes / sizeof(float) * item;
            if (backend == KEYER_BACKEND_CUDA) {
                assert_int_equal(keyer_runtime_set_input(r1, i, src, bytes, &err), KEYER_OK);
            } else { /* host backends: write through the data pointer */
                float *dst = keyer_runtime_input_data(r1, i);
                assert_non_null(dst);
                memcpy(dst, src, bytes);
            }
        }
        assert_int_equal(keyer_runtime_run(r1, &err), KEYER_OK);
        for (int o = 0; o < N_OUT; o++) {
            size_t bytes = keyer_runtime_output_bytes(r1, o), n = bytes / sizeof(float);
            float *one = malloc(bytes);
            assert_non_null(one);
            assert_int_equal(keyer_runtime_get_output(r1, o, one, bytes, &err), KEYER_OK);
            const float *slice = out_batch[o] + n * item;
            if (backend == KEYER_BACKEND_REFERENCE) {
                if (memcmp(one, slice, bytes) != 0)
                    fail_msg("reference: output %d of item %d differs from the batch-1 run", o,
                             item);
            } else {
                double e = rel_error(one, slice, n);
                worst = e > worst ? e : worst;
            }
            if (backend != KEYER_BACKEND_CUDA) /* the host pointer holds the same bytes */
                assert_memory_equal(keyer_runtime_output_data(r1, o), one, bytes);
            free(one);
        }
    }
    printf("%-9s batch %d vs %d single runs: %s (max error %.3g)\n", keyer_backend_name(backend),
           BATCH, BATCH, backend == KEYER_BACKEND_REFERENCE ? "bit-identical" : "within 1e-6",
           worst);
    assert_true(worst <= 1e-6);
    printf("%-9s arena %zu bytes at batch %d, weights %zu bytes\n", keyer_backend_name(backend),
           keyer_runtime_arena_bytes(rb), BATCH, keyer_runtime_weight_bytes(rb));
    assert_true(keyer_runtime_arena_bytes(rb) > 0);
    keyer_runtime_destroy(&rb);
    keyer_runtime_destroy(&r1);
    assert_null(rb);
    return 1;
}

static void test_batch_equals_single(void **state)
{
    (void)state;
    keyer_model *model = make_model();
    assert_int_equal(keyer_model_input_count(model), N_IN);
    assert_int_equal(keyer_model_output_count(model), N_OUT);
    const kr_graph *g = model->graph;
    float *inputs[N_IN];
    kt_rng rng = kt_rng_seed(5);
    for (int i = 0; i < N_IN; i++) {
        size_t n = kr_tensor_elements(&g->tensors[g->inputs[i]]) * BATCH;
        inputs[i] = malloc(n * sizeof(float));
        assert_non_null(inputs[i]);
        kt_rng_fill(&rng, inputs[i], n, -2.0f, 2.0f);
    }
    float *ref[N_OUT];
    assert_true(batch_vs_single(model, KEYER_BACKEND_REFERENCE, inputs, ref));
    static const keyer_backend others[] = {KEYER_BACKEND_CPU, KEYER_BACKEND_CUDA};
    for (size_t k = 0; k < sizeof(others) / sizeof(others[0]); k++) {
#ifndef KEYER_HAVE_CUDA_NN
        if (others[k] == KEYER_BACKEND_CUDA)
            continue;
#endif
        float *got[N_OUT];
        if (!batch_vs_single(model, others[k], inputs, got))
            continue;
        for (int o = 0; o < N_OUT; o++) {
            size_t n = kr_tensor_elements(&g->tensors[g->outputs[o]]) * BATCH;
            double e = rel_error(got[o], ref[o], n);
            printf("%-9s output %d vs reference: error %.3g\n", keyer_backend_name(others[k]), o,
                   e);
            assert_true(e <= 1e-4);
            free(got[o]);
        }
    }
    for (int o = 0; o < N_OUT; o++)
        free(ref[o]);
    for (int i = 0; i < N_IN; i++)
        free(inputs[i]);
    free_model(&model);
}

static void test_errors(void **state)
{
    (void)state;
    keyer_model *model = make_model();
    keyer_error err = {0};
    keyer_runtime *rt = NULL;
    keyer_runtime_params p = keyer_runtime_params_defaults();
    assert_int_equal(p.backend, KEYER_BACKEND_CPU);
    assert_int_equal(p.batch, 1);
    p.backend = KEYER_BACKEND_REFERENCE;

    p.batch = 0;
    assert_int_equal(keyer_runtime_create(model, &p, &rt, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "batch 0"));
    assert_non_null(strstr(err.message, "runtime-test"));
    assert_null(rt);
    p.batch = 1 << 20;
    assert_int_equal(keyer_runtime_create(model, &p, &rt, &err), KEYER_STATUS_INVALID_ARGUMENT);
    p.batch = 1;
    p.device = -1;
    assert_int_equal(keyer_runtime_create(model, &p, &rt, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "device"));
    p.device = 0;
    p.backend = (keyer_backend)7;
    assert_int_equal(keyer_runtime_create(model, &p, &rt, &err), KEYER_STATUS_INVALID_ARGUMENT);
#ifndef KEYER_HAVE_CUDA_NN
    p.backend = KEYER_BACKEND_CUDA;
    assert_int_equal(keyer_runtime_create(model, &p, &rt, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "keyer was built without CUDA"));
#endif
    p.backend = KEYER_BACKEND_REFERENCE;
    /* the cuda schedule: validated whatever the backend, ignored by the others */
    p.cuda_schedule = (keyer_cuda_schedule)(KEYER_CUDA_SCHEDULE_PERSISTENT_GRID + 1);
    assert_int_equal(keyer_runtime_create(model, &p, &rt, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "unknown cuda schedule"));
    p.cuda_schedule = KEYER_CUDA_SCHEDULE_PERSISTENT_GRID;
    assert_int_equal(keyer_runtime_create(model, &p, &rt, &err), KEYER_OK);
    keyer_runtime_destroy(&rt);
    p.cuda_schedule = KEYER_CUDA_SCHEDULE_AUTO;
    assert_int_equal(keyer_runtime_create(NULL, &p, &rt, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_runtime_create(model, &p, NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);

    p.batch = 2;
    assert_int_equal(keyer_runtime_create(model, &p, &rt, &err), KEYER_OK);
    size_t in0 = keyer_runtime_input_bytes(rt, 0);
    assert_int_equal(in0, 2 * 9 * 7 * 3 * sizeof(float));
    assert_int_equal(keyer_runtime_output_bytes(rt, 1), 2 * 160 * sizeof(float));
    assert_int_equal(keyer_runtime_input_bytes(rt, 2), 0);
    assert_int_equal(keyer_runtime_input_bytes(rt, -1), 0);
    assert_int_equal(keyer_runtime_output_bytes(rt, 3), 0);
    assert_null(keyer_runtime_input_data(rt, 2));
    assert_null(keyer_runtime_input_data(rt, -1));
    assert_null(keyer_runtime_output_data(rt, 3));
    assert_non_null(keyer_runtime_input_data(rt, 1));
    assert_int_equal(keyer_runtime_weight_bytes(rt), model->graph->const_bytes);

    float *buf = calloc(1, in0 + sizeof(float));
    assert_non_null(buf);
    assert_int_equal(keyer_runtime_set_input(rt, 0, buf, in0, &err), KEYER_OK);
    /* Wrong byte counts: a batch-1 amount, one float too many, zero. */
    assert_int_equal(keyer_runtime_set_input(rt, 0, buf, in0 / 2, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "bytes"));
    assert_non_null(strstr(err.message, "t0")); /* names the tensor */
    assert_int_equal(keyer_runtime_set_input(rt, 0, buf, in0 + sizeof(float), &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_runtime_set_input(rt, 0, buf, 0, &err), KEYER_STATUS_INVALID_ARGUMENT);
    /* Bad indices and NULL data. */
    assert_int_equal(keyer_runtime_set_input(rt, 2, buf, in0, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "input 2"));
    assert_int_equal(keyer_runtime_set_input(rt, -1, buf, in0, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_runtime_set_input(rt, 0, NULL, in0, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_runtime_set_input(NULL, 0, buf, in0, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    size_t out1 = keyer_runtime_output_bytes(rt, 1);
    assert_int_equal(keyer_runtime_get_output(rt, 1, buf, out1 - 4, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_runtime_get_output(rt, 3, buf, out1, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "output 3"));
    assert_int_equal(keyer_runtime_get_output(rt, 1, buf, out1, &err), KEYER_OK);
    assert_int_equal(keyer_runtime_run(NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_runtime_synchronize(NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_runtime_synchronize(rt, &err), KEYER_OK);
    free(buf);
    keyer_runtime_destroy(&rt);
    assert_null(rt);
    keyer_runtime_destroy(&rt);
    keyer_runtime_destroy(NULL);
    assert_int_equal(keyer_runtime_batch(NULL), 0);
    assert_int_equal(keyer_runtime_arena_bytes(NULL), 0);
    assert_null(keyer_runtime_input_data(NULL, 0));

    /* Backend names, both ways. */
    static const keyer_backend all[] = {KEYER_BACKEND_REFERENCE, KEYER_BACKEND_CPU,
                                        KEYER_BACKEND_CUDA};
    static const char *const names[] = {"reference", "cpu", "cuda"};
    for (int i = 0; i < 3; i++) {
        keyer_backend back = KEYER_BACKEND_CUDA;
        assert_string_equal(keyer_backend_name(all[i]), names[i]);
        assert_int_equal(keyer_backend_from_name(names[i], &back, &err), KEYER_OK);
        assert_int_equal(back, all[i]);
    }
    keyer_backend back;
    assert_int_equal(keyer_backend_from_name("tpu", &back, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "tpu"));
    assert_int_equal(keyer_backend_from_name(NULL, &back, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_backend_from_name("cpu", NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_string_equal(keyer_backend_name((keyer_backend)42), "unknown");
    free_model(&model);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_equals_single),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
