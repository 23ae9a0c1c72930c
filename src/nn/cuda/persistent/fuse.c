/*
 * The persistent planner's merges across nodes (plan_util.h): squeeze-and-excitation blocks (a
 * pool tail on the producer, the dense layers and the MUL in the consumer: plan_excitations),
 * standalone activations into the step before them (absorb_activation), a resize into the 1x1
 * convolution reading it (absorb_resize), an ADD into the convolution before it (absorb_add), a
 * depthwise convolution into the pointwise one before it (absorb_depthwise), a 1x1 convolution
 * into the RGB stem before it (absorb_pointwise), PADs into their reader (plan_pads). A merge
 * that makes a step read a tensor the memory plan thought dead is made only if the step's output
 * does not overlap it.
 */
#include "nn/cuda/persistent/plan_util.h"

/* The node whose kernel writes tensor @p t: its producer, or the node it was folded into. */
static int writer(const kr_graph *g, const unsigned char *folded, int t)
{
    int q = g->tensors[t].producer;
    while (q >= 0 && folded[q])
        q--;
    return q;
}


/* Whether MUL node @p m multiplies a full tensor by global pool -> 1x1 conv [-> 1x1 conv]
 * (each conv with its activation, folded or a standalone activation node after it), every
 * intermediate read only along that chain. Sets @p se and @p full (the full operand's side). */
static int match_se(const kr_graph *g, const kr_cuda_op *ops, const unsigned char *folded, int m,
                    int batch, kr_pp_se_match *se, int *full)
{
    const kr_node *mul = &g->nodes[m];
    if (mul->op != KR_OP_MUL || folded[m] || mul->n_inputs != 2)
        return 0;
    const kr_tensor *y = &g->tensors[mul->outputs[0]];
    if (y->rank != 4)
        return 0;
    for (int side = 0; side < 2; side++) {
        int t = mul->inputs[side];
        const kr_tensor *tt = &g->tensors[t], *ft = &g->tensors[mul->inputs[1 - side]];
        if (kr_tensor_is_const(ft) || !kr_tensor_same_dims(ft, y) || tt->rank != 4 || tt->dims[0] != 1 ||
            tt->dims[1] != 1 || tt->dims[2] != 1 || tt->dims[3] != y->dims[3])
            continue;
        *se = (kr_pp_se_match){.pool = -1};
        int cur = t, ok = 1, widths = 0;
        while (ok) {
            if (!kr_pp_private(g, cur)) {
                ok = 0;
                break;
            }
            int q = writer(g, folded, cur);
            if (q < 0) {
                ok = 0;
                break;
            }
            const kr_cuda_op *op = &ops[q];
            const kr_node *node = op->node;
            int pending = KR_CUDA_POST_NONE;
            if ((int)kr_cuda_post_of(node->op) != KR_CUDA_POST_NONE && op->post == KR_CUDA_POST_NONE &&
                !op->residual && se->n_skip < 4) { /* a standalone activation after a dense */
                pending = (int)kr_cuda_post_of(node->op);
                se->skip[se->n_skip++] = q;
                cur = node->inputs[0];
                if (!kr_pp_private(g, cur) || (q = writer(g, folded, cur)) < 0) {
                    ok = 0;
                    break;
                }
                op = &ops[q];
                node = op->node;
            }
            if (node->op == KR_OP_CONV_2D && se->layers < 2 && !op->residual &&
                !(pending && op->post != KR_CUDA_POST_NONE) && se->n_skip < 4) {
                const kr_tensor *x = &g->tensors[node->inputs[0]], *w = &g->tensors[node->inputs[1]];
                if (x->rank != 4 || x->dims[1] != 1 || x->dims[2] != 1 || w->rank != 4 ||
                    w->dims[1] != 1 || w->dims[2] != 1) {
                    ok = 0;
                    break;
                }
                /* layers are found last first */
                se->fc[1] = se->fc[0], se->post[1] = se->post[0];
                se->fc[0] = q;
                se->post[0] = pending ? pending : (int)op->post;
                se->layers++;
                widths += w->dims[0];
                se->skip[se->n_skip++] = q;
                cur = node->inputs[0];
                continue;
            }
            if (pending || se->layers == 0 || !kr_pp_is_global_pool(op) || op->residual ||
                op->post != KR_CUDA_POST_NONE || node->activation != KR_ACT_NONE) {
                ok = 0;
                break;
            }
            se->pool = q;
            widths += g->tensors[node->outputs[0]].dims[3];
            break;
        }
        if (!ok || se->pool < 0 || (long long)batch * widths > KR_CUDA_SE_FLOATS)
            continue;
        *full = 1 - side;
        return 1;
    }
    return 0;
}


/* The node after @p n that has a kernel of its own (folded nodes skipped), or g->n_nodes. */
static int next_step_node(const kr_graph *g, const unsigned char *folded, int n)
{
    for (n++; n < g->n_nodes && folded[n]; n++) {
    }
    return n;
}

/* The node before @p n with a step of its own (folded and fused nodes skipped), or -1. */
static int prev_step_node(const kr_pp_ctx *c, int n)
{
    for (n--; n >= 0 && (c->folded[n] || c->fuse[n] == KR_PP_FUSE_SKIP); n--) {
    }
    return n;
}


/* Where the excitation of MUL @p m (no activation or post of its own; @p full its full
 * operand) can be consumed instead of the MUL's own step: the next node, when it alone reads
 * the MUL's output and is a convolution (input scaling, + the MUL's folded ADD) or, without a
 * folded ADD, a resize. That node then reads the MUL's operands itself, which the memory plan
 * did not foresee (kr_cuda_fuse checked its folds against the MUL's output): the node's output
 * must not overlap them, or a block could overwrite what another still reads. Returns that
 * node, or @p m. */
static int excitation_consumer(const kr_pp_ctx *c, int m, int full)
{
    const kr_graph *g = c->g;
    const kr_cuda_op *ops = c->ops;
    const kr_node *mul = &g->nodes[m];
    if (mul->activation != KR_ACT_NONE || ops[m].post != KR_CUDA_POST_NONE)
        return m;
    int nx = next_step_node(g, c->folded, m);
    if (nx >= g->n_nodes || ops[nx].in[0] != ops[m].out)
        return m;
    int t = g->nodes[nx].inputs[0], q = g->tensors[t].producer;
    if (!kr_pp_private(g, t) || q < m || q >= nx)
        return m;
    kr_op op = g->nodes[nx].op;
    if (op != KR_OP_CONV_2D && !(op == KR_OP_RESIZE_BILINEAR && !ops[m].residual))
        return m;
    size_t in_bytes = kr_pp_arena_bytes(c, t); /* the operands have the MUL output's shape */
    size_t out_bytes = kr_pp_arena_bytes(c, g->nodes[nx].outputs[0]);
    if (kr_pp_overlap(ops[nx].out, out_bytes, ops[m].in[full], in_bytes) ||
        kr_pp_overlap(ops[nx].out, out_bytes, ops[m].residual, in_bytes))
        return m;
    return nx;
}

/* Squeeze-and-excitation blocks (persistent.h): the step writing the pooled tensor, when it is
 * the one right before the pool and can (a convolution or an activation whose slice of outputs
 * fits the tile), or else the pool's own step, gets the pool tail that writes the sums; the
 * excitation's consumer computes it in its prologue; marks what has no step of its own. */
void kr_pp_plan_excitations(kr_pp_ctx *c)
{
    const kr_graph *g = c->g;
    const kr_cuda_op *ops = c->ops;
    for (int m = 0; m < g->n_nodes; m++) {
        c->se_at[m] = c->tail_at[m] = -1;
        c->se_full[m] = 0;
        c->tail_add[m] = NULL;
    }
    for (int m = 0; m < g->n_nodes; m++) {
        kr_pp_se_match se = {.pool = -1};
        int full = 0;
        if (!match_se(g, ops, c->folded, m, c->batch, &se, &full))
            continue;
        c->matches[m] = se;
        int at = excitation_consumer(c, m, full);
        if (at != m)
            c->fuse[m] = KR_PP_FUSE_SKIP;
        for (int i = 0; i < se.n_skip; i++)
            c->fuse[se.skip[i]] = KR_PP_FUSE_SKIP;
        c->se_at[at] = m;
        c->se_full[at] = full;
        /* the pool's producer: the step right before it, writing one of its operands */
        const kr_cuda_op *pool = &ops[se.pool];
        int q = prev_step_node(c, se.pool);
        kr_op qop = q >= 0 ? g->nodes[q].op : KR_OP_ADD;
        int kind_ok = qop == KR_OP_CONV_2D || qop == KR_OP_DEPTHWISE_CONV_2D ||
                      ((int)kr_cuda_post_of(qop) != KR_CUDA_POST_NONE &&
                       ops[q].post == KR_CUDA_POST_NONE && !ops[q].residual);
        const int channels = g->tensors[pool->node->inputs[0]].dims[3];
        if (q >= 0 && kind_ok && channels <= KR_CUDA_TILE_FLOATS && c->tail_at[q] < 0 &&
            c->fuse[q] != KR_PP_FUSE_POOL_PARTIAL &&
            (ops[q].out == pool->in[0] || (pool->addend && ops[q].out == pool->addend))) {
            c->fuse[se.pool] = KR_PP_FUSE_SKIP;
            c->tail_at[q] = m;
            c->tail_add[q] = ops[q].out == pool->in[0] ? pool->addend : pool->in[0];
        } else {
            c->fuse[se.pool] = KR_PP_FUSE_POOL_PARTIAL;
            c->tail_at[se.pool] = m;
        }
    }
}

/* A standalone activation node @p n (RELU, RELU6, HARD_SWISH, LOGISTIC) done as the post
 * function of the step before it, @p prev, when that step writes the activation's input and
 * nothing else reads it (the backend folds only an activation right after its producer in node
 * order; an excitation's skipped nodes may sit between). The step then writes the activation's
 * output, which must not overlap what the step reads. Returns whether it did. */
int kr_pp_absorb_activation(const kr_pp_ctx *c, kr_cuda_step *prev, int n)
{
    const kr_graph *g = c->g;
    const kr_cuda_op *op = &c->ops[n];
    int post = (int)kr_cuda_post_of(op->node->op);
    if (post == KR_CUDA_POST_NONE || op->post != KR_CUDA_POST_NONE || op->residual ||
        op->node->n_inputs != 1 || prev->post != KR_CUDA_POST_NONE ||
        (prev->res && !prev->res_pre) ||
        prev->res_mid || prev->tail || prev->y != op->in[0] ||
        !kr_pp_private(g, op->node->inputs[0]))
        return 0;
    switch (prev->kind) {
    case KR_STEP_CONV:
    case KR_STEP_DEPTHWISE:
    case KR_STEP_TCONV:
    case KR_STEP_BINARY:
    case KR_STEP_RESIZE:
    case KR_STEP_EXPAND_DW: break;
    case KR_STEP_CONV_PW: /* its kernel has no pool tail to take the activation's */
        if (c->tail_at[n] >= 0)
            return 0;
        break;
    default: return 0;
    }
    size_t out_bytes = kr_pp_arena_bytes(c, op->node->outputs[0]);
    size_t in_bytes = prev->kind == KR_STEP_BINARY
                          ? kr_pp_item_bytes(c, (size_t)prev->count)
                          : kr_pp_item_bytes(c, (size_t)prev->ih * prev->iw * prev->ic);
    if (kr_pp_overlap(op->out, out_bytes, prev->x, in_bytes) ||
        kr_pp_overlap(op->out, out_bytes, prev->x2, in_bytes) ||
        kr_pp_overlap(op->out, out_bytes, prev->scale_add, in_bytes))
        return 0;
    prev->post = post;
    prev->y = op->out;
    return 1;
}

/* A RESIZE step @p prev whose output only the 1x1 group-4 convolution @p cur reads is done by
 * the convolution as it loads its input (persistent.h, rz); @p cur then takes @p prev's place.
 * Not when the resize scales by an excitation, adds a residual, has a pool tail, or when the
 * convolution's output overlaps the resize's input (the memory plan may put it there: that
 * tensor's life ended at the resize). Returns 1 if merged. */
int kr_pp_absorb_resize(const kr_pp_ctx *c, kr_cuda_step *prev, const kr_cuda_step *cur)
{
    const kr_graph *g = c->g;
    if (prev->kind != KR_STEP_RESIZE || prev->se_layers || prev->res || prev->tail ||
        prev->post != KR_CUDA_POST_NONE || prev->vec != 4 || prev->node < 0 ||
        !kr_pp_private(g, g->nodes[prev->node].outputs[0]))
        return 0;
    if (cur->kind != KR_STEP_CONV || cur->group != 4 || cur->kh != 1 || cur->kw != 1 ||
        cur->sh != 1 || cur->sw != 1 || cur->pt || cur->pl || cur->scale_add || cur->se_layers ||
        cur->x != prev->y || cur->ic != prev->oc || cur->ic % 4 || cur->oh != prev->oh ||
        cur->ow != prev->ow)
        return 0;
    size_t out_bytes = kr_pp_arena_bytes(c, g->nodes[cur->node].outputs[0]);
    size_t in_bytes = kr_pp_item_bytes(c, (size_t)prev->ih * prev->iw * prev->ic);
    if (kr_pp_overlap(cur->y, out_bytes, prev->x, in_bytes))
        return 0;
    kr_cuda_step d = *cur;
    d.x = prev->x;
    d.rz = 1;
    d.rz_ih = prev->ih, d.rz_iw = prev->iw;
    d.align = prev->align, d.half = prev->half;
    *prev = d;
    return 1;
}

/* An ADD step @p cur, one of whose operands only the convolution step @p prev writes and only
 * the ADD reads, is done by that convolution: the other operand becomes its residual, added
 * before the ADD's activation (res_pre; BlazeFace's blocks are relu(conv + x), which the
 * backend's residual fold, activation first, does not take); with a folded channel PAD
 * (bmode 3) the residual has the PAD input's cn channels (res_c). Not when the convolution has
 * a residual, tail, activation or post function of its own, when the group-4 path would read
 * the residual across the channel boundary or unaligned, or when the ADD's output overlaps
 * what the convolution reads (its input, or the residual other than in place). @p cur then
 * takes no step. Returns 1 if merged. */
int kr_pp_absorb_add(const kr_pp_ctx *c, kr_cuda_step *prev, const kr_cuda_step *cur)
{
    const kr_graph *g = c->g;
    const size_t esize = c->ops[0].f16 ? 2 : 4;
    if (cur->kind != KR_STEP_BINARY || cur->mul || (cur->bmode != 0 && cur->bmode != 3) ||
        cur->res || cur->se_layers || prev->kind != KR_STEP_CONV || prev->res || prev->tail ||
        prev->post != KR_CUDA_POST_NONE || prev->lo > -3e38f || prev->hi < 3e38f ||
        prev->y_f32 || prev->node < 0 || prev->oc != cur->oc || prev->rz ||
        (prev->group == 4 && (prev->kh != 1 || prev->kw != 1)))
        return 0; /* (the kernel has res_pre for 1x1 group-4 and split convolutions) */
    const void *res;
    if (prev->y == cur->x)
        res = cur->x2;
    else if (cur->bmode == 0 && prev->y == cur->x2)
        res = cur->x;
    else
        return 0;
    const int res_c = cur->bmode == 3 ? cur->cn : 0;
    if (prev->group == 4 && (res_c % 4 || !kr_pp_aligned(res, 4 * esize)))
        return 0;
    if (!kr_pp_private(g, g->nodes[prev->node].outputs[0]))
        return 0;
    size_t out_bytes = kr_pp_arena_bytes(c, g->nodes[cur->node].outputs[0]);
    size_t in_bytes = kr_pp_item_bytes(c, (size_t)(prev->rz ? prev->rz_ih * prev->rz_iw
                                                      : prev->ih * prev->iw) * prev->ic);
    size_t res_bytes = res_c ? kr_pp_item_bytes(c, (size_t)prev->oh * prev->ow * res_c) : out_bytes;
    if (kr_pp_overlap(cur->y, out_bytes, prev->x, in_bytes) ||
        kr_pp_overlap(cur->y, out_bytes, prev->scale_add, in_bytes) ||
        (kr_pp_overlap(cur->y, out_bytes, res, res_bytes) && (res_c || cur->y != res)))
        return 0;
    prev->y = cur->y;
    prev->res = res;
    prev->res_c = res_c;
    prev->res_pre = 1;
    prev->lo = cur->lo, prev->hi = cur->hi, prev->post = cur->post;
    return 1;
}

/* Gives 1x1 convolution node @p n to step @p prev when prev is a 3x3 convolution on 3 channels
 * (the models' RGB stem) whose output n reads, pixel by pixel: the two become one CONV_PW step
 * (selfie: one step and one grid barrier fewer); the stem's output is stored only if other
 * nodes read it too (selfie's decoder does). Refused where n has anything folded into it (a
 * residual, an excitation, a pool tail, a pad), where n's output channels differ from the
 * stem's (the one shape run on the GPU is selfie's 16 -> 16; a version for other shapes and
 * 1x1 first convolutions was tried and dropped, docs/notes/cuda-persistent-schedule.md), where
 * their weights do not fit the step's shared memory, where the stem's output is a graph output
 * or has a view, or where n's output overlaps the stem's input or output. Returns whether it
 * did. */
int kr_pp_absorb_pointwise(const kr_pp_ctx *c, kr_cuda_step *prev, int n)
{
    const kr_graph *g = c->g;
    const kr_cuda_op *op = &c->ops[n];
    const kr_node *node = op->node;
    const size_t esize = op->f16 ? 2 : 4;
    if (node->op != KR_OP_CONV_2D || prev->kind != KR_STEP_CONV || prev->group != 4 ||
        prev->kh != 3 || prev->kw != 3 || prev->ic != 3 || prev->oc % 4 || prev->res ||
        prev->tail || prev->rz || prev->se_layers || prev->scale_add || prev->y_f32 ||
        op->in[0] != prev->y || op->residual || op->addend || c->fuse[n] != KR_PP_FUSE_NONE ||
        c->se_at[n] >= 0 || c->tail_at[n] >= 0 || c->pad_at[n] >= 0 || c->spad_at[n] >= 0)
        return 0;
    const int t = node->inputs[0];
    if (g->tensors[t].graph_output >= 0 || kr_pp_has_view(g, t))
        return 0;
    kr_cuda_step d;
    if (kr_pp_conv_like(&d, op, n, c->batch, KR_STEP_CONV, 1) || d.kh != 1 || d.kw != 1 ||
        d.sh != 1 || d.sw != 1 || d.pt > 0 || d.pl > 0 || d.ic != prev->oc ||
        d.oc != prev->oc || d.oh != prev->oh || d.ow != prev->ow || !kr_pp_aligned(d.y, 4 * esize))
        return 0;
    if (d.ic * d.oc > KR_CUDA_PERSISTENT_THREADS || /* the kernel's pass: NT / (oc / 4) pixels */
        KR_CUDA_PERSISTENT_THREADS / (d.oc / 4) * d.ic + d.ic * d.oc + d.oc > KR_CUDA_MID_FLOATS)
        return 0;
    size_t in_bytes = kr_pp_item_bytes(c, (size_t)prev->ih * prev->iw * prev->ic);
    size_t out_bytes = kr_pp_arena_bytes(c, node->outputs[0]);
    if (kr_pp_overlap(d.y, out_bytes, prev->x, in_bytes) ||
        kr_pp_overlap(d.y, out_bytes, prev->y, kr_pp_arena_bytes(c, t)))
        return 0;
    prev->y1 = kr_pp_readers(g, t) > 1 ? prev->y : NULL;
    /* the stem's half stays in prev's fields (its epilogue moves to e_*), n's is added */
    prev->kind = KR_STEP_CONV_PW;
    prev->node = d.node;
    prev->cn = prev->oc;
    prev->e_bias = prev->bias;
    prev->e_lo = prev->lo, prev->e_hi = prev->hi, prev->e_post = prev->post;
    prev->oc = d.oc;
    prev->w2 = d.w;
    prev->bias2 = d.bias;
    prev->bias = NULL;
    prev->lo = d.lo, prev->hi = d.hi, prev->post = d.post;
    prev->y = d.y;
    return 1;
}

/* Output tile side and channels per block of an EXPAND_DW step with @p oc channels; 0 when
 * its halo's pointwise outputs take more than one pass of a block (measured: a 17x17 halo for
 * 8x8 outputs at stride 2 made the pair slower than two steps) or its tile does not fit. */
static void expand_dw_tiling(const kr_cuda_step *d, int oc, int *tile, int *chan)
{
    int t = d->oh <= 16 ? 4 : 8, g = oc % 8 == 0 ? 8 : 4;
    int hh = (t - 1) * d->sh + (d->kh - 1) * d->dh + 1, hw = (t - 1) * d->sw + (d->kw - 1) * d->dw + 1;
    if (hh * hw * g > KR_CUDA_MID_FLOATS || t * t * g > KR_CUDA_TILE_FLOATS ||
        hh * hw * (g / 4) > KR_CUDA_PERSISTENT_THREADS ||
        (d->kh * d->kw + 1) * g > KR_CUDA_DWW_FLOATS)
        t = g = 0;
    *tile = t;
    *chan = g;
}

/* A depthwise convolution node @p n done in the step before it, @p prev, when that is a
 * pointwise convolution (1x1, stride 1, no residual or tail) whose output only the depthwise
 * convolution reads (and its folded residual ADD): the two become one EXPAND_DW step and the
 * pointwise output is never stored. The depthwise output must not overlap what the step reads.
 * Returns whether it did. */
int kr_pp_absorb_depthwise(const kr_pp_ctx *c, kr_cuda_step *prev, int n)
{
    const kr_graph *g = c->g;
    const kr_cuda_op *op = &c->ops[n];
    const kr_node *node = op->node;
    if (node->op != KR_OP_DEPTHWISE_CONV_2D || prev->kind != KR_STEP_CONV || prev->kh != 1 ||
        prev->kw != 1 || prev->sh != 1 || prev->sw != 1 || prev->pt > 0 || prev->pl > 0 ||
        prev->res || prev->tail || prev->rz || prev->vec != 4 || prev->oc % 4 ||
        op->in[0] != prev->y || op->addend)
        return 0;
    const kr_tensor *x = &g->tensors[node->inputs[0]], *w = &g->tensors[node->inputs[1]];
    const kr_tensor *pw = &g->tensors[prev->w_tensor], *y = &g->tensors[node->outputs[0]];
    const int res_mid = op->residual && op->residual == prev->y;
    int readers_ok = kr_pp_readers(g, node->inputs[0]) == 1 + res_mid;
    if (!readers_ok || x->graph_output >= 0 || x->rank != 4 || w->rank != 4 || y->rank != 4 ||
        y->dims[3] != x->dims[3] || pw->dtype != KR_DTYPE_F32 || !pw->data)
        return 0;
    if (kr_pp_has_view(g, node->inputs[0]))
        return 0;
    kr_cuda_step d;
    if (kr_pp_conv_like(&d, op, n, c->batch, KR_STEP_DEPTHWISE, 1))
        return 0;
    expand_dw_tiling(&d, d.oc, &d.tile, &d.chan);
    size_t in_bytes = kr_pp_item_bytes(c, (size_t)prev->ih * prev->iw * prev->ic);
    size_t out_bytes = kr_pp_arena_bytes(c, node->outputs[0]);
    if (!d.tile || kr_pp_overlap(op->out, out_bytes, prev->x, in_bytes) ||
        kr_pp_overlap(op->out, out_bytes, prev->scale_add, in_bytes) ||
        (!res_mid && op->residual && kr_pp_overlap(op->out, out_bytes, op->residual, out_bytes)))
        return 0;
    /* the pointwise half, from prev */
    d.kind = KR_STEP_EXPAND_DW;
    d.x = prev->x;
    d.ic = prev->ic;
    d.scale_add = prev->scale_add;
    d.w_tensor = prev->w_tensor;
    d.group = 4;
    d.split = 1;
    d.vec = 4;
    d.e_bias = prev->bias;
    d.e_lo = prev->lo, d.e_hi = prev->hi, d.e_post = prev->post;
    d.se_layers = prev->se_layers; /* an excitation's prologue scaling the input */
    d.se_c = prev->se_c, d.se_slices = prev->se_slices, d.se_pixels = prev->se_pixels;
    d.se_partial_off = prev->se_partial_off;
    for (int l = 0; l < 2; l++) {
        d.se_out[l] = prev->se_out[l];
        d.se_w[l] = prev->se_w[l], d.se_b[l] = prev->se_b[l];
        d.se_lo[l] = prev->se_lo[l], d.se_hi[l] = prev->se_hi[l], d.se_post[l] = prev->se_post[l];
    }
    /* the depthwise half: conv_like set its window, weights, epilogue and output */
    d.w2 = d.w;
    d.bias2 = d.bias;
    d.w = prev->w;
    d.bias = NULL;
    d.res_mid = res_mid;
    if (res_mid)
        d.res = NULL;
    *prev = d;
    return 1;
}

/* A channel PAD read only by an ADD of its output's shape is done by that ADD (BINARY bmode
 * 3: the padded operand read with its own channels, zero beyond), unless the ADD's output
 * overlaps the PAD's input (the memory plan may put it there: that tensor's life ended at the
 * PAD). */
void kr_pp_plan_pads(kr_pp_ctx *c)
{
    const kr_graph *g = c->g;
    for (int p = 0; p < g->n_nodes; p++) { /* spatial PADs into the convolution reading them */
        const kr_node *pad = &g->nodes[p];
        if (pad->op != KR_OP_PAD || c->folded[p] || !kr_pp_spatial_pad(g, pad) ||
            c->ops[p].residual || c->ops[p].post != KR_CUDA_POST_NONE ||
            !kr_pp_private(g, pad->outputs[0]))
            continue;
        for (int r = p + 1; r < g->n_nodes; r++) {
            const kr_node *rd = &g->nodes[r];
            if (rd->n_inputs < 1 || rd->inputs[0] != pad->outputs[0])
                continue;
            if (!c->folded[r] &&
                (rd->op == KR_OP_CONV_2D || rd->op == KR_OP_DEPTHWISE_CONV_2D)) {
                c->fuse[p] = KR_PP_FUSE_SKIP;
                c->spad_at[r] = p;
            }
            break;
        }
    }
    for (int p = 0; p < g->n_nodes; p++) {
        const kr_node *pad = &g->nodes[p];
        if (pad->op != KR_OP_PAD || c->folded[p] || !kr_pp_channel_pad(g, pad) ||
            c->ops[p].residual || c->ops[p].post != KR_CUDA_POST_NONE)
            continue;
        const int t = pad->outputs[0];
        if (!kr_pp_private(g, t))
            continue;
        for (int a = p + 1; a < g->n_nodes; a++) {
            const kr_node *add = &g->nodes[a];
            if (add->op != KR_OP_ADD || add->n_inputs != 2 ||
                (add->inputs[0] != t && add->inputs[1] != t))
                continue;
            const int other = add->inputs[add->inputs[0] == t];
            const kr_tensor *o = &g->tensors[other], *y = &g->tensors[add->outputs[0]];
            size_t in_bytes = kr_pp_item_bytes(c, kr_tensor_elements(&g->tensors[pad->inputs[0]]));
            if (!c->folded[a] && other != t && !kr_tensor_is_const(o) &&
                kr_tensor_same_dims(o, y) && kr_tensor_same_dims(&g->tensors[t], y) &&
                !kr_pp_overlap(c->ops[a].out, kr_pp_arena_bytes(c, add->outputs[0]), c->ops[p].in[0],
                         in_bytes)) {
                c->fuse[p] = KR_PP_FUSE_SKIP;
                c->pad_at[a] = p;
            }
            break;
        }
    }
}

