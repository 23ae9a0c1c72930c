/*
 * kr_onnx_import(): the driver (see import.h). Graph inputs with their dynamic sizes, the node
 * loop (Constant, folding by import_fold.c, mapping by import_ops.c), graph outputs, and
 * packing the graph under construction into a kr_graph that kr_graph_validate() then checks.
 * The helpers all of them share are in import_util.c.
 */
#define _POSIX_C_SOURCE 200809L
#include "nn/onnx/import.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/onnx/import_internal.h"

#define MAX_DESCRIPTION_BYTES 1023
#define CONST_ALIGN 16
#define STORAGE_ALIGN 64


kr_onnx_import_params kr_onnx_import_params_defaults(void)
{
    kr_onnx_import_params p = {0, 0};
    return p;
}

/* ---- the import ------------------------------------------------------------------------------ */

static keyer_status read_inputs(kr_imp_ctx *c)
{
    const Onnx__GraphProto *gp = c->gp;
    for (size_t k = 0; k < gp->n_input; k++) {
        const Onnx__ValueInfoProto *in = gp->input[k];
        const char *name = in->name ? in->name : "";
        if (kr_onnx_file_initializer(c->f, name))
            continue; /* older exports list initializers among the inputs */
        const Onnx__TypeProto *tp = in->type;
        if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "graph input '%s' is not a tensor",
                               name);
        const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
        if (tt->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT &&
            tt->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16)
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "graph input '%s' has ONNX element "
                               "type %d; keyer's model inputs are float (or float16, read as "
                               "float)", name, (int)tt->elem_type);
        if (!tt->shape)
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "graph input '%s' has no shape",
                               name);
        int rank = (int)tt->shape->n_dim;
        if (rank < 1 || rank > KR_MAX_DIMS)
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "graph input '%s' has rank %d; keyer "
                               "takes ranks 1 to %d", name, rank, KR_MAX_DIMS);
        int64_t dims[KR_MAX_DIMS];
        for (int d = 0; d < rank; d++) {
            const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[d];
            int64_t v = dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                            ? dm->dim_value
                            : -1;
            if (v <= 0) {
                int given = rank == 4 && d == 2 ? c->params.height
                            : rank == 4 && d == 3 ? c->params.width
                                                  : 0;
                if (d == 0)
                    v = 1;
                else if (given > 0)
                    v = given;
                else
                    return kr_imp_fail(c, KEYER_STATUS_BAD_DATA,
                                       "graph input '%s': dimension %d (%s) is dynamic and no "
                                       "size was given for it", name, d,
                                       rank == 4 && d == 2   ? "height"
                                       : rank == 4 && d == 3 ? "width"
                                                             : "not height or width");
            } else if (d == 0 && v != 1) {
                /* A static batch other than 1 stays in the graph, which then runs only at
                 * runtime batch 1 (graph.h, fixed_batch). */
                c->fixed_batch = 1;
            }
            dims[d] = v;
        }
        if (kr_imp_find_value(c, name) >= 0)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "graph input '%s' is listed twice",
                               name);
        int kd[KR_MAX_DIMS];
        KR_IMP_TRY(kr_imp_dims(c, rank, dims, rank == 4, kd));
        int t = kr_imp_new_act(c, name, rank, kd);
        if (t < 0)
            return c->err->status;
        int v = kr_imp_add_value(c, name);
        if (v < 0)
            return KEYER_STATUS_OUT_OF_MEMORY;
        kr_imp_value *x = &c->vals[v];
        x->kind = KR_IMP_ACT;
        x->tensor = t;
        x->rank = rank;
        memcpy(x->dims, dims, sizeof(dims));
        x->nhwc = rank == 4;
    }
    return KEYER_OK;
}

static keyer_status import_node(kr_imp_ctx *c)
{
    const Onnx__NodeProto *node = c->node;
    const char *op = node->op_type ? node->op_type : "";
    /* every operator keyer imports or folds has a first output; the mappers name their
     * intermediate tensors after it */
    if (node->n_output == 0 || !node->output[0] || !node->output[0][0])
        return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "has no first output");
    if (strcmp(op, "Constant") == 0) {
        const kr_onnx_tensor *t = kr_onnx_file_constant(c->f, node);
        if (!t)
            return kr_imp_fail(c, KEYER_STATUS_BAD_DATA, "has no value");
        kr_imp_const k;
        KR_IMP_TRY(kr_imp_load_tensor(c, t, &k));
        return kr_imp_set_const(c, 0, &k);
    }
    int all_const = 1, any_act = 0;
    for (size_t i = 0; i < node->n_input; i++) {
        kr_imp_value *v;
        KR_IMP_TRY(kr_imp_lookup(c, node->input[i], &v));
        all_const &= v->kind != KR_IMP_ACT;
        any_act |= v->kind == KR_IMP_ACT;
    }
    if (kr_imp_foldable(op) &&
        (all_const || strcmp(op, "Shape") == 0 || strcmp(op, "Size") == 0))
        return kr_imp_fold(c);
    if (!any_act)
        return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "is not supported with constant inputs "
                           "only (keyer folds shape arithmetic, not this operator)");
    return kr_imp_map(c);
}

static keyer_status read_outputs(kr_imp_ctx *c, kr_graph *g, kr_onnx_layout *layouts)
{
    const Onnx__GraphProto *gp = c->gp;
    for (size_t k = 0; k < gp->n_output; k++) {
        const char *name = gp->output[k]->name ? gp->output[k]->name : "";
        kr_imp_value *v;
        KR_IMP_TRY(kr_imp_lookup(c, name, &v));
        if (v->kind != KR_IMP_ACT)
            return kr_imp_fail(c, KEYER_STATUS_UNSUPPORTED, "graph output '%s' is a constant "
                               "(it does not depend on the inputs)", name);
        int t = v->tensor;
        int dup = t < g->n_inputs;
        for (size_t j = 0; j < k; j++)
            dup |= g->outputs[j] == t;
        if (dup) {
            /* The same tensor as a graph input or another output (Identity, Cast): a RESHAPE
             * view under the file's name, so each output is its own tensor. */
            int y = kr_imp_new_act(c, name, c->tensors[t].rank, c->tensors[t].dims);
            if (y < 0 || !kr_imp_emit(c, KR_OP_RESHAPE, 1, &t, y))
                return c->err->status;
            t = y;
        } else if (strcmp(c->tensors[t].name, name) != 0) {
            /* An alias (a folded BatchNormalization, Identity, Cast): the file's name wins. */
            size_t len = strlen(name) > 255 ? 255 : strlen(name);
            char *copy = malloc(len + 1);
            if (!copy)
                return kr_imp_oom(c);
            memcpy(copy, name, len);
            copy[len] = 0;
            free(c->tensors[t].name);
            c->tensors[t].name = copy;
        }
        g->outputs[k] = t;
        kr_onnx_layout *l = &layouts[g->n_inputs + (int)k];
        l->rank = v->rank;
        for (int d = 0; d < v->rank && d < KR_MAX_DIMS; d++) {
            l->dims[d] = (int)v->dims[d];
            l->perm[d] = d;
        }
        if (v->nhwc) {
            static const int fwd[4] = {0, 2, 3, 1};
            memcpy(l->perm, fwd, sizeof(fwd));
        }
    }
    return KEYER_OK;
}

/* Moves the graph under construction into @p g. */
static keyer_status pack(kr_imp_ctx *c, kr_graph *g)
{
    size_t total = 0;
    for (int t = 0; t < c->n_tensors; t++)
        if (c->tdata[t])
            total += (kr_tensor_bytes(&c->tensors[t], 1) + CONST_ALIGN - 1) / CONST_ALIGN *
                     CONST_ALIGN;
    if (total) {
        size_t alloc = (total + STORAGE_ALIGN - 1) / STORAGE_ALIGN * STORAGE_ALIGN;
        g->const_storage = aligned_alloc(STORAGE_ALIGN, alloc);
        if (!g->const_storage)
            return kr_imp_oom(c);
        g->const_bytes = total;
    }
    size_t offset = 0;
    for (int t = 0; t < c->n_tensors; t++) {
        if (!c->tdata[t])
            continue;
        size_t bytes = kr_tensor_bytes(&c->tensors[t], 1);
        void *dst = (unsigned char *)g->const_storage + offset;
        memcpy(dst, c->tdata[t], bytes);
        c->tensors[t].data = dst;
        free(c->tdata[t]);
        c->tdata[t] = NULL;
        offset += (bytes + CONST_ALIGN - 1) / CONST_ALIGN * CONST_ALIGN;
    }
    g->tensors = c->tensors;
    g->n_tensors = c->n_tensors;
    c->tensors = NULL;
    c->n_tensors = 0;
    g->nodes = c->nodes ? c->nodes : calloc(1, sizeof(kr_node));
    g->n_nodes = c->n_nodes;
    c->nodes = NULL;
    c->n_nodes = 0;
    g->fixed_batch = c->fixed_batch;
    return g->nodes ? KEYER_OK : kr_imp_oom(c);
}

static void ctx_free(kr_imp_ctx *c)
{
    for (size_t v = 0; v < c->n_vals; v++)
        kr_imp_const_free(&c->vals[v].c);
    free(c->vals);
    free(c->slots);
    for (int t = 0; t < c->n_tensors; t++) {
        free(c->tensors[t].name);
        free(c->tdata[t]);
    }
    free(c->tensors);
    free(c->tdata);
    free(c->nodes);
}

static char *dup_capped(const char *s, size_t cap)
{
    size_t len = strlen(s);
    if (len > cap)
        len = cap;
    char *d = malloc(len + 1);
    if (d) {
        memcpy(d, s, len);
        d[len] = 0;
    }
    return d;
}

keyer_status kr_onnx_import(const kr_onnx_file *f, const kr_onnx_import_params *p, kr_graph **out,
                            kr_onnx_layout **layouts, keyer_error *err)
{
    if (out)
        *out = NULL;
    if (layouts)
        *layouts = NULL;
    if (!f || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "kr_onnx_import needs a file and an output pointer");
    kr_imp_ctx c;
    memset(&c, 0, sizeof(c));
    c.f = f;
    c.gp = kr_onnx_file_graph(f);
    c.opset = kr_onnx_file_opset(f);
    c.params = p ? *p : kr_onnx_import_params_defaults();
    c.err = err;
    c.node_index = -1;
    if (c.params.height < 0 || c.params.width < 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: input size %dx%d is "
                               "negative", kr_onnx_file_name(f), c.params.height, c.params.width);
    kr_graph *g = NULL;
    kr_onnx_layout *lay = NULL;
    keyer_status st;
    if (kr_imp_add_value(&c, "") != 0) { /* value 0: absent */
        st = KEYER_STATUS_OUT_OF_MEMORY;
        goto fail;
    }
    g = calloc(1, sizeof(*g));
    if (!g || !(g->name = dup_capped(kr_onnx_file_name(f), 4095))) {
        st = kr_imp_oom(&c);
        goto fail;
    }
    const Onnx__ModelProto *mp = kr_onnx_file_model(f);
    if (mp->doc_string && mp->doc_string[0] &&
        !(g->description = dup_capped(mp->doc_string, MAX_DESCRIPTION_BYTES))) {
        st = kr_imp_oom(&c);
        goto fail;
    }
    if ((st = read_inputs(&c)) != KEYER_OK)
        goto fail;
    int n_in = c.n_tensors; /* the graph inputs are tensors 0..n_in-1 */
    for (size_t n = 0; n < c.gp->n_node; n++) {
        c.node = c.gp->node[n];
        c.node_index = (int)n;
        if ((st = import_node(&c)) != KEYER_OK)
            goto fail;
    }
    c.node = NULL;
    c.node_index = -1;
    size_t n_out = c.gp->n_output;
    g->inputs = calloc(n_in ? (size_t)n_in : 1, sizeof(int));
    g->outputs = calloc(n_out ? n_out : 1, sizeof(int));
    lay = calloc((size_t)n_in + n_out + 1, sizeof(*lay));
    if (!g->inputs || !g->outputs || !lay) {
        st = kr_imp_oom(&c);
        goto fail;
    }
    g->n_inputs = n_in;
    g->n_outputs = (int)n_out;
    for (int i = 0; i < n_in; i++) {
        g->inputs[i] = i;
        const kr_imp_value *v = &c.vals[1 + i]; /* read_inputs added them in this order */
        lay[i].rank = v->rank;
        for (int d = 0; d < v->rank; d++) {
            lay[i].dims[d] = (int)v->dims[d];
            lay[i].perm[d] = d;
        }
        if (v->nhwc) {
            static const int fwd[4] = {0, 2, 3, 1};
            memcpy(lay[i].perm, fwd, sizeof(fwd));
        }
    }
    if ((st = read_outputs(&c, g, lay)) != KEYER_OK || (st = pack(&c, g)) != KEYER_OK)
        goto fail;
    if ((st = kr_graph_validate(g, err)) != KEYER_OK)
        goto fail;
    ctx_free(&c);
    *out = g;
    if (layouts)
        *layouts = lay;
    else
        free(lay);
    return KEYER_OK;
fail:
    ctx_free(&c);
    kr_graph_destroy(&g);
    free(lay);
    return st;
}
