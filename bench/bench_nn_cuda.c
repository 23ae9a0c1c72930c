/*
 * bench_nn_cuda: the runtime's cuda backend per model, precision and batch size.
 *
 *   bench_nn_cuda [--models selfie,face-short,...] [--batches 1,8,64,256] [--seconds S]
 *                 [--best] [--device N] [--schedule auto|kernels|persistent|persistent-grid]
 *
 * For every model and precision (f32, f16):
 *  - batch 1 latency: run + synchronize, timed one by one (wall clock, so launch overhead is
 *    included); median and p99 over ~S seconds;
 *  - throughput at each batch size: runs queued back to back on the stream, synchronised at the
 *    end; frames/s = batch * runs / time;
 *  - against the ceilings: achieved multiply-add rate (the kernels run on CUDA cores, so the
 *    FP32 FMA peak applies to both precisions) and achieved activation traffic (each node reads
 *    its activation inputs and writes its output once: the floor for a node-by-node schedule)
 *    against the measured device copy bandwidth (cudaMemcpy device to device, 1 GB).
 *  - --best: keyer_runtime_best_batch() up to the largest batch given.
 *  - --profile: after each throughput line, one profiled run: the timed nodes (launches) and
 *    the summed device time, per operator type, and the --profile-top N slowest nodes
 *    (default 10) with their output shapes;
 *  - --precision f32|f16: only that precision (default both).
 *  - --verbose: the runtime's debug messages (with --profile and the persistent schedule, the
 *    time of every step and its parts);
 *  - --schedule: the cuda schedule (keyer_cuda_schedule; default auto: the persistent kernel up
 *    to batch KEYER_CUDA_PERSISTENT_MAX_BATCH, KEYER_CUDA_SEGMENT_MAX_BATCH with a cluster
 *    segment, and KEYER_CUDA_PERSISTENT_MAX_MACS per batch),
 *    printed in the first line.
 * Inputs are zeros (timing does not depend on values). Prints one line per measurement.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "keyer/nn.h"
#include "keyer/registry.h"
#include "nn/graph.h"
#include "nn/model.h"
#include "nn/schedule_choice.h"

#ifdef KEYER_HAVE_CUDA_NN
#include <cuda_runtime_api.h>

/* Activation bytes read and written per frame, node by node (RESHAPE views move nothing). */
static double traffic_per_frame(const kr_graph *g, int esize)
{
    double bytes = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        const kr_node *node = &g->nodes[n];
        if (node->op == KR_OP_RESHAPE)
            continue;
        for (int i = 0; i < node->n_inputs; i++) {
            int t = node->inputs[i];
            if (t >= 0 && !kr_tensor_is_const(&g->tensors[t]))
                bytes += (double)kr_tensor_elements(&g->tensors[t]) * esize;
        }
        bytes += (double)kr_tensor_elements(&g->tensors[node->outputs[0]]) * esize;
    }
    return bytes;
}

/* Device-to-device copy bandwidth (read + write bytes per second). */
static double copy_bandwidth(void)
{
    size_t bytes = (size_t)1 << 30;
    void *a = NULL, *b = NULL;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess)
        return 0;
    cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaDeviceSynchronize();
    double t0 = kb_now_s();
    for (int i = 0; i < 10; i++)
        cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaDeviceSynchronize();
    double bw = 2.0 * bytes * 10 / (kb_now_s() - t0);
    cudaFree(a);
    cudaFree(b);
    return bw;
}

/* Per-operator device times of one run: totals per operator type and the ten slowest nodes. */
static void print_profile(keyer_runtime *rt, const char *name, const char *prec, int batch,
                          int top)
{
    keyer_node_timing t[1024];
    int n = 0;
    keyer_error err = {0};
    if (keyer_runtime_profile(rt, t, 1024, &n, &err)) {
        printf("  profile: %s\n", err.message);
        return;
    }
    n = n < 1024 ? n : 1024;
    const char *ops[32];
    double tot[32] = {0}, all = 0;
    int cnt[32] = {0}, n_ops = 0, launched = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].ms < 0)
            continue;
        launched++;
        all += t[i].ms;
        int k = 0;
        while (k < n_ops && strcmp(ops[k], t[i].op))
            k++;
        if (k == n_ops && n_ops < 32)
            ops[n_ops++] = t[i].op;
        if (k < 32) {
            tot[k] += t[i].ms;
            cnt[k]++;
        }
    }
    printf("  profile %s %s batch %d: %d timed nodes, %.4f ms summed device time\n", name, prec, batch,
           launched, all);
    for (int k = 0; k < n_ops; k++)
        printf("    %-28s %3d nodes %.4f ms (%.1f%%)\n", ops[k], cnt[k], tot[k],
               100.0 * tot[k] / (all > 0 ? all : 1));
    for (int r = 0; r < top; r++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (t[i].ms >= 0 && (best < 0 || t[i].ms > t[best].ms))
                best = i;
        if (best < 0)
            break;
        printf("    #%d node %3d %-24s out [%d,%d,%d,%d] %.4f ms\n", r + 1, t[best].node,
               t[best].op, t[best].output_dims[0], t[best].output_dims[1], t[best].output_dims[2],
               t[best].output_dims[3], t[best].ms);
        t[best].ms = -2;
    }
}

#define PROG "bench_nn_cuda"

int main(int argc, char **argv)
{
    const char *models = "selfie,selfie-landscape,face-short,face-full,face-mesh,pose-lite,pose-full,"
                         "pose-heavy";
    int batches[16] = {1, 8, 64, 256}, n_batches = 4, best = 0, device = 0, profile = 0;
    int top = 10, only_prec = -1;
    keyer_cuda_schedule schedule = KEYER_CUDA_SCHEDULE_AUTO;
    keyer_logger logger = keyer_logger_default();
    double seconds = 1.0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--models") && i + 1 < argc)
            models = argv[++i];
        else if (!strcmp(argv[i], "--batches") && i + 1 < argc)
            n_batches = kb_int_list_arg(PROG, "--batches", argv[++i], batches, 16);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = kb_number_arg(PROG, "--seconds", argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = kb_int_arg(PROG, "--device", argv[++i]);
        else if (!strcmp(argv[i], "--best"))
            best = 1;
        else if (!strcmp(argv[i], "--profile"))
            profile = 1;
        else if (!strcmp(argv[i], "--profile-top") && i + 1 < argc)
            top = kb_int_arg(PROG, "--profile-top", argv[++i]);
        else if (!strcmp(argv[i], "--precision") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "f32") || !strcmp(argv[i + 1], "f16")))
            only_prec = !strcmp(argv[++i], "f16");
        else if (!strcmp(argv[i], "--verbose"))
            logger.level = KEYER_LOG_DEBUG;
        else if (!strcmp(argv[i], "--schedule") && i + 1 < argc) {
            /* the runtime's own parser (KEYER_CUDA_SCHEDULE's): an unknown name is refused */
            int v;
            keyer_error perr = {0};
            if (kr_schedule_parse(argv[++i], "--schedule", &v, &perr)) {
                fprintf(stderr, "%s: %s\n", PROG, perr.message);
                return 2;
            }
            schedule = (keyer_cuda_schedule)v;
        }
        else {
            fprintf(stderr, "usage: %s [--models a,b] [--batches 1,8,64,256] [--seconds S] [--best] "
                            "[--profile] [--profile-top N] [--precision f32|f16] [--verbose] [--device N] [--schedule auto|kernels|persistent|persistent-grid]\n", argv[0]);
            return 2;
        }
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        fprintf(stderr, "bench_nn_cuda: no CUDA device %d\n", device);
        return 1;
    }
    cudaSetDevice(device);
    double bw = copy_bandwidth();
    /* FP32 FMA peak: 128 FP32 lanes per SM on sm_80+/sm_90 (2 flops each per cycle) */
    int clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device);
    double fma_peak = (double)prop.multiProcessorCount * 128.0 * clock_khz * 1e3; /* MAC/s */
    printf("device %s, %d SMs, %.0f MHz; measured copy bandwidth %.2f TB/s; FP32 FMA peak %.1f "
           "TMAC/s; cuda schedule %s\n",
           prop.name, prop.multiProcessorCount, clock_khz / 1e3, bw / 1e12, fma_peak / 1e12,
           schedule == KEYER_CUDA_SCHEDULE_KERNELS           ? "kernels"
           : schedule == KEYER_CUDA_SCHEDULE_PERSISTENT      ? "persistent"
           : schedule == KEYER_CUDA_SCHEDULE_PERSISTENT_GRID ? "persistent-grid"
                                                             : "auto");

    char list[512];
    snprintf(list, sizeof(list), "%s", models);
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name;
         name = strtok_r(NULL, ",", &save)) {
        char path[1024];
        keyer_error err = {0};
        keyer_model *model = NULL;
        if (keyer_registry_resolve(name, path, sizeof(path), &err) ||
            keyer_model_load_file(path, &model, &err)) {
            fprintf(stderr, "%s\n", err.message);
            return 1;
        }
        const kr_graph *g = kr_model_graph(model);
        double macs = (double)keyer_model_macs(model);
        for (int prec = 0; prec < 2; prec++) {
            if (only_prec >= 0 && prec != only_prec)
                continue;
            keyer_runtime_params p = keyer_runtime_params_defaults();
            p.backend = KEYER_BACKEND_CUDA;
            p.precision = (keyer_precision)prec;
            p.device = device;
            p.cuda_schedule = schedule;
            p.logger = &logger;
            double traffic = traffic_per_frame(g, prec ? 2 : 4);
            for (int bi = 0; bi < n_batches; bi++) {
                p.batch = batches[bi];
                keyer_runtime *rt = NULL;
                if (keyer_runtime_create(model, &p, &rt, &err)) {
                    printf("%-16s %s batch %4d: %s\n", name, keyer_precision_name(p.precision),
                           p.batch, err.message);
                    continue;
                }
                for (int w = 0; w < 3; w++)
                    keyer_runtime_run(rt, &err);
                keyer_runtime_synchronize(rt, &err);
                if (p.batch == 1) { /* latency */
                    int cap = 100000, n = 0;
                    double *lat = malloc(sizeof(double) * (size_t)cap), t_end = kb_now_s() + seconds;
                    while (n < cap && (n < 3 || kb_now_s() < t_end)) {
                        double t0 = kb_now_s();
                        keyer_runtime_run(rt, &err);
                        keyer_runtime_synchronize(rt, &err);
                        lat[n++] = (kb_now_s() - t0) * 1e3;
                    }
                    qsort(lat, (size_t)n, sizeof(double), kb_cmp_double);
                    printf("%-16s %s batch    1 latency: median %.4f ms, p99 %.4f ms (%d runs)\n",
                           name, keyer_precision_name(p.precision), lat[n / 2],
                           lat[(size_t)(n * 0.99)], n);
                    free(lat);
                }
                /* throughput: back-to-back runs */
                int runs = 0;
                double t0 = kb_now_s(), t = t0;
                while (t - t0 < seconds) {
                    for (int k = 0; k < 10; k++)
                        keyer_runtime_run(rt, &err);
                    keyer_runtime_synchronize(rt, &err);
                    runs += 10;
                    t = kb_now_s();
                }
                double fps = (double)p.batch * runs / (t - t0);
                printf("%-16s %s batch %4d: %10.0f frames/s  %.4f ms/run  %.2f TMAC/s (%.1f%% of "
                       "FP32 FMA peak)  activation traffic %.2f TB/s (%.1f%% of copy bandwidth)  "
                       "arena %.1f MB\n",
                       name, keyer_precision_name(p.precision), p.batch, fps, (t - t0) / runs * 1e3,
                       macs * fps / 1e12, 100.0 * macs * fps / fma_peak, traffic * fps / 1e12,
                       bw > 0 ? 100.0 * traffic * fps / bw : 0.0,
                       keyer_runtime_arena_bytes(rt) / 1e6);
                fflush(stdout);
                if (profile)
                    print_profile(rt, name, keyer_precision_name(p.precision), p.batch, top);
                keyer_runtime_destroy(&rt);
            }
            if (best) {
                int b = 1, count = 0;
                keyer_batch_timing tm[16];
                if (keyer_runtime_best_batch(model, &p, batches[n_batches - 1], 20, &b, tm, 16,
                                             &count, &err))
                    printf("%-16s %s best batch: %s\n", name, keyer_precision_name(p.precision),
                           err.message);
                else {
                    printf("%-16s %s best batch %d:", name, keyer_precision_name(p.precision), b);
                    for (int i = 0; i < count && i < 16; i++)
                        printf(" [%d: %.0f fps]", tm[i].batch, tm[i].frames_per_s);
                    printf("\n");
                }
            }
        }
        keyer_model_destroy(&model);
    }
    return 0;
}
#else
int main(void)
{
    printf("bench_nn_cuda: keyer was built without the CUDA backend; nothing to measure\n");
    return 0;
}
#endif
