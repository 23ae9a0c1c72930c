/*
 * Cluster segments (segment.h), the host half: finding the run of steps, packing its weights.
 */
#include "nn/cuda/segment/segment.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of shared memory a block may have on sm_90 (227 KB); the device's own limit is checked
 * by kr_cuda_segment_prepare. */
#define SEG_SMEM_MAX 232448

static int proj_floats(int ci, int hid, int c)
{
    int o[KR_SEG_PJ_N + 1];
    kr_seg_proj_layout(ci, hid, c, o);
    return o[KR_SEG_PJ_N];
}

static int dw_floats(int c, int e, int k)
{
    int o[KR_SEG_DW_N + 1];
    kr_seg_dw_layout(c, e, k, o);
    return o[KR_SEG_DW_N];
}

static int ok_channels(int c) { return c > 0 && c % 4 == 0 && c <= KR_CUDA_SEG_MAX_C; }

static int q_floats(int c, int oc)
{
    int o[KR_SEG_Q_N + 1];
    kr_seg_q_layout(c, oc, o);
    return o[KR_SEG_Q_N];
}

/* A 1x1 convolution on @p h x W pixels whose input is scaled by a two-layer excitation of its
 * own channels, with nothing else folded in but (where @p res_ok) a residual and (where
 * @p tail_ok) a pool tail of its output. */
static int is_proj(const kr_cuda_step *s, int h, int res_ok, int tail_ok)
{
    return s->kind == KR_STEP_CONV && s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 &&
           s->pt == 0 && s->pl == 0 && s->ih == h && s->oh == h && s->iw == KR_CUDA_SEG_W &&
           s->ow == KR_CUDA_SEG_W && s->se_layers == 2 && s->se_c == s->ic &&
           s->se_out[1] == s->ic && ok_channels(s->se_out[0]) && ok_channels(s->ic) &&
           ok_channels(s->oc) && (!s->tail || (tail_ok && !s->tail_add && s->tail_c == s->oc)) &&
           !s->scale_add && !s->rz && !s->x_f32 &&
           !s->y_f32 && s->res_c == 0 && s->w && (res_ok || !s->res);
}

/* A plain 1x1 convolution of @p x ([h][W][c]): Q. */
static int is_q(const kr_cuda_step *s, int h, int c, const void *x)
{
    return s->kind == KR_STEP_CONV && s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 &&
           s->pt == 0 && s->pl == 0 && s->ih == h && s->oh == h && s->iw == KR_CUDA_SEG_W &&
           s->ow == KR_CUDA_SEG_W && s->ic == c && ok_channels(s->oc) && s->x == x &&
           !s->se_layers && !s->tail && !s->scale_add && !s->rz && !s->x_f32 && !s->y_f32 &&
           !s->res && s->w;
}

/* U's and W's expansion (kr_cuda_seg_proj) from their EXPAND_DW step @p d: its excitation
 * (ci: its input channels) and its pointwise epilogue. */
static void set_expand(kr_cuda_seg_proj *p, const kr_cuda_step *d)
{
    p->ci = d->ic;
    p->hid = d->se_out[0];
    for (int l = 0; l < 2; l++) {
        p->se_lo[l] = d->se_lo[l];
        p->se_hi[l] = d->se_hi[l];
        p->se_post[l] = d->se_post[l];
    }
    p->lo = d->e_lo;
    p->hi = d->e_hi;
    p->post = d->e_post;
}

static void set_proj(kr_cuda_seg_proj *p, const kr_cuda_step *s)
{
    p->ci = s->ic;
    p->hid = s->se_out[0];
    p->res = s->res != NULL;
    p->res_pre = s->res_pre;
    for (int l = 0; l < 2; l++) {
        p->se_lo[l] = s->se_lo[l];
        p->se_hi[l] = s->se_hi[l];
        p->se_post[l] = s->se_post[l];
    }
    p->lo = s->lo;
    p->hi = s->hi;
    p->post = s->post;
}

size_t kr_cuda_segment_smem(const kr_cuda_segment *seg)
{
    int o[KR_SEG_SM_N + 1];
    kr_seg_smem_layout(seg, o);
    return (size_t)o[KR_SEG_SM_N] * sizeof(float);
}

/* The first node a step stands for: an EXPAND_DW step's node is its depthwise convolution,
 * after the pointwise one (and its activation nodes). */
static int first_node(const kr_graph *g, const kr_cuda_step *s)
{
    int n = s->node;
    if (n >= 0 && s->rz) { /* a convolution that resizes its input: the resize's node */
        int t = g->nodes[n].inputs[0];
        int p = t >= 0 ? g->tensors[kr_tensor_storage(g, t)].producer : -1;
        return p >= 0 ? p : n;
    }
    if (s->kind != KR_STEP_EXPAND_DW || n < 0)
        return n;
    for (;;) {
        int t = g->nodes[n].inputs[0];
        int p = t >= 0 ? g->tensors[kr_tensor_storage(g, t)].producer : -1;
        if (p < 0)
            return n;
        n = p;
        if (kr_cuda_post_of(g->nodes[n].op) == KR_CUDA_POST_NONE)
            return n;
    }
}

/* The nodes the steps [first, first + count) of @p steps[0..n) stand for: from the first
 * step's first node to the node before the next step's first node (the last node when none
 * follows). */
static void node_range(const kr_graph *g, const kr_cuda_step *steps, int n, int first,
                       int count, int *lo, int *hi)
{
    *lo = first_node(g, &steps[first]);
    *hi = g->n_nodes - 1;
    for (int i = first + count; i < n; i++)
        if (steps[i].node >= 0) {
            *hi = first_node(g, &steps[i]) - 1;
            break;
        }
}

/* Whether a tensor written by the nodes [lo, hi) (all but the last, whose output is the
 * segment's) is read after node hi or is a graph output: the segment keeps those in shared
 * memory. */
static int leaks(const kr_graph *g, int lo, int hi)
{
    for (int t = 0; t < g->n_tensors; t++) {
        const kr_tensor *tt = &g->tensors[t];
        int p = g->tensors[kr_tensor_storage(g, t)].producer;
        if (p < lo || p >= hi)
            continue;
        if (tt->graph_output >= 0 || tt->last_consumer > hi)
            return 1;
    }
    return 0;
}

static int overlap(const void *a, size_t na, const void *b, size_t nb)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + nb && y < x + na;
}

/* Whether a step of @p steps[from..n) reads the pool sums at scratch offset @p off (an
 * excitation prologue, or a pool's final step): the segment keeps its pools' sums in the
 * cluster and does not write them. */
static int sums_read(const kr_cuda_step *steps, int from, int n, size_t off)
{
    for (int j = from; j < n; j++)
        if ((steps[j].se_layers && steps[j].se_partial_off == off) ||
            (steps[j].kind == KR_STEP_POOL_FINAL && steps[j].tail_partial_off == off))
            return 1;
    return 0;
}

static int e_floats(int ic, int c, int e)
{
    int o[KR_SEG_E_N + 1];
    kr_seg_e_layout(ic, c, e, o);
    return o[KR_SEG_E_N];
}

/* Bytes of one item's input x (E's or S's where there is one). */
static size_t in_bytes(const kr_cuda_segment *seg, size_t esize)
{
    if (seg->e_ic)
        return (size_t)(2 * seg->h) * (2 * KR_CUDA_SEG_W) * seg->e_ic * esize;
    if (seg->s_ic)
        return (size_t)(2 * seg->h) * (2 * KR_CUDA_SEG_W) * seg->s_ic * esize;
    return (size_t)seg->h * KR_CUDA_SEG_W * seg->p0.ci * esize;
}

/* Sets S (segment.h) from the step before P0 (@p steps[i]) where it is one for window @p k:
 * stride 2 from 2h x 2W, the window's rows from this block and its two neighbours (pad before
 * <= 2 and <= k - 2 rows), the input rows fitting the input row's buffer (4 s_ic <= p0.ci),
 * its output P0's input and its pool tail the sums P0's excitation reads and no step after P0
 * in @p steps[0..n) reads (the segment does not write them). */
static void take_s(kr_cuda_segment *seg, const kr_cuda_step *steps, int n, int i, int k)
{
    seg->s_ic = 0;
    if (i < 1)
        return;
    const kr_cuda_step *d = &steps[i - 1], *p0 = &steps[i];
    const int h = p0->oh;
    if (d->kind != KR_STEP_EXPAND_DW || d->sh != 2 || d->sw != 2 || d->dh != 1 || d->dw != 1 ||
        d->kh != k || d->kw != k || d->ih != 2 * h || d->iw != 2 * KR_CUDA_SEG_W ||
        d->oh != h || d->ow != KR_CUDA_SEG_W || d->pt < 0 || d->pt > 2 || d->pt > k - 2 ||
        k - 2 - d->pt > 2 || d->pl < 0 || d->pl >= k || !ok_channels(d->ic) ||
        d->oc != p0->ic || 4 * d->ic > p0->ic || !d->tail || d->tail_c != d->oc ||
        d->tail_add || d->tail_partial_off != p0->se_partial_off ||
        d->tail_slices != p0->se_slices || d->se_layers || d->scale_add || d->res ||
        d->res_mid || d->x_f32 || d->y_f32 || d->y != p0->x || !d->w || !d->w2)
        return;
    if (sums_read(steps, i + 1, n, d->tail_partial_off))
        return;
    seg->s_ic = d->ic;
    seg->s_pt = d->pt;
    seg->s_pl = d->pl;
    seg->sd.e = d->oc;
    seg->sd.e_lo = d->e_lo;
    seg->sd.e_hi = d->e_hi;
    seg->sd.e_post = d->e_post;
    seg->sd.lo = d->lo;
    seg->sd.hi = d->hi;
    seg->sd.post = d->post;
}

/* Floats of the expanded rows' buffer (1 + 2 pad rows of the widest activation). */
static int ep_floats(const kr_cuda_segment *seg)
{
    return (1 + seg->k / 2 * 2) * KR_CUDA_SEG_W * kr_seg_emax(seg);
}

/* Sets E (segment.h) from the three steps before S (steps[i - 4 .. i - 2], P0 at @p i) where
 * they are one: a plain 1x1 convolution to S's channels at 2h x 2W, an expand/depthwise 3x3
 * "same" step of its output without excitation, pool tail or residual, a 1x1 convolution of
 * that back to S's channels whose residual is the first one's output (or none) and whose
 * output is S's input; nothing after them reads the tensors between (the skip, their output,
 * is written) and their output lies on no other item's input; the activations fit the buffers the kernel gives them (input rows and window:
 * a stage buffer; depthwise rows: EP; the first output: D). */
static void take_e(const kr_graph *g, kr_cuda_segment *seg, const kr_cuda_step *steps, int n,
                   int i, size_t esize)
{
    seg->e_ic = 0;
    if (!seg->s_ic || i < 4)
        return;
    const kr_cuda_step *c1 = &steps[i - 4], *d = &steps[i - 3], *c3 = &steps[i - 2];
    const int h2 = 2 * seg->h, w2 = 2 * KR_CUDA_SEG_W, c = seg->s_ic;
    if (c1->kind != KR_STEP_CONV || c1->kh != 1 || c1->kw != 1 || c1->sh != 1 || c1->sw != 1 ||
        c1->pt || c1->pl || c1->ih != h2 || c1->iw != w2 || c1->oh != h2 || c1->ow != w2 ||
        !ok_channels(c1->ic) || c1->oc != c || c1->se_layers || c1->scale_add || c1->res ||
        c1->rz || c1->tail || c1->x_f32 || c1->y_f32 || !c1->w)
        return;
    if (d->kind != KR_STEP_EXPAND_DW || d->x != c1->y || d->ic != c || !ok_channels(d->oc) ||
        d->kh != 3 || d->kw != 3 || d->sh != 1 || d->sw != 1 || d->dh != 1 || d->dw != 1 ||
        d->pt != 1 || d->pl != 1 || d->ih != h2 || d->iw != w2 || d->oh != h2 || d->ow != w2 ||
        d->tail || d->se_layers || d->scale_add || d->res || d->res_mid || d->x_f32 ||
        d->y_f32 || !d->w || !d->w2)
        return;
    if (c3->kind != KR_STEP_CONV || c3->kh != 1 || c3->kw != 1 || c3->sh != 1 || c3->sw != 1 ||
        c3->pt || c3->pl || c3->x != d->y || c3->ic != d->oc || c3->oc != c ||
        c3->ih != h2 || c3->iw != w2 || c3->se_layers || c3->scale_add || c3->rz || c3->tail ||
        c3->x_f32 || c3->y_f32 || c3->res_c || (c3->res && c3->res != c1->y) || !c3->w ||
        c3->y != steps[i - 1].x)
        return;
    const int e = d->oc, ic = c1->ic;
    if (2 * w2 * e > ep_floats(seg) || 2 * w2 * c > KR_CUDA_SEG_W * kr_seg_emax(seg))
        return; /* (the stage buffer: try_at, once the stages are laid out) */
    int lo, hi;
    node_range(g, steps, n, i - 4, 3, &lo, &hi);
    if (lo < 0 || hi < lo || leaks(g, lo, hi))
        return;
    /* its output (written in the kernel) must not lie on another item's input, which that
     * item's cluster may not have read yet */
    const size_t in_b = (size_t)h2 * w2 * ic * esize, out_b = (size_t)h2 * w2 * c * esize;
    for (int a = 0; a < seg->batch; a++)
        for (int b = 0; b < seg->batch; b++)
            if (a != b && overlap((const char *)c3->y + a * out_b, out_b,
                                  (const char *)c1->x + b * in_b, in_b))
                return;
    seg->e_ic = ic;
    seg->e_e = e;
    seg->e1_lo = c1->lo, seg->e1_hi = c1->hi, seg->e1_post = c1->post;
    seg->e3_lo = c3->lo, seg->e3_hi = c3->hi, seg->e3_post = c3->post;
    seg->e3_res = c3->res != NULL;
    seg->e3_res_pre = c3->res_pre;
    seg->ed.e = e;
    seg->ed.e_lo = d->e_lo, seg->ed.e_hi = d->e_hi, seg->ed.e_post = d->e_post;
    seg->ed.lo = d->lo, seg->ed.hi = d->hi, seg->ed.post = d->post;
    seg->e_y = c3->y;
}

/* The stages' packed weights: their offsets and sizes, the largest, the total (S with E's
 * after it, P0, the pairs; Q and U are added by take_q and take_u). */
static void layout_stages(kr_cuda_segment *seg)
{
    const int s0 = seg->s_ic > 0, c = seg->c, k = seg->k;
    int off = 0, big = 0;
    for (int s = 0; s <= s0 + seg->n_ir; s++) {
        int f;
        if (s < s0) {
            seg->sd.w_off = off;
            f = dw_floats(seg->s_ic, seg->sd.e, k);
            seg->e_w_off = off + f;
            if (seg->e_ic)
                f += e_floats(seg->e_ic, seg->s_ic, seg->e_e);
        } else if (s == s0) {
            f = proj_floats(seg->p0.ci, seg->p0.hid, c);
        } else {
            kr_cuda_seg_dw *d = &seg->d[s - s0 - 1];
            d->w_off = off;
            seg->p[s - s0 - 1].w_off = off + dw_floats(c, d->e, k);
            f = dw_floats(c, d->e, k) + proj_floats(d->e, seg->p[s - s0 - 1].hid, c);
        }
        seg->stage_off[s] = off;
        seg->stage_floats[s] = f;
        off += f;
        big = f > big ? f : big;
    }
    seg->buf_floats = big;
    seg->weight_floats = (size_t)off;
}

/* The segment's first step, its step count so far (S, P0, the pairs), its input, P0's sums and
 * the stages, for P0 at @p steps[i] with S or without (seg->s_ic). */
static void set_start(kr_cuda_segment *seg, const kr_cuda_step *steps, int i)
{
    const int s0 = seg->s_ic > 0;
    const kr_cuda_step *p0 = &steps[i];
    const int e3 = seg->e_ic ? 3 : 0; /* E's steps */
    seg->first = i - s0 - e3;
    seg->count = e3 + s0 + 1 + 2 * seg->n_ir;
    seg->x = e3 ? steps[i - 4].x : s0 ? steps[i - 1].x : p0->x;
    seg->x_sums = s0 ? NULL : p0->se_partial;
    seg->x_slices = s0 ? 0 : p0->se_slices;
    seg->x_pixels = s0 ? 0 : p0->se_pixels;
    layout_stages(seg);
}

/* Adds Q (step @p s) to @p seg where it is one, its weights fit a stage buffer (as they do for
 * every shipped model; the buffer is not grown for it), its output row fits the expanded rows'
 * buffer, which holds it in the kernel, and its output lies on no other item's input. */
static void take_q(kr_cuda_segment *seg, const kr_cuda_step *s, size_t esize)
{
    const int c = seg->c;
    if (!is_q(s, seg->h, c, seg->y) || q_floats(c, s->oc) > seg->buf_floats ||
        KR_CUDA_SEG_W * s->oc > ep_floats(seg))
        return;
    const size_t in_b = in_bytes(seg, esize);
    const size_t out_b = (size_t)seg->h * KR_CUDA_SEG_W * s->oc * esize;
    for (int a = 0; a < seg->batch; a++)
        for (int b = 0; b < seg->batch; b++)
            if (a != b && overlap((const char *)s->y + a * out_b, out_b,
                                  (const char *)seg->x + b * in_b, in_b))
                return;
    const int st = (seg->s_ic > 0) + seg->n_ir + 1;
    seg->q_oc = s->oc;
    seg->q_lo = s->lo;
    seg->q_hi = s->hi;
    seg->q_post = s->post;
    seg->y2 = s->y;
    seg->stage_off[st] = (int)seg->weight_floats;
    seg->stage_floats[st] = q_floats(c, s->oc);
    seg->weight_floats += (size_t)seg->stage_floats[st];
    seg->count++;
}

static int u_floats(const kr_cuda_segment *seg)
{
    int o[KR_SEG_U_N + 1];
    kr_seg_u_layout(seg->c, seg->q_oc, seg->u_c, seg->u_hid, seg->u_e, seg->v_oc, seg->w_hid,
                    seg->w_e, o);
    return o[KR_SEG_U_N];
}

/* Adds U (segment.h) to @p seg, which has Q, where steps[end..end + 3) are it (end: the step
 * after Q): a RESIZE x2 of Q's output (rows 2r, 2r + 1 from rows r - 1 .. r + 1: no
 * align_corners) scaled by a one-layer excitation of the last P's pool tail; a 1x1
 * convolution of that whose pool tail adds the skip; an EXPAND_DW of the skip scaled by the
 * excitation of that tail plus the convolution's output (scale_add), 3x3 "same", stride 1,
 * whose output is the depthwise's plus its input (res_mid) or the depthwise's alone. Only
 * where its weights fit a stage buffer, its activations the buffers it borrows, no step after
 * it reads what the segment no longer writes (y, y2, the pools' sums, the tensors between),
 * and its output lies on no other item's skip (other clusters read theirs meanwhile). */
static void take_u(const kr_graph *g, kr_cuda_segment *seg, const kr_cuda_step *steps, int n,
                   size_t esize)
{
    const int end = seg->first + seg->count, h = seg->h, w = KR_CUDA_SEG_W, c = seg->c;
    const int qo = seg->q_oc;
    if (!qo || !seg->y_sums || end + 3 > n)
        return;
    const kr_cuda_step *r = &steps[end], *cv = &steps[end + 1], *ed = &steps[end + 2];
    const kr_cuda_step *last_p = &steps[end - 2];
    if (r->kind != KR_STEP_RESIZE || r->x != seg->y2 || r->align || r->ih != h || r->iw != w ||
        r->oh != 2 * h || r->ow != 2 * w || r->ic != qo || r->oc != qo || r->se_layers != 1 ||
        r->se_partial != seg->y_sums || r->se_slices != seg->y_slices || r->se_c != c ||
        r->se_out[0] != qo || r->res || r->tail || r->post != KR_CUDA_POST_NONE ||
        r->lo > -3e38f || r->hi < 3e38f || r->x_f32 || r->y_f32 || !r->se_w[0])
        return;
    if (cv->kind != KR_STEP_CONV || cv->kh != 1 || cv->kw != 1 || cv->sh != 1 || cv->sw != 1 ||
        cv->pt || cv->pl || cv->x != r->y || cv->ic != qo || cv->ih != 2 * h ||
        cv->iw != 2 * w || cv->oh != 2 * h || cv->ow != 2 * w || !ok_channels(cv->oc) ||
        cv->se_layers || cv->scale_add || cv->res || cv->rz || cv->x_f32 || cv->y_f32 ||
        !cv->tail || !cv->tail_add || cv->tail_c != cv->oc || !cv->w)
        return;
    const int uc = cv->oc;
    if (ed->kind != KR_STEP_EXPAND_DW || ed->x != cv->tail_add || ed->scale_add != cv->y ||
        ed->se_layers != 2 || ed->se_partial_off != cv->tail_partial_off ||
        ed->se_slices != cv->tail_slices || ed->se_c != uc || ed->se_out[1] != uc ||
        !ok_channels(ed->se_out[0]) || ed->ic != uc || !ok_channels(ed->oc) || ed->kh != 3 ||
        ed->kw != 3 || ed->sh != 1 || ed->sw != 1 || ed->dh != 1 || ed->dw != 1 ||
        ed->pt != 1 || ed->pl != 1 || ed->ih != 2 * h || ed->iw != 2 * w || ed->oh != 2 * h ||
        ed->ow != 2 * w || ed->res || ed->tail || ed->x_f32 || ed->y_f32 || !ed->w || !ed->w2 ||
        (ed->res_mid && ed->oc != ed->ic))
        return;
    const int ue = ed->oc, emax = kr_seg_emax(seg);
    if (qo > emax || uc > emax || ed->se_out[0] > emax)
        return;
    /* what the kernel no longer writes: y, y2 and the tensors between them and U's output
     * (node range), the pools' sums */
    kr_cuda_segment u = *seg;
    u.count += 3;
    int lo, hi;
    const int e3 = seg->e_ic ? 3 : 0; /* (E's output, the skip, is written) */
    node_range(g, steps, n, u.first + e3, u.count - e3, &lo, &hi);
    if (lo < 0 || hi < lo || leaks(g, lo, hi) ||
        sums_read(steps, end + 3, n, last_p->tail_partial_off) ||
        sums_read(steps, end + 3, n, cv->tail_partial_off))
        return;
    u.u_c = uc;
    u.u_e = ue;
    u.u_hid = ed->se_out[0];
    if (u_floats(&u) > seg->buf_floats)
        return;
    int om[KR_SEG_UM_N + 1];
    kr_seg_u_smem_layout(c, qo, uc, ue, om);
    if (om[KR_SEG_UM_N] > ep_floats(seg))
        return;
    if ((uintptr_t)ed->x % 16 || (uintptr_t)ed->y % 16) /* the skip's rows: one bulk copy */
        return;
    const size_t skip_b = (size_t)(2 * h) * (2 * w) * uc * esize;
    const size_t out_b = (size_t)(2 * h) * (2 * w) * ue * esize;
    for (int a = 0; a < seg->batch; a++)
        for (int b = 0; b < seg->batch; b++)
            if (a != b && (overlap((const char *)ed->y + a * out_b, out_b,
                                   (const char *)ed->x + b * skip_b, skip_b) ||
                           overlap((const char *)ed->y + a * out_b, out_b,
                                   (const char *)seg->x + b * in_bytes(seg, esize),
                                   in_bytes(seg, esize))))
                return;
    u.u_align = r->align;
    u.u_half = r->half;
    u.u_se_lo = r->se_lo[0];
    u.u_se_hi = r->se_hi[0];
    u.u_se_post = r->se_post[0];
    u.u_lo = cv->lo;
    u.u_hi = cv->hi;
    u.u_post = cv->post;
    set_expand(&u.up, ed);
    u.u_dlo = ed->lo;
    u.u_dhi = ed->hi;
    u.u_dpost = ed->post;
    u.u_res_mid = ed->res_mid;
    u.u_skip = ed->x;
    u.y3 = ed->y;
    u.shared_out = 0; /* y is not written */
    const int st = (seg->s_ic > 0) + seg->n_ir + 2;
    u.stage_off[st] = (int)seg->weight_floats;
    u.stage_floats[st] = u_floats(&u);
    u.weight_floats += (size_t)u.stage_floats[st];
    *seg = u;
}

/* Adds V (segment.h) to @p seg, which has U, where the step after U is it: a 1x1 convolution
 * that resizes U's output x2 as it loads it (rz; no align_corners) to 4h x 4W, nothing else
 * folded in but a pool tail with an addend and a slice per output row; U's output is read by
 * nothing else, V's weights fit U's stage buffer with U's, its activations EP (U's output rows
 * in a's place), and V's output lies on nothing another item's cluster reads (its input, skip,
 * V's addend) nor on its own addend. */
static void take_v(const kr_graph *g, kr_cuda_segment *seg, const kr_cuda_step *steps, int n,
                   size_t esize)
{
    const int end = seg->first + seg->count, h = seg->h, w = KR_CUDA_SEG_W;
    if (!seg->u_c || end >= n || seg->u_e > seg->u_c)
        return;
    const kr_cuda_step *v = &steps[end];
    if (v->kind != KR_STEP_CONV || !v->rz || v->align || v->rz_ih != 2 * h ||
        v->rz_iw != 2 * w || v->x != seg->y3 || v->ic != seg->u_e || v->kh != 1 || v->kw != 1 ||
        v->sh != 1 || v->sw != 1 || v->pt || v->pl || v->oh != 4 * h || v->ow != 4 * w ||
        !ok_channels(v->oc) || v->oc > kr_seg_emax(seg) || v->se_layers || v->scale_add ||
        v->res || v->x_f32 || v->y_f32 || !v->tail || !v->tail_add || v->tail_c != v->oc ||
        v->tail_slices != 4 * h || v->tail_pixels != 4 * w || !v->w ||
        (uintptr_t)v->tail_add % 16 || (uintptr_t)v->y % 16 || v->node < 0)
        return;
    int lo, hi; /* U's output and the resize's, read by nothing after V's convolution */
    const int e3 = seg->e_ic ? 3 : 0;
    node_range(g, steps, n, seg->first + e3, seg->count - e3, &lo, &hi);
    hi = v->node;
    if (lo < 0 || hi < lo || leaks(g, lo, hi))
        return;
    kr_cuda_segment d = *seg;
    d.v_oc = v->oc;
    const int st = (seg->s_ic > 0) + seg->n_ir + 2;
    if (u_floats(&d) > seg->buf_floats)
        return;
    int om[KR_SEG_UM_N + 1];
    kr_seg_u_smem_layout(seg->c, seg->q_oc, seg->u_c, seg->u_e, om);
    const int rows = 4 * (4 * w) * v->oc; /* V's addend's rows, V's output rows */
    if (rows > om[KR_SEG_UM_A] || om[KR_SEG_UM_P] + rows > ep_floats(seg))
        return;
    const size_t in_b = in_bytes(seg, esize), out_b = (size_t)rows * h * esize;
    const size_t skip_b = (size_t)(2 * h) * (2 * w) * seg->u_c * esize;
    for (int a = 0; a < seg->batch; a++)
        for (int b = 0; b < seg->batch; b++) {
            const char *y = (const char *)v->y + a * out_b;
            if (overlap(y, out_b, (const char *)v->tail_add + b * out_b, out_b) ||
                (a != b && (overlap(y, out_b, (const char *)seg->x + b * in_b, in_b) ||
                            overlap(y, out_b, (const char *)seg->u_skip + b * skip_b, skip_b))))
                return;
        }
    d.v_half = v->half;
    d.v_lo = v->lo;
    d.v_hi = v->hi;
    d.v_post = v->post;
    d.v_skip = v->tail_add;
    d.v_y = v->y;
    d.v_sums = v->tail_partial;
    d.count++;
    d.stage_floats[st] = u_floats(&d);
    d.weight_floats += (size_t)(d.stage_floats[st] - seg->stage_floats[st]);
    *seg = d;
}

/* Adds W (segment.h) to @p seg, which has V, where the step after V is it: an EXPAND_DW of
 * V's addend scaled by the two-layer excitation of V's pool tail plus V's output (scale_add),
 * 3x3 "same", stride 1, plus its input (res_mid) or nothing; V's output and sums read by
 * nothing else; its weights fit U's stage buffer with U's and V's, its expanded rows Q's;
 * W's output lies on nothing another item's cluster reads (its input, skip, V's addend) nor on
 * its own item's V addend. */
static void take_w(const kr_graph *g, kr_cuda_segment *seg, const kr_cuda_step *steps, int n,
                   size_t esize)
{
    const int end = seg->first + seg->count, h = seg->h, w = KR_CUDA_SEG_W;
    if (!seg->v_oc || end >= n)
        return;
    const kr_cuda_step *v = &steps[end - 1], *d = &steps[end];
    const int vo = seg->v_oc;
    if (d->kind != KR_STEP_EXPAND_DW || d->x != v->tail_add || d->scale_add != v->y ||
        d->se_layers != 2 || d->se_partial_off != v->tail_partial_off ||
        d->se_slices != v->tail_slices || d->se_c != vo || d->se_out[1] != vo ||
        !ok_channels(d->se_out[0]) || d->se_out[0] > kr_seg_emax(seg) || d->ic != vo ||
        !ok_channels(d->oc) || d->kh != 3 || d->kw != 3 || d->sh != 1 || d->sw != 1 ||
        d->dh != 1 || d->dw != 1 || d->pt != 1 || d->pl != 1 || d->ih != 4 * h ||
        d->iw != 4 * w || d->oh != 4 * h || d->ow != 4 * w || d->res || d->tail || d->x_f32 ||
        d->y_f32 || !d->w || !d->w2 || (d->res_mid && d->oc != d->ic) || d->oc > vo)
        return;
    int lo, hi;
    const int e3 = seg->e_ic ? 3 : 0; /* (E's output, the skip, is written) */
    node_range(g, steps, n, seg->first + e3, seg->count - e3 + 1, &lo, &hi);
    if (lo < 0 || hi < lo || leaks(g, lo, hi) || sums_read(steps, end + 1, n, v->tail_partial_off))
        return;
    kr_cuda_segment x = *seg;
    x.w_e = d->oc;
    x.w_hid = d->se_out[0];
    const int st = (seg->s_ic > 0) + seg->n_ir + 2;
    if (u_floats(&x) > seg->buf_floats || 6 * (4 * w) * d->oc > seg->buf_floats)
        return;
    const size_t out_b = (size_t)(4 * h) * (4 * w) * d->oc * esize;
    const size_t add_b = (size_t)(4 * h) * (4 * w) * vo * esize, in_b = in_bytes(seg, esize);
    const size_t skip_b = (size_t)(2 * h) * (2 * w) * seg->u_c * esize;
    for (int a = 0; a < seg->batch; a++)
        for (int b = 0; b < seg->batch; b++) {
            const char *y = (const char *)d->y + a * out_b;
            if (overlap(y, out_b, (const char *)v->tail_add + b * add_b, add_b) ||
                (a != b && (overlap(y, out_b, (const char *)seg->x + b * in_b, in_b) ||
                            overlap(y, out_b, (const char *)seg->u_skip + b * skip_b, skip_b))))
                return;
        }
    set_expand(&x.wp, d);
    x.w_dlo = d->lo;
    x.w_dhi = d->hi;
    x.w_dpost = d->post;
    x.w_res_mid = d->res_mid;
    x.w_y = d->y;
    x.count++;
    x.stage_floats[st] = u_floats(&x);
    x.weight_floats += (size_t)(x.stage_floats[st] - seg->stage_floats[st]);
    *seg = x;
}

static int y_floats(const kr_cuda_segment *seg)
{
    int o[KR_SEG_Y_N + 1];
    kr_seg_y_layout(seg->w_e, seg->y_oc, seg->yp.hid, seg->y_c, seg->z_oc, o);
    return o[KR_SEG_Y_N];
}

/* Whether Y2's excitation (segment.h) is @p s's: two dense layers of Y1's pool tail
 * (@p cv: its sums, slices and channels), applied to Y1's addend, plus Y1's output. */
static int y_excited(const kr_cuda_step *s, const kr_cuda_step *cv)
{
    return s->se_layers == 2 && s->se_partial_off == cv->tail_partial_off &&
           s->se_slices == cv->tail_slices && s->se_c == cv->oc && s->se_out[1] == cv->oc &&
           ok_channels(s->se_out[0]) && s->x == cv->tail_add && s->scale_add == cv->y &&
           s->ic == cv->oc && s->kh == s->kw && s->sh == 1 && s->sw == 1 && s->ih == cv->oh &&
           s->iw == cv->ow && s->oh == cv->oh && s->ow == cv->ow && !s->rz && !s->tail &&
           !s->x_f32 && !s->y_f32 && s->w;
}

/* Adds Y and Z (segment.h) to @p seg, which has W, where the steps after W are they: the 1x1
 * convolution of W's output resized x2 as it loads it (rz, no align_corners) to 8h x 8W with
 * a pool tail plus an addend; the excited 1x1 convolution of that addend (plus its output) and
 * the 3x3 depthwise of its output plus that output, as two steps or one EXPAND_DW (res_mid);
 * the 2x2 stride-2 transpose convolution of the depthwise output, nothing read after it but
 * its output. Only in the kernel's instance (16 channels, one output channel), where the
 * weights fit U's stage buffer with U's, V's and W's, the activations the dead regions that
 * kr_seg_yf_layout names, and the output lies on nothing another item's cluster reads. */
static void take_y(const kr_graph *g, kr_cuda_segment *seg, const kr_cuda_step *steps, int n,
                   size_t esize)
{
    const int end = seg->first + seg->count, h = seg->h, w = KR_CUDA_SEG_W;
    if (!seg->w_e || end + 3 > n || seg->batch < KR_CUDA_SEG_Y_MIN_BATCH)
        return;
    const kr_cuda_step *cv = &steps[end], *c2 = &steps[end + 1];
    if (cv->kind != KR_STEP_CONV || !cv->rz || cv->align || cv->rz_ih != 4 * h ||
        cv->rz_iw != 4 * w || cv->x != seg->w_y || cv->ic != seg->w_e || cv->kh != 1 ||
        cv->kw != 1 || cv->sh != 1 || cv->sw != 1 || cv->pt || cv->pl || cv->oh != 8 * h ||
        cv->ow != 8 * w || cv->se_layers || cv->scale_add || cv->res || cv->x_f32 ||
        cv->y_f32 || !cv->tail || !cv->tail_add || cv->tail_c != cv->oc || !cv->w ||
        (uintptr_t)cv->tail_add % 16 || cv->node < 0)
        return;
    /* its pool's slices: whole ones in a block's rows, a pixel per block_colsum lane */
    const int px = 8 * (8 * w), tp = cv->tail_pixels;
    if (tp <= 0 || px % tp || tp > KR_CUDA_PERSISTENT_THREADS / (cv->oc / 4) ||
        cv->tail_slices != h * (px / tp) || c2->se_pixels != h * px)
        return;
    /* Y2: CONV then DEPTHWISE, or one EXPAND_DW */
    const int fused = c2->kind == KR_STEP_EXPAND_DW;
    const kr_cuda_step *dw = fused ? c2 : &steps[end + 2], *tc = dw + 1;
    if (tc - steps >= n || !y_excited(c2, cv))
        return;
    if (fused) {
        if (c2->kh != 3 || c2->dh != 1 || c2->dw != 1 || c2->pt != 1 || c2->pl != 1 ||
            c2->res || !c2->w2 || (c2->res_mid && c2->oc != c2->ic))
            return;
    } else {
        if (c2->kind != KR_STEP_CONV || c2->kh != 1 || c2->group != 4 || c2->split != 1 ||
            c2->pt || c2->pl || c2->res || c2->res_c || !ok_channels(c2->oc))
            return;
        if (dw->kind != KR_STEP_DEPTHWISE || dw->x != c2->y || dw->ic != c2->oc ||
            dw->oc != c2->oc || dw->kh != 3 || dw->kw != 3 || dw->sh != 1 || dw->sw != 1 ||
            dw->dh != 1 || dw->dw != 1 || dw->pt != 1 || dw->pl != 1 || dw->ih != 8 * h ||
            dw->iw != 8 * w || dw->oh != 8 * h || dw->ow != 8 * w ||
            (dw->res && dw->res != c2->y) || dw->res_c || dw->tail || dw->se_layers ||
            dw->x_f32 || dw->y_f32 || !dw->w)
            return;
    }
    if (tc->kind != KR_STEP_TCONV || tc->x != dw->y || tc->ic != dw->oc || tc->kh != 2 ||
        tc->kw != 2 || tc->sh != 2 || tc->sw != 2 || tc->pt || tc->pl || tc->ih != 8 * h ||
        tc->iw != 8 * w || tc->oh != 16 * h || tc->ow != 16 * w || tc->res || tc->tail ||
        tc->x_f32 || !tc->w)
        return;
    /* the kernel's one instance */
    if (seg->w_e != 16 || cv->oc != 16 || dw->oc != 16 || tc->oc != 1)
        return;
    /* nothing after the transpose convolution reads what the segment keeps */
    int lo, hi;
    const int e3 = seg->e_ic ? 3 : 0; /* (E's output, the skip, is written) */
    const int count = seg->count + (int)(tc - cv) + 1;
    node_range(g, steps, n, seg->first + e3, count - e3, &lo, &hi);
    if (lo < 0 || hi < lo || leaks(g, lo, hi) ||
        sums_read(steps, (int)(tc - steps) + 1, n, cv->tail_partial_off))
        return;
    kr_cuda_segment x = *seg;
    x.y_oc = cv->oc;
    x.y_c = dw->oc;
    x.z_oc = tc->oc;
    if (fused) {
        set_expand(&x.yp, c2);
    } else {
        set_proj(&x.yp, c2);
        x.yp.res = 0;
    }
    const int st = (seg->s_ic > 0) + seg->n_ir + 2;
    const int uf = u_floats(&x) + y_floats(&x);
    int so[KR_SEG_SM_N + 1], yf[KR_SEG_YF_N + 1];
    kr_seg_smem_layout(&x, so);
    kr_seg_yf_layout(x.y_oc, x.y_c, esize, yf);
    const int w8 = 8 * w, rest = seg->buf_floats - uf; /* "H" */
    if (uf > seg->buf_floats || so[KR_SEG_SM_MEAN] - so[KR_SEG_SM_XIN] < 8 * w8 * x.y_oc ||
        yf[KR_SEG_YF_N] > seg->buf_floats || rest < 6 * (4 * w) * seg->w_e ||
        rest < w8 * x.y_c || (px / tp) * x.y_oc > w8 * x.y_c ||
        rest < h * (px / tp) * x.y_oc)
        return;
    /* its output must not lie on what another item's cluster may still read */
    if (!tc->y_f32) {
        const size_t out_b = (size_t)(16 * h) * (16 * w) * tc->oc * esize;
        const size_t in_b = in_bytes(seg, esize);
        const size_t uskip_b = (size_t)(2 * h) * (2 * w) * seg->u_c * esize;
        const size_t vskip_b = (size_t)(4 * h) * (4 * w) * seg->v_oc * esize;
        const size_t yskip_b = (size_t)8 * h * w8 * x.y_oc * esize;
        for (int a = 0; a < seg->batch; a++)
            for (int b = 0; b < seg->batch; b++) {
                const char *y = (const char *)tc->y + a * out_b;
                if (a != b &&
                    (overlap(y, out_b, (const char *)seg->x + b * in_b, in_b) ||
                     overlap(y, out_b, (const char *)seg->u_skip + b * uskip_b, uskip_b) ||
                     overlap(y, out_b, (const char *)seg->v_skip + b * vskip_b, vskip_b) ||
                     overlap(y, out_b, (const char *)cv->tail_add + b * yskip_b, yskip_b)))
                    return;
            }
    }
    x.y_half = cv->half;
    x.y_tail = tp;
    x.y_lo = cv->lo;
    x.y_hi = cv->hi;
    x.y_post = cv->post;
    x.y_skip = cv->tail_add;
    x.y_dlo = dw->lo;
    x.y_dhi = dw->hi;
    x.y_dpost = dw->post;
    x.y_dbf = fused;
    x.y_res = fused ? dw->res_mid : dw->res != NULL;
    x.z_lo = tc->lo;
    x.z_hi = tc->hi;
    x.z_post = tc->post;
    x.z_f32 = tc->y_f32;
    x.z_y = tc->y;
    x.count = count;
    x.stage_floats[st] = uf;
    x.weight_floats += (size_t)(uf - seg->stage_floats[st]);
    *seg = x;
}

/* The segment starting at step @p i, or 0 with @p why. */
static int try_at(const kr_graph *g, const kr_cuda_step *steps, int n, int i, size_t esize,
                  kr_cuda_segment *seg, const char **why)
{
    const kr_cuda_step *p0 = &steps[i];
    const int h = p0->oh, c = p0->oc;
    memset(seg, 0, sizeof(*seg));
    if (h < 2 || h > KR_CUDA_SEG_MAX_ROWS) {
        *why = "an image of fewer than 2 rows or more rows than a cluster has blocks";
        return 0;
    }
    int j = i + 1, k = 0;
    while (seg->n_ir < KR_CUDA_SEG_MAX_IR && j + 1 < n) {
        const kr_cuda_step *d = &steps[j], *p = &steps[j + 1];
        const void *in = j == i + 1 ? p0->y : steps[j - 1].y;
        if (d->kind != KR_STEP_EXPAND_DW || d->sh != 1 || d->sw != 1 || d->dh != 1 ||
            d->dw != 1 || d->kh != d->kw || (d->kh != 3 && d->kh != 5) ||
            d->pt != d->kh / 2 || d->pl != d->kw / 2 || d->ih != h || d->oh != h ||
            d->iw != KR_CUDA_SEG_W || d->ow != KR_CUDA_SEG_W || d->ic != c ||
            !ok_channels(d->oc) || !d->tail || d->tail_c != d->oc || d->se_layers ||
            d->scale_add || d->res || d->res_mid || d->x_f32 || d->y_f32 || d->x != in ||
            !d->w || !d->w2 || (k && d->kh != k))
            break;
        if (!is_proj(p, h, 1, 1) || p->ic != d->oc || p->oc != c || p->x != d->y ||
            p->se_partial_off != d->tail_partial_off || p->se_slices != d->tail_slices ||
            (p->res && p->res != d->x) || sums_read(steps, j + 2, n, d->tail_partial_off))
            break;
        k = d->kh;
        seg->d[seg->n_ir].e = d->oc;
        seg->d[seg->n_ir].e_lo = d->e_lo;
        seg->d[seg->n_ir].e_hi = d->e_hi;
        seg->d[seg->n_ir].e_post = d->e_post;
        seg->d[seg->n_ir].lo = d->lo;
        seg->d[seg->n_ir].hi = d->hi;
        seg->d[seg->n_ir].post = d->post;
        set_proj(&seg->p[seg->n_ir], p);
        seg->n_ir++;
        j += 2;
        if (p->tail) { /* its output's pool: the segment ends here */
            if (p->tail_slices < h) { /* the kernel writes a row's sums per slice */
                *why = "the output's pool tail has fewer slices than the image has rows";
                return 0;
            }
            seg->y_sums = p->tail_partial;
            seg->y_slices = p->tail_slices;
            break;
        }
    }
    if (!seg->n_ir) {
        *why = "no pointwise + depthwise and excited projection pair follows";
        return 0;
    }
    seg->batch = p0->batch;
    seg->h = h;
    seg->c = c;
    seg->k = k;
    seg->f16 = esize == 2;
    seg->y = steps[i + 2 * seg->n_ir].y;
    set_proj(&seg->p0, p0);
    take_s(seg, steps, n, i, k);
    take_e(g, seg, steps, n, i, esize);
    set_start(seg, steps, i);
    /* E's input rows and window take a stage buffer, the window at its end, where S's own
     * rows (written before a cluster barrier) do not reach the rows the neighbours read */
    const int w2 = 2 * KR_CUDA_SEG_W;
    if (seg->e_ic && (w2 * (2 * seg->e_ic + 4 * seg->e_e) > seg->buf_floats ||
                      (seg->s_pt + 2) * w2 * seg->sd.e > seg->buf_floats - 3 * w2 * seg->e_e)) {
        seg->e_ic = 0;
        set_start(seg, steps, i);
    }
    /* S's window takes a stage buffer, and P0's weights the expanded rows' buffer meanwhile */
    if (seg->s_ic && (k * 2 * KR_CUDA_SEG_W * seg->sd.e > seg->buf_floats ||
                      seg->stage_floats[1] > ep_floats(seg))) {
        seg->s_ic = 0;
        seg->e_ic = 0;
        set_start(seg, steps, i);
    }
    if (kr_cuda_segment_smem(seg) > SEG_SMEM_MAX) {
        *why = "two stages' weights and the activations exceed a block's shared memory";
        return 0;
    }
    const int end = seg->first + seg->count; /* the first step after the pairs */
    /* only the last step's output leaves the segment, and it must not land on the input
     * (clusters of other images may still be reading theirs) */
    int lo, hi; /* (E's tensors were checked by take_e; its output, the skip, is written) */
    const int e3 = seg->e_ic ? 3 : 0;
    node_range(g, steps, n, seg->first + e3, seg->count - e3, &lo, &hi);
    if (seg->y_sums) { /* the last node: the global pool of the output, written as sums */
        if (hi <= lo || !kr_cuda_is_global_pool(g, &g->nodes[hi]) ||
            g->nodes[hi].inputs[0] != g->nodes[hi - 1].outputs[0]) {
            *why = "the pool tail is not the last node's global pool of the output";
            return 0;
        }
        hi--;
    }
    if (lo < 0 || hi < lo || leaks(g, lo, hi)) {
        *why = "a tensor inside the run is read after it";
        return 0;
    }
    /* an item's cluster reads all its input before any of its blocks writes output (cluster
     * barriers between), but clusters of different items may run at any time */
    const size_t in_b = in_bytes(seg, esize), out_b = (size_t)h * KR_CUDA_SEG_W * c * esize;
    for (int a = 0; a < seg->batch && !seg->shared_out; a++)
        for (int b = 0; b < seg->batch; b++)
            if (a != b && overlap((const char *)seg->y + a * out_b, out_b,
                                  (const char *)seg->x + b * in_b, in_b)) {
                seg->shared_out = 1;
                break;
            }
    if (end < n)
        take_q(seg, &steps[end], esize);
    take_u(g, seg, steps, n, esize);
    take_v(g, seg, steps, n, esize);
    take_w(g, seg, steps, n, esize);
    take_y(g, seg, steps, n, esize);
    return 1;
}

int kr_cuda_segment_find(const kr_graph *g, const kr_cuda_step *steps, int n, size_t esize,
                         kr_cuda_segment *seg, const char **why)
{
    *why = NULL;
    for (int i = 0; i + 2 < n; i++) {
        if (!is_proj(&steps[i], steps[i].oh, 0, 0) || steps[i].oh > KR_CUDA_SEG_MAX_ROWS)
            continue;
        const char *w = NULL;
        if (try_at(g, steps, n, i, esize, seg, &w))
            return 1;
        if (!*why)
            *why = w;
    }
    return 0;
}

/* @p rows x @p cols floats at device/step pointer @p src, through fetch, into @p to as they
 * are (transpose 0) or transposed ([cols][rows]); @p src NULL: zeros. */
static int put(float *to, const float *src, int rows, int cols, int transpose, float *tmp,
               int (*fetch)(void *, float *, const float *, size_t), void *ctx)
{
    size_t count = (size_t)rows * cols;
    if (!src) {
        memset(to, 0, count * sizeof(float));
        return 0;
    }
    if (!transpose)
        return fetch(ctx, to, src, count);
    int e = fetch(ctx, tmp, src, count);
    if (e)
        return e;
    for (int r = 0; r < rows; r++)
        for (int q = 0; q < cols; q++)
            to[(size_t)q * rows + r] = tmp[(size_t)r * cols + q];
    return 0;
}

/* A projection block's excitation at @p p (offsets @p op, kr_seg_proj_layout) from step @p s:
 * W1 [hid][c] and b1 [hid] as they are, W2 [c][hid] as it is (@p t2 0) or transposed to
 * [hid][c] (@p t2 1), b2 [c]. */
static int put_excitation(float *p, const int *op, const kr_cuda_step *s, int hid, int c, int t2,
                          float *tmp, int (*fetch)(void *, float *, const float *, size_t),
                          void *ctx)
{
    int e = put(p + op[KR_SEG_PJ_W1], s->se_w[0], hid, c, 0, tmp, fetch, ctx);
    if (!e)
        e = put(p + op[KR_SEG_PJ_B1], s->se_b[0], 1, hid, 0, tmp, fetch, ctx);
    if (!e)
        e = put(p + op[KR_SEG_PJ_W2], s->se_w[1], c, hid, t2, tmp, fetch, ctx);
    if (!e)
        e = put(p + op[KR_SEG_PJ_B2], s->se_b[1], 1, c, 0, tmp, fetch, ctx);
    return e;
}

static int pack_proj(float *dst, const kr_cuda_seg_proj *p, const kr_cuda_step *s, int c,
                     float *tmp, int (*fetch)(void *, float *, const float *, size_t), void *ctx)
{
    const int ci = p->ci, hid = p->hid;
    int o[KR_SEG_PJ_N + 1];
    kr_seg_proj_layout(ci, hid, c, o);
    float *w1 = dst + o[KR_SEG_PJ_W1], *b1 = dst + o[KR_SEG_PJ_B1], *w2 = dst + o[KR_SEG_PJ_W2];
    float *b2 = dst + o[KR_SEG_PJ_B2], *w = dst + o[KR_SEG_PJ_W], *b = dst + o[KR_SEG_PJ_B];
    int e = put(w1, s->se_w[0], hid, ci, 0, tmp, fetch, ctx); /* [hid][ci] */
    if (!e)
        e = put(b1, s->se_b[0], 1, hid, 0, tmp, fetch, ctx);
    if (!e) /* [ci][hid] -> [hid][ci] */
        e = put(w2, s->se_w[1], ci, hid, 1, tmp, fetch, ctx);
    if (!e)
        e = put(b2, s->se_b[1], 1, ci, 0, tmp, fetch, ctx);
    if (!e) /* [c][ci] -> [ci][c] */
        e = put(w, s->w, c, ci, 1, tmp, fetch, ctx);
    if (!e)
        e = put(b, s->bias, 1, c, 0, tmp, fetch, ctx);
    return e;
}

/* A D stage's (or S's) weights from EXPAND_DW step @p d, @p ci input channels, into @p at. */
static int pack_dw(float *at, const kr_cuda_step *d, int ci, int e, int k, float *tmp,
                   int (*fetch)(void *, float *, const float *, size_t), void *ctx)
{
    int o[KR_SEG_DW_N + 1];
    kr_seg_dw_layout(ci, e, k, o);
    int r = put(at + o[KR_SEG_DW_WE], d->w, e, ci, 1, tmp, fetch, ctx); /* [e][ci] -> [ci][e] */
    if (!r)
        r = put(at + o[KR_SEG_DW_BE], d->e_bias, 1, e, 0, tmp, fetch, ctx);
    if (!r) /* [k][k][e] */
        r = put(at + o[KR_SEG_DW_WD], d->w2, k * k, e, 0, tmp, fetch, ctx);
    if (!r)
        r = put(at + o[KR_SEG_DW_BD], d->bias2, 1, e, 0, tmp, fetch, ctx);
    return r;
}

int kr_cuda_segment_pack(const kr_cuda_segment *seg, const kr_cuda_step *steps, float *dst,
                         int (*fetch)(void *ctx, float *to, const float *src, size_t count),
                         void *ctx)
{
    memset(dst, 0, seg->weight_floats * sizeof(float)); /* the alignment gaps */
    float *tmp = malloc((size_t)KR_CUDA_SEG_MAX_C * KR_CUDA_SEG_MAX_C * sizeof(float));
    if (!tmp)
        return -1;
    const int c = seg->c, k = seg->k, s0 = seg->s_ic > 0;
    const kr_cuda_step *p0 = &steps[seg->first + (seg->e_ic ? 3 : 0) + s0];
    int e = 0;
    const int e3 = seg->e_ic ? 3 : 0;
    if (s0)
        e = pack_dw(dst + seg->sd.w_off, &steps[seg->first + e3], seg->s_ic, seg->sd.e, k, tmp,
                    fetch, ctx);
    if (!e && e3) { /* E: [c][ic] -> [ic][c]; the expand/depthwise as a D's; [c][e] -> [e][c] */
        const kr_cuda_step *c1 = &steps[seg->first], *d = c1 + 1, *c3 = c1 + 2;
        const int ic = seg->e_ic, sc = seg->s_ic, ee = seg->e_e;
        int o[KR_SEG_E_N + 1];
        kr_seg_e_layout(ic, sc, ee, o);
        float *at = dst + seg->e_w_off;
        e = put(at + o[KR_SEG_E_W1], c1->w, sc, ic, 1, tmp, fetch, ctx);
        if (!e)
            e = put(at + o[KR_SEG_E_B1], c1->bias, 1, sc, 0, tmp, fetch, ctx);
        if (!e)
            e = pack_dw(at + o[KR_SEG_E_WE], d, sc, ee, 3, tmp, fetch, ctx);
        if (!e)
            e = put(at + o[KR_SEG_E_W3], c3->w, sc, ee, 1, tmp, fetch, ctx);
        if (!e)
            e = put(at + o[KR_SEG_E_B3], c3->bias, 1, sc, 0, tmp, fetch, ctx);
    }
    if (!e)
        e = pack_proj(dst + seg->stage_off[s0], &seg->p0, p0, c, tmp, fetch, ctx);
    for (int i = 0; !e && i < seg->n_ir; i++) {
        const kr_cuda_step *d = p0 + 1 + 2 * i, *p = d + 1;
        e = pack_dw(dst + seg->d[i].w_off, d, c, seg->d[i].e, k, tmp, fetch, ctx);
        if (!e)
            e = pack_proj(dst + seg->p[i].w_off, &seg->p[i], p, c, tmp, fetch, ctx);
    }
    if (!e && seg->q_oc) { /* [oc][c] -> [c][oc] */
        const kr_cuda_step *q = &steps[seg->first + e3 + s0 + 1 + 2 * seg->n_ir];
        float *at = dst + seg->stage_off[s0 + seg->n_ir + 1];
        int o[KR_SEG_Q_N + 1];
        kr_seg_q_layout(c, seg->q_oc, o);
        e = put(at + o[KR_SEG_Q_W], q->w, seg->q_oc, c, 1, tmp, fetch, ctx);
        if (!e)
            e = put(at + o[KR_SEG_Q_B], q->bias, 1, seg->q_oc, 0, tmp, fetch, ctx);
    }
    if (!e && seg->u_c) {
        const kr_cuda_step *r = &steps[seg->first + e3 + s0 + 2 + 2 * seg->n_ir]; /* after Q */
        const kr_cuda_step *cv = r + 1, *ed = r + 2;
        float *at = dst + seg->stage_off[s0 + seg->n_ir + 2];
        const int qo = seg->q_oc, uc = seg->u_c, ue = seg->u_e, hid = seg->u_hid;
        int o[KR_SEG_U_N + 1], op[KR_SEG_PJ_N + 1];
        kr_seg_u_layout(c, qo, uc, hid, ue, seg->v_oc, seg->w_hid, seg->w_e, o);
        kr_seg_proj_layout(uc, hid, ue, op);
        float *p = at + o[KR_SEG_U_P];
        e = put(at + o[KR_SEG_U_SW], r->se_w[0], qo, c, 0, tmp, fetch, ctx); /* [qo][c] */
        if (!e)
            e = put(at + o[KR_SEG_U_SB], r->se_b[0], 1, qo, 0, tmp, fetch, ctx);
        if (!e) /* [uc][qo] -> [qo][uc] */
            e = put(at + o[KR_SEG_U_AW], cv->w, uc, qo, 1, tmp, fetch, ctx);
        if (!e)
            e = put(at + o[KR_SEG_U_AB], cv->bias, 1, uc, 0, tmp, fetch, ctx);
        if (!e) /* the expansion's excitation: [hid][uc], [hid], [uc][hid] -> [hid][uc], [uc] */
            e = put_excitation(p, op, ed, hid, uc, 1, tmp, fetch, ctx);
        if (!e) /* the expansion [ue][uc] -> [uc][ue] */
            e = put(p + op[KR_SEG_PJ_W], ed->w, ue, uc, 1, tmp, fetch, ctx);
        if (!e)
            e = put(p + op[KR_SEG_PJ_B], ed->e_bias, 1, ue, 0, tmp, fetch, ctx);
        if (!e) /* [3][3][ue] */
            e = put(at + o[KR_SEG_U_DW], ed->w2, 9, ue, 0, tmp, fetch, ctx);
        if (!e)
            e = put(at + o[KR_SEG_U_DB], ed->bias2, 1, ue, 0, tmp, fetch, ctx);
        if (!e && seg->v_oc) { /* V's convolution [v_oc][ue] -> [ue][v_oc] */
            const kr_cuda_step *v = ed + 1;
            e = put(at + o[KR_SEG_U_VW], v->w, seg->v_oc, ue, 1, tmp, fetch, ctx);
            if (!e)
                e = put(at + o[KR_SEG_U_VB], v->bias, 1, seg->v_oc, 0, tmp, fetch, ctx);
        }
        if (!e && seg->w_e) { /* W: the expansion's excitation and expansion as U's, its taps */
            const kr_cuda_step *wd = ed + 2;
            const int vo = seg->v_oc, we = seg->w_e, wh = seg->w_hid;
            int ow[KR_SEG_PJ_N + 1];
            kr_seg_proj_layout(vo, wh, we, ow);
            float *q = at + o[KR_SEG_U_WP];
            e = put(q + ow[KR_SEG_PJ_W1], wd->se_w[0], wh, vo, 0, tmp, fetch, ctx);
            if (!e)
                e = put(q + ow[KR_SEG_PJ_B1], wd->se_b[0], 1, wh, 0, tmp, fetch, ctx);
            if (!e)
                e = put(q + ow[KR_SEG_PJ_W2], wd->se_w[1], vo, wh, 1, tmp, fetch, ctx);
            if (!e)
                e = put(q + ow[KR_SEG_PJ_B2], wd->se_b[1], 1, vo, 0, tmp, fetch, ctx);
            if (!e)
                e = put(q + ow[KR_SEG_PJ_W], wd->w, we, vo, 1, tmp, fetch, ctx);
            if (!e)
                e = put(q + ow[KR_SEG_PJ_B], wd->e_bias, 1, we, 0, tmp, fetch, ctx);
            if (!e)
                e = put(at + o[KR_SEG_U_WD], wd->w2, 9, we, 0, tmp, fetch, ctx);
            if (!e)
                e = put(at + o[KR_SEG_U_WB], wd->bias2, 1, we, 0, tmp, fetch, ctx);
        }
        if (!e && seg->y_oc) { /* Y and Z after U's (kr_seg_y_layout) */
            const kr_cuda_step *y1 = ed + 3, *c2 = y1 + 1, *dw = seg->y_dbf ? c2 : c2 + 1;
            const kr_cuda_step *tc = dw + 1;
            const int ic = seg->w_e, oc = seg->y_oc, yc = seg->y_c, yh = seg->yp.hid;
            int oy[KR_SEG_Y_N + 1], op2[KR_SEG_PJ_N + 1];
            kr_seg_y_layout(ic, oc, yh, yc, seg->z_oc, oy);
            kr_seg_proj_layout(oc, yh, yc, op2);
            float *y = at + o[KR_SEG_U_N], *q = y + oy[KR_SEG_Y_P];
            e = put(y + oy[KR_SEG_Y_W1], y1->w, oc, ic, 1, tmp, fetch, ctx); /* -> [ic][oc] */
            if (!e)
                e = put(y + oy[KR_SEG_Y_B1], y1->bias, 1, oc, 0, tmp, fetch, ctx);
            if (!e) /* Y2's excitation: [hid][oc], [hid], [oc][hid], [oc] as they are */
                e = put_excitation(q, op2, c2, yh, oc, 0, tmp, fetch, ctx);
            if (!e) /* its convolution [yc][oc] -> [oc][yc] (EXPAND_DW: the pointwise half's) */
                e = put(q + op2[KR_SEG_PJ_W], c2->w, yc, oc, 1, tmp, fetch, ctx);
            if (!e)
                e = put(q + op2[KR_SEG_PJ_B], seg->y_dbf ? c2->e_bias : c2->bias, 1, yc, 0, tmp,
                        fetch, ctx);
            if (!e) /* the depthwise [3][3][yc] */
                e = put(y + oy[KR_SEG_Y_DW], seg->y_dbf ? dw->w2 : dw->w, 9, yc, 0, tmp, fetch,
                        ctx);
            if (!e)
                e = put(y + oy[KR_SEG_Y_DB], seg->y_dbf ? dw->bias2 : dw->bias, 1, yc, 0, tmp,
                        fetch, ctx);
            if (!e) /* Z [zo][2][2][yc] as it is */
                e = put(y + oy[KR_SEG_Y_ZW], tc->w, seg->z_oc, 4 * yc, 0, tmp, fetch, ctx);
            if (!e)
                e = put(y + oy[KR_SEG_Y_ZB], tc->bias, 1, seg->z_oc, 0, tmp, fetch, ctx);
        }
    }
    free(tmp);
    return e;
}
