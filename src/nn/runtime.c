/*
 * The public runtime API: validates arguments, checks that the chosen backend supports every
 * node, plans the activation arena and dispatches to the backend (src/nn/backend.h).
 */
#include <stdlib.h>
#include <string.h>

#include "keyer/nn.h"
#include "nn/backend.h"
#include "nn/model.h"
#include "nn/planner.h"
#include "nn/schedule_choice.h"

struct keyer_runtime {
    const keyer_model *model;
    const kr_graph *graph;
    const kr_backend_ops *ops;
    kr_backend_instance *inst;
    kr_plan plan;
    keyer_runtime_params params;
};

static const char *const backend_names[] = {"reference", "cpu", "cuda"};

const char *keyer_backend_name(keyer_backend backend)
{
    if ((unsigned)backend >= sizeof(backend_names) / sizeof(backend_names[0]))
        return "unknown";
    return backend_names[backend];
}

keyer_status keyer_backend_from_name(const char *name, keyer_backend *out, keyer_error *err)
{
    for (int i = 0; name && out && i < 3; i++)
        if (!strcmp(name, backend_names[i])) {
            *out = (keyer_backend)i;
            return KEYER_OK;
        }
    return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                           "unknown backend '%s' (reference, cpu, cuda)", name ? name : "(null)");
}

const char *keyer_precision_name(keyer_precision precision)
{
    switch (precision) {
    case KEYER_PRECISION_F32: return "f32";
    case KEYER_PRECISION_F16: return "f16";
    case KEYER_PRECISION_AUTO: return "auto";
    }
    return "unknown";
}

keyer_status keyer_precision_from_name(const char *name, keyer_precision *out, keyer_error *err)
{
    static const char *const f32[] = {"f32", "fp32", "float32"}, *const f16[] = {"f16", "fp16",
                                                                                "float16"};
    for (int i = 0; name && out && i < 3; i++) {
        if (!strcmp(name, f32[i])) {
            *out = KEYER_PRECISION_F32;
            return KEYER_OK;
        }
        if (!strcmp(name, f16[i])) {
            *out = KEYER_PRECISION_F16;
            return KEYER_OK;
        }
    }
    if (name && out && !strcmp(name, "auto")) {
        *out = KEYER_PRECISION_AUTO;
        return KEYER_OK;
    }
    return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                           "unknown precision '%s' (f32, f16, auto)",
                           name ? name : "(null)");
}

keyer_runtime_params keyer_runtime_params_defaults(void)
{
    keyer_runtime_params p;
    memset(&p, 0, sizeof(p));
    p.backend = KEYER_BACKEND_CPU;
    p.batch = 1;
    return p;
}

static const kr_backend_ops *backend_ops(keyer_backend b)
{
    switch (b) {
    case KEYER_BACKEND_REFERENCE: return &kr_backend_reference;
    case KEYER_BACKEND_CPU: return &kr_backend_cpu;
    case KEYER_BACKEND_CUDA:
#ifdef KEYER_HAVE_CUDA_NN
        return &kr_backend_cuda;
#else
        return NULL;
#endif
    }
    return NULL;
}

/* Largest batch accepted: keeps every size product far from overflow. */
#define MAX_BATCH 4096

keyer_status keyer_runtime_create(const keyer_model *model, const keyer_runtime_params *params,
                                  keyer_runtime **out, keyer_error *err)
{
    if (!model || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_runtime_create: %s is NULL", model ? "out" : "model");
    *out = NULL;
    keyer_runtime_params p = params ? *params : keyer_runtime_params_defaults();
    const kr_graph *g = kr_model_graph(model);
    if (!g)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_runtime_create: the model has no graph");
    if (p.batch < 1 || p.batch > MAX_BATCH)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: batch %d is outside 1..%d", g->name, p.batch, MAX_BATCH);
    if (g->fixed_batch && p.batch != 1)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: the model's first dimension is not a batch of independent "
                               "items (a static batch, or operators that mix it): it runs at "
                               "batch 1 only", g->name);
    if (p.device < 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: device ordinal %d is negative", g->name, p.device);
    if (p.precision == KEYER_PRECISION_AUTO)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: precision auto is chosen per model by a session or keying "
                               "object; a runtime needs f32 or f16", g->name);
    if ((unsigned)p.precision > KEYER_PRECISION_F16)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: unknown precision %d",
                               g->name, (int)p.precision);
    if ((unsigned)p.cuda_schedule > KEYER_CUDA_SCHEDULE_PERSISTENT_GRID)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: unknown cuda schedule %d",
                               g->name, (int)p.cuda_schedule);
    if (p.backend == KEYER_BACKEND_CUDA && p.cuda_schedule == KEYER_CUDA_SCHEDULE_AUTO) {
        /* KEYER_CUDA_SCHEDULE may name the schedule AUTO stands for (schedule_choice.h) */
        int schedule = 0;
        if (kr_schedule_from_env(p.cuda_schedule, &schedule, err))
            return keyer_error_prefix(err, "%s: ", g->name);
        if (schedule != KEYER_CUDA_SCHEDULE_AUTO)
            keyer_log(p.logger, KEYER_LOG_INFO,
                      "%s: cuda schedule %s asked for by %s in place of auto", g->name,
                      getenv(KR_SCHEDULE_ENV), KR_SCHEDULE_ENV);
        p.cuda_schedule = (keyer_cuda_schedule)schedule;
    }
    if (p.precision == KEYER_PRECISION_F16 && p.backend != KEYER_BACKEND_CUDA)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: the %s backend runs in float32 only (f16 needs cuda)", g->name,
                               keyer_backend_name(p.backend));
    const kr_backend_ops *ops = backend_ops(p.backend);
    if (!ops)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               p.backend == KEYER_BACKEND_CUDA
                                   ? "%s: keyer was built without CUDA, so the cuda backend is "
                                     "not available"
                                   : "%s: unknown backend %d",
                               g->name, (int)p.backend);
    for (int n = 0; n < g->n_nodes; n++)
        if (!ops->supports_node(g, &g->nodes[n]))
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "%s: the %s backend does not support node %d (operator %d in "
                                   "the file, %s)",
                                   g->name, ops->name, n, g->nodes[n].source_index,
                                   kr_op_name(g->nodes[n].op));
    keyer_runtime *rt = calloc(1, sizeof(*rt));
    if (!rt)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", g->name);
    rt->model = model;
    rt->graph = g;
    rt->ops = ops;
    rt->params = p;
    keyer_status st = kr_plan_create(g, p.batch, ops->plan_slack, &rt->plan, err);
    if (st)
        goto fail;
    kr_backend_config cfg = {p.batch, p.threads, p.device, p.stream, p.logger,
                             p.precision == KEYER_PRECISION_F16, (int)p.cuda_schedule};
    st = ops->create(g, &rt->plan, &cfg, &rt->inst, err);
    if (st)
        goto fail;
    keyer_log(p.logger, KEYER_LOG_DEBUG, "%s: %s backend, batch %d, arena %zu bytes", g->name,
              ops->name, p.batch, keyer_runtime_arena_bytes(rt));
    *out = rt;
    return KEYER_OK;
fail:
    kr_plan_destroy(&rt->plan);
    free(rt);
    return st;
}

void keyer_runtime_destroy(keyer_runtime **prt)
{
    if (!prt || !*prt)
        return;
    keyer_runtime *rt = *prt;
    if (rt->inst)
        rt->ops->destroy(&rt->inst);
    kr_plan_destroy(&rt->plan);
    free(rt);
    *prt = NULL;
}

int keyer_runtime_batch(const keyer_runtime *rt) { return rt ? rt->params.batch : 0; }
keyer_backend keyer_runtime_backend(const keyer_runtime *rt)
{
    return rt ? rt->params.backend : KEYER_BACKEND_REFERENCE;
}

static int io_tensor(const keyer_runtime *rt, int index, int output)
{
    if (!rt || index < 0)
        return -1;
    if (output)
        return index < rt->graph->n_outputs ? rt->graph->outputs[index] : -1;
    return index < rt->graph->n_inputs ? rt->graph->inputs[index] : -1;
}

float *keyer_runtime_input_data(keyer_runtime *rt, int index)
{
    int t = io_tensor(rt, index, 0);
    return t < 0 ? NULL : rt->ops->tensor_data(rt->inst, t);
}

const float *keyer_runtime_output_data(keyer_runtime *rt, int index)
{
    int t = io_tensor(rt, index, 1);
    return t < 0 ? NULL : rt->ops->tensor_data(rt->inst, t);
}

size_t keyer_runtime_input_bytes(const keyer_runtime *rt, int index)
{
    int t = io_tensor(rt, index, 0);
    return t < 0 ? 0 : kr_tensor_bytes(&rt->graph->tensors[t], rt->params.batch);
}

size_t keyer_runtime_output_bytes(const keyer_runtime *rt, int index)
{
    int t = io_tensor(rt, index, 1);
    return t < 0 ? 0 : kr_tensor_bytes(&rt->graph->tensors[t], rt->params.batch);
}

static keyer_status copy(keyer_runtime *rt, int index, int output, void *host, size_t bytes,
                         keyer_error *err)
{
    int t = io_tensor(rt, index, output);
    const char *what = output ? "output" : "input";
    if (t < 0 || !host)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: no %s %d (the model has %d)", rt ? rt->graph->name : "runtime",
                               what, index,
                               rt ? (output ? rt->graph->n_outputs : rt->graph->n_inputs) : 0);
    size_t want = kr_tensor_bytes(&rt->graph->tensors[t], rt->params.batch);
    if (bytes != want)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: %s %d '%s' holds %zu bytes at batch %d, not %zu",
                               rt->graph->name, what, index, rt->graph->tensors[t].name, want,
                               rt->params.batch, bytes);
    int has_hook = output ? rt->ops->copy_out != NULL : rt->ops->copy_in != NULL;
    if (rt->ops->memory != KEYER_MEMORY_HOST && !has_hook)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                               "%s: the %s backend keeps tensors in device memory but has no "
                               "copy_%s hook", rt->graph->name, rt->ops->name,
                               output ? "out" : "in");
    if (output) {
        if (rt->ops->copy_out)
            return rt->ops->copy_out(rt->inst, t, host, bytes, err);
        memcpy(host, rt->ops->tensor_data(rt->inst, t), bytes);
    } else {
        if (rt->ops->copy_in)
            return rt->ops->copy_in(rt->inst, t, host, bytes, err);
        memcpy(rt->ops->tensor_data(rt->inst, t), host, bytes);
    }
    return KEYER_OK;
}

keyer_status keyer_runtime_set_input(keyer_runtime *rt, int index, const float *data, size_t bytes,
                                     keyer_error *err)
{
    return copy(rt, index, 0, (void *)data, bytes, err);
}

keyer_status keyer_runtime_get_output(keyer_runtime *rt, int index, float *data, size_t bytes,
                                      keyer_error *err)
{
    return copy(rt, index, 1, data, bytes, err);
}

keyer_status keyer_runtime_run(keyer_runtime *rt, keyer_error *err)
{
    if (!rt)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "keyer_runtime_run: NULL");
    return rt->ops->run(rt->inst, err);
}

keyer_status keyer_runtime_synchronize(keyer_runtime *rt, keyer_error *err)
{
    if (!rt)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_runtime_synchronize: NULL");
    return rt->ops->synchronize ? rt->ops->synchronize(rt->inst, err) : KEYER_OK;
}

size_t keyer_runtime_arena_bytes(const keyer_runtime *rt)
{
    if (!rt)
        return 0;
    return rt->ops->arena_bytes ? rt->ops->arena_bytes(rt->inst) : rt->plan.arena_bytes;
}

const char *keyer_runtime_schedule(const keyer_runtime *rt)
{
    if (!rt || !rt->ops->schedule_name)
        return "";
    return rt->ops->schedule_name(rt->inst);
}

size_t keyer_runtime_weight_bytes(const keyer_runtime *rt)
{
    if (!rt)
        return 0;
    return rt->ops->weight_bytes ? rt->ops->weight_bytes(rt->inst) : rt->graph->const_bytes;
}

keyer_status keyer_runtime_profile(keyer_runtime *rt, keyer_node_timing *out, int capacity,
                                   int *count, keyer_error *err)
{
    if (!rt || (!out && capacity > 0) || capacity < 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_runtime_profile: bad arguments");
    if (!rt->ops->profile)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: the %s backend has no per-operator profile", rt->graph->name,
                               rt->ops->name);
    const kr_graph *g = rt->graph;
    double *ms = calloc(g->n_nodes ? (size_t)g->n_nodes : 1, sizeof(double));
    if (!ms)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", g->name);
    keyer_status st = rt->ops->profile(rt->inst, ms, err);
    for (int n = 0; !st && n < g->n_nodes && n < capacity; n++) {
        const kr_tensor *y = &g->tensors[g->nodes[n].outputs[0]];
        keyer_node_timing *t = &out[n];
        memset(t, 0, sizeof(*t));
        t->node = n;
        t->source_index = g->nodes[n].source_index;
        t->op = kr_op_name(g->nodes[n].op);
        for (int d = 0; d < y->rank && d < KEYER_TENSOR_MAX_DIMS; d++)
            t->output_dims[d] = y->dims[d];
        t->ms = ms[n];
    }
    if (count)
        *count = g->n_nodes;
    free(ms);
    return st;
}
