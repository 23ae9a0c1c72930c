/*
 * bench_nn_vendor: cuDNN and cuBLAS against the cuda backend's own kernels, layer by layer.
 *
 *   bench_nn_vendor [--models selfie,face-short] [--batches 1,256] [--runs N] [--device N]
 *                   [--keyer-only]
 *
 * For every model, precision (f32, f16) and batch size: the per-node kernels' profile
 * (keyer_runtime_profile with KEYER_CUDA_SCHEDULE_KERNELS: each node's kernels timed on their
 * own with events, bias, activation and any folded residual ADD included) and, for every
 * CONV_2D and DEPTHWISE_CONV_2D node of the graph:
 *  - cuDNN: the fastest forward algorithm for that convolution (cudnnFindConvolutionForward-
 *    AlgorithmEx, which runs and times every algorithm; workspace up to 256 MB). NHWC tensors
 *    and filters; f16 data with float accumulation and tensor-core math allowed; f32 with FMA
 *    math only (keyer's f32 is IEEE float, not TF32). Depthwise layers as grouped convolutions.
 *    TF "SAME" paddings that put the extra row after are given symmetrically (the larger side):
 *    the same output size and the same work.
 *  - cuBLAS, for 1x1 stride-1 unpadded convolutions (a GEMM in NHWC: Y[M, N] = X[M, K] W[N, K]^T
 *    with M = batch * pixels): cublasGemmEx with float compute, default algorithm (tensor cores
 *    for f16 inputs); median of --runs launches (default 20) timed with events.
 * The vendor figures are for the convolution alone: the bias, activation and residual that
 * keyer's kernel does in the same pass would cost them an extra pass (or a fused variant that
 * covers fewer activations). Inputs are zeros (timing does not depend on values). --keyer-only
 * prints keyer's times alone (-1 in the vendor columns).
 * Prints one line per node and a summary per (model, precision, batch).
 */
#define _POSIX_C_SOURCE 200809L
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "keyer/nn.h"
#include "keyer/registry.h"
#include "nn/graph.h"
#include "nn/model.h"

#define WORKSPACE_BYTES ((size_t)256 << 20)
#define MAX_NODES 1024

/* Each returns 0 on success, else prints what failed and returns -1. */
static int cuda_ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    fprintf(stderr, "bench_nn_vendor: %s: %s\n", what, cudaGetErrorString(e));
    return -1;
}

static int cudnn_ok(cudnnStatus_t s, const char *what)
{
    if (s == CUDNN_STATUS_SUCCESS)
        return 0;
    fprintf(stderr, "bench_nn_vendor: %s: %s\n", what, cudnnGetErrorString(s));
    return -1;
}

static int cublas_ok(cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return 0;
    fprintf(stderr, "bench_nn_vendor: %s: cuBLAS status %d\n", what, (int)s);
    return -1;
}

typedef struct {
    cudnnHandle_t dnn;
    cublasHandle_t blas;
    void *ws;
    cudaEvent_t ev[2];
    int runs;
    int keyer_only;
} vendor;

/* The fastest cuDNN algorithm's time (ms) for @p node at @p batch, or -1 (printed) when none
 * runs. *algo gets its number. */
static double time_cudnn(vendor *v, const kr_graph *g, const kr_node *node, int batch, int f16,
                         int *algo)
{
    const kr_tensor *x = &g->tensors[node->inputs[0]], *y = &g->tensors[node->outputs[0]];
    const kr_window_params *w = &node->p.window;
    const int depthwise = node->op == KR_OP_DEPTHWISE_CONV_2D;
    const int ic = x->dims[3], oc = y->dims[3], groups = depthwise ? ic : 1;
    const cudnnDataType_t dt = f16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    const size_t es = f16 ? 2 : 4;
    cudnnTensorDescriptor_t xd = NULL, yd = NULL;
    cudnnFilterDescriptor_t wd = NULL;
    cudnnConvolutionDescriptor_t cd = NULL;
    void *xb = NULL, *wb = NULL, *yb = NULL;
    double ms = -1;
    int n = 0, oh = 0, ow = 0, on = 0, ocd = 0;
    const int ph = w->pad_top > w->pad_bottom ? w->pad_top : w->pad_bottom;
    const int pw = w->pad_left > w->pad_right ? w->pad_left : w->pad_right;
    if (cudnn_ok(cudnnCreateTensorDescriptor(&xd), "tensor descriptor") ||
        cudnn_ok(cudnnCreateTensorDescriptor(&yd), "tensor descriptor") ||
        cudnn_ok(cudnnCreateFilterDescriptor(&wd), "filter descriptor") ||
        cudnn_ok(cudnnCreateConvolutionDescriptor(&cd), "convolution descriptor") ||
        cudnn_ok(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NHWC, dt, batch, ic, x->dims[1],
                                            x->dims[2]),
                 "input descriptor") ||
        cudnn_ok(cudnnSetFilter4dDescriptor(wd, dt, CUDNN_TENSOR_NHWC, oc, ic / groups,
                                            w->kernel_h, w->kernel_w),
                 "filter descriptor") ||
        cudnn_ok(cudnnSetConvolution2dDescriptor(cd, ph, pw, w->stride_h, w->stride_w,
                                                 w->dilation_h, w->dilation_w,
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                 "convolution descriptor") ||
        cudnn_ok(cudnnSetConvolutionGroupCount(cd, groups), "group count") ||
        cudnn_ok(cudnnSetConvolutionMathType(cd, f16 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH),
                 "math type") ||
        cudnn_ok(cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &on, &ocd, &oh, &ow),
                 "output size"))
        goto done;
    if (oh != y->dims[1] || ow != y->dims[2] || ocd != oc) {
        fprintf(stderr, "bench_nn_vendor: node %d: cuDNN's output %dx%dx%d, the graph's %dx%dx%d\n",
                (int)(node - g->nodes), oh, ow, ocd, y->dims[1], y->dims[2], oc);
        goto done;
    }
    if (cudnn_ok(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NHWC, dt, batch, oc, oh, ow),
                 "output descriptor") ||
        cuda_ok(cudaMalloc(&xb, kr_tensor_elements(x) * (size_t)batch * es), "input buffer") ||
        cuda_ok(cudaMalloc(&wb, (size_t)oc * (size_t)(ic / groups) * (size_t)w->kernel_h *
                                    (size_t)w->kernel_w * es),
                "filter buffer") ||
        cuda_ok(cudaMalloc(&yb, kr_tensor_elements(y) * (size_t)batch * es), "output buffer") ||
        cuda_ok(cudaMemset(xb, 0, kr_tensor_elements(x) * (size_t)batch * es), "memset"))
        goto done;
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    for (int pass = 0; pass < 2; pass++) { /* the first pass warms up; the second is kept */
        if (cudnn_ok(cudnnFindConvolutionForwardAlgorithmEx(
                         v->dnn, xd, xb, wd, wb, cd, yd, yb, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n,
                         perf, v->ws, WORKSPACE_BYTES),
                     "finding the forward algorithm"))
            goto done;
    }
    for (int i = 0; i < n; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= WORKSPACE_BYTES) {
            ms = perf[i].time;
            *algo = (int)perf[i].algo;
            break;
        }
done:
    cudaFree(xb);
    cudaFree(wb);
    cudaFree(yb);
    cudnnDestroyTensorDescriptor(xd);
    cudnnDestroyTensorDescriptor(yd);
    cudnnDestroyFilterDescriptor(wd);
    cudnnDestroyConvolutionDescriptor(cd);
    return ms;
}

/* cuBLAS's median time (ms) for a 1x1 stride-1 unpadded convolution as a GEMM, or -1. */
static double time_cublas(vendor *v, const kr_graph *g, const kr_node *node, int batch, int f16)
{
    const kr_tensor *x = &g->tensors[node->inputs[0]], *y = &g->tensors[node->outputs[0]];
    const int m = batch * x->dims[1] * x->dims[2], k = x->dims[3], n = y->dims[3];
    const cudaDataType_t dt = f16 ? CUDA_R_16F : CUDA_R_32F;
    const size_t es = f16 ? 2 : 4;
    void *xb = NULL, *wb = NULL, *yb = NULL;
    double ms = -1, t[256];
    const float one = 1.0f, zero = 0.0f;
    int runs = v->runs;
    if (cuda_ok(cudaMalloc(&xb, (size_t)m * (size_t)k * es), "input buffer") ||
        cuda_ok(cudaMalloc(&wb, (size_t)n * (size_t)k * es), "weight buffer") ||
        cuda_ok(cudaMalloc(&yb, (size_t)m * (size_t)n * es), "output buffer") ||
        cuda_ok(cudaMemset(xb, 0, (size_t)m * (size_t)k * es), "memset") ||
        cuda_ok(cudaMemset(wb, 0, (size_t)n * (size_t)k * es), "memset"))
        goto done;
    for (int i = -3; i < runs; i++) { /* 3 warm-up launches */
        /* column-major: Y^T (n x m) = W (k x n)^T * X^T (k x m) */
        if (cuda_ok(cudaEventRecord(v->ev[0], NULL), "event") ||
            cublas_ok(cublasGemmEx(v->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, wb, dt, k,
                                   xb, dt, k, &zero, yb, dt, n, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT),
                      "cublasGemmEx") ||
            cuda_ok(cudaEventRecord(v->ev[1], NULL), "event") ||
            cuda_ok(cudaEventSynchronize(v->ev[1]), "event"))
            goto done;
        float e = 0;
        if (cuda_ok(cudaEventElapsedTime(&e, v->ev[0], v->ev[1]), "event time"))
            goto done;
        if (i >= 0)
            t[i] = e;
    }
    qsort(t, (size_t)runs, sizeof(double), kb_cmp_double);
    ms = t[runs / 2];
done:
    cudaFree(xb);
    cudaFree(wb);
    cudaFree(yb);
    return ms;
}

static int is_pointwise(const kr_node *node)
{
    const kr_window_params *w = &node->p.window;
    return node->op == KR_OP_CONV_2D && w->kernel_h == 1 && w->kernel_w == 1 &&
           w->stride_h == 1 && w->stride_w == 1 && w->pad_top == 0 && w->pad_bottom == 0 &&
           w->pad_left == 0 && w->pad_right == 0;
}

static int run_case(vendor *v, const char *name, const keyer_model *model, int f16, int batch,
                    int device)
{
    const kr_graph *g = kr_model_graph(model);
    keyer_runtime_params p = keyer_runtime_params_defaults();
    p.backend = KEYER_BACKEND_CUDA;
    p.precision = f16 ? KEYER_PRECISION_F16 : KEYER_PRECISION_F32;
    p.batch = batch;
    p.device = device;
    p.cuda_schedule = KEYER_CUDA_SCHEDULE_KERNELS;
    keyer_runtime *rt = NULL;
    keyer_error err = {0};
    static keyer_node_timing t[MAX_NODES];
    int count = 0;
    if (keyer_runtime_create(model, &p, &rt, &err) ||
        keyer_runtime_profile(rt, t, MAX_NODES, &count, &err)) {
        printf("%s %s batch %d: %s\n", name, f16 ? "f16" : "f32", batch, err.message);
        keyer_runtime_destroy(&rt);
        return 1;
    }
    keyer_runtime_destroy(&rt);
    if (count > g->n_nodes || count > MAX_NODES) {
        printf("%s: the profile does not match the graph\n", name);
        return 1;
    }
    double sum[3] = {0, 0, 0}, pw_sum[2] = {0, 0};
    int convs = 0, dnn_wins = 0, blas_wins = 0, pw = 0;
    for (int i = 0; i < count; i++) {
        const kr_node *node = &g->nodes[t[i].node];
        if (node->op != KR_OP_CONV_2D && node->op != KR_OP_DEPTHWISE_CONV_2D)
            continue;
        if (t[i].ms < 0)
            continue;
        int algo = -1;
        double dnn = v->keyer_only ? -1 : time_cudnn(v, g, node, batch, f16, &algo);
        double blas = !v->keyer_only && is_pointwise(node) ? time_cublas(v, g, node, batch, f16)
                                                            : -1;
        const kr_tensor *x = &g->tensors[node->inputs[0]], *y = &g->tensors[node->outputs[0]];
        printf("  node %3d %-17s %3dx%3dx%3d -> %3dx%3dx%3d k%dx%d s%d  keyer %.4f ms  cudnn "
               "%.4f ms (algo %d)",
               t[i].node, kr_op_name(node->op), x->dims[1], x->dims[2], x->dims[3], y->dims[1],
               y->dims[2], y->dims[3], node->p.window.kernel_h, node->p.window.kernel_w,
               node->p.window.stride_h, t[i].ms, dnn, algo);
        if (blas >= 0)
            printf("  cublas %.4f ms", blas);
        printf("\n");
        convs++;
        sum[0] += t[i].ms;
        sum[1] += dnn >= 0 ? dnn : t[i].ms;
        dnn_wins += dnn >= 0 && dnn < t[i].ms;
        if (blas >= 0) {
            pw++;
            pw_sum[0] += t[i].ms;
            pw_sum[1] += blas;
            blas_wins += blas < t[i].ms;
        }
        double best = t[i].ms;
        if (dnn >= 0 && dnn < best)
            best = dnn;
        if (blas >= 0 && blas < best)
            best = blas;
        sum[2] += best;
    }
    printf("%-16s %s batch %4d: %d convolutions: keyer %.4f ms, cuDNN %.4f ms (faster on %d); "
           "1x1: %d, keyer %.4f ms, cuBLAS %.4f ms (faster on %d); the faster of each: %.4f ms\n",
           name, f16 ? "f16" : "f32", batch, convs, sum[0], sum[1], dnn_wins, pw, pw_sum[0],
           pw_sum[1], blas_wins, sum[2]);
    fflush(stdout);
    return 0;
}

#define PROG "bench_nn_vendor"

int main(int argc, char **argv)
{
    const char *models = "selfie,face-short";
    int batches[16] = {1, 256}, n_batches = 2, device = 0;
    vendor v;
    memset(&v, 0, sizeof(v));
    v.runs = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--models") && i + 1 < argc)
            models = argv[++i];
        else if (!strcmp(argv[i], "--batches") && i + 1 < argc)
            n_batches = kb_int_list_arg(PROG, "--batches", argv[++i], batches, 16);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            v.runs = kb_int_arg(PROG, "--runs", argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = kb_int_arg(PROG, "--device", argv[++i]);
        else if (!strcmp(argv[i], "--keyer-only"))
            v.keyer_only = 1;
        else {
            fprintf(stderr, "usage: %s [--models a,b] [--batches 1,256] [--runs N] [--device N] "
                            "[--keyer-only]\n",
                    argv[0]);
            return 2;
        }
    }
    if (v.runs < 1 || v.runs > 256) {
        fprintf(stderr, "bench_nn_vendor: --runs must be 1..256\n");
        return 2;
    }
    for (int b = 0; b < n_batches; b++)
        if (batches[b] < 1) {
            fprintf(stderr, "bench_nn_vendor: batch sizes must be >= 1\n");
            return 2;
        }
    if (cuda_ok(cudaSetDevice(device), "selecting the device") ||
        cudnn_ok(cudnnCreate(&v.dnn), "cudnnCreate") ||
        cublas_ok(cublasCreate(&v.blas), "cublasCreate") ||
        cuda_ok(cudaMalloc(&v.ws, WORKSPACE_BYTES), "workspace") ||
        cuda_ok(cudaEventCreate(&v.ev[0]), "event") || cuda_ok(cudaEventCreate(&v.ev[1]), "event"))
        return 1;
    printf("bench_nn_vendor: cuDNN %zu, cuBLAS linked; times per convolution node in ms\n",
           cudnnGetVersion());
    int rc = 0;
    char *list = strdup(models);
    if (!list)
        return 1;
    for (char *save = NULL, *m = strtok_r(list, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
        char path[1024];
        keyer_error err = {0};
        keyer_model *model = NULL;
        if (keyer_registry_resolve(m, path, sizeof(path), &err) ||
            keyer_model_load_file(path, &model, &err)) {
            fprintf(stderr, "bench_nn_vendor: %s\n", err.message);
            rc = 1;
            continue;
        }
        for (int f16 = 0; f16 < 2; f16++)
            for (int b = 0; b < n_batches; b++)
                rc |= run_case(&v, m, model, f16, batches[b], device);
        keyer_model_destroy(&model);
    }
    free(list);
    cudaFree(v.ws);
    cudaEventDestroy(v.ev[0]);
    cudaEventDestroy(v.ev[1]);
    cublasDestroy(v.blas);
    cudnnDestroy(v.dnn);
    return rc;
}
