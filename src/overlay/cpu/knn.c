/*
 * CPU kNN graph (knn_backend.h): the k nearest neighbours of every point from a uniform grid
 * (cell size from the point density; rings of cells searched outward until no unvisited cell
 * can hold a point nearer than the k-th found), then the candidate edges shortest first and the
 * degree cap with hysteresis, exactly as include/keyer/overlay.h states the rules.
 *
 * The grid finds the same neighbours as comparing every pair: the neighbours of a point are the
 * k smallest by (squared distance, index), and the search stops only when every unvisited point
 * is provably farther (with a margin for rounding) than the k-th neighbour found.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "overlay/knn_backend.h"

/* A candidate edge: point indices ia, ib (ids[ia] < ids[ib]), and its length. */
typedef struct cand {
    keyer_knn_edge e;
    int ia, ib;
    float len;
} cand;

typedef struct id_index {
    uint32_t id;
    int index;
} id_index;

/* The uniform grid over the frame's finite points. */
typedef struct grid {
    double x0, y0, s, inv; /* origin, cell side, 1 / side */
    int gx, gy;            /* cells across and down */
} grid;

typedef struct cpu_knn {
    keyer_knn_params p;
    int max_points;
    keyer_knn_edge *prev; /* previous frame's edges, in the order they were chosen */
    int *prev_at;         /* ... and the indices of their ends in that frame (2 per edge) */
    int n_prev;
    keyer_knn_edge *next; /* this frame's edges while they are chosen */
    int *next_at;
    float *knn_d2;        /* per point: k squared distances to its neighbours, nearest first */
    int *knn_j;           /* ... and the neighbours' indices */
    int *n_knn;           /* per point: neighbours found (< k when fewer are in reach) */
    cand *sorted;         /* the candidates while they are sorted */
    float *kth;           /* per point: distance to its k-th nearest neighbour (INFINITY: none) */
    int *degree;
    cand *cand;           /* candidate edges, n x k at most */
    int *nbr;             /* per point: indices of its kept neighbours (max_degree each) */
    id_index *by_id;      /* the points' ids, sorted, with their indices */
    int *cell_start;      /* per cell: first slot in cell_pts (cells + 1 entries) */
    int *cell_pts;        /* finite points' indices, by cell, ascending within a cell */
    int *pt_cell;         /* per point: its cell (-1: a non-finite coordinate) */
    int max_cells;
} cpu_knn;

static void cpu_destroy(void *state)
{
    cpu_knn *g = state;
    if (!g)
        return;
    free(g->prev);
    free(g->next);
    free(g->prev_at);
    free(g->next_at);
    free(g->knn_d2);
    free(g->knn_j);
    free(g->n_knn);
    free(g->sorted);
    free(g->kth);
    free(g->degree);
    free(g->cand);
    free(g->nbr);
    free(g->by_id);
    free(g->cell_start);
    free(g->cell_pts);
    free(g->pt_cell);
    free(g);
}

static keyer_status cpu_create(const keyer_knn_params *params, int max_points, void **state,
                               keyer_error *err)
{
    cpu_knn *g = calloc(1, sizeof(*g));
    if (!g)
        goto oom;
    g->p = *params;
    g->max_points = max_points;
    g->max_cells = max_points;
    size_t n = (size_t)max_points, k = (size_t)params->k;
    size_t max_edges = n * (size_t)params->max_degree;
    g->prev = malloc(max_edges * sizeof(keyer_knn_edge));
    g->next = malloc(max_edges * sizeof(keyer_knn_edge));
    g->prev_at = malloc(2 * max_edges * sizeof(int));
    g->next_at = malloc(2 * max_edges * sizeof(int));
    g->knn_d2 = malloc(n * k * sizeof(float));
    g->knn_j = malloc(n * k * sizeof(int));
    g->n_knn = malloc(n * sizeof(int));
    g->sorted = malloc(n * k * sizeof(cand));
    g->kth = malloc(n * sizeof(float));
    g->degree = malloc(n * sizeof(int));
    g->cand = malloc(n * k * sizeof(cand));
    g->nbr = malloc(max_edges * sizeof(int));
    g->by_id = malloc(n * sizeof(id_index));
    g->cell_start = malloc(((size_t)g->max_cells + 1) * sizeof(int));
    g->cell_pts = malloc(n * sizeof(int));
    g->pt_cell = malloc(n * sizeof(int));
    if (!g->prev || !g->next || !g->prev_at || !g->next_at || !g->knn_d2 || !g->knn_j ||
        !g->n_knn || !g->sorted || !g->kth || !g->degree || !g->cand || !g->nbr || !g->by_id ||
        !g->cell_start || !g->cell_pts || !g->pt_cell)
        goto oom;
    *state = g;
    return KEYER_OK;
oom:
    cpu_destroy(g);
    return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "knn graph: out of memory");
}

/* Squared distance of points i and j; infinite for a point with itself (or the same id) and
 * beyond max_dy vertically. */
static float dist2(const keyer_knn_params *p, const uint32_t *ids, const float *xy, int i, int j)
{
    float dx = xy[2 * j] - xy[2 * i], dy = xy[2 * j + 1] - xy[2 * i + 1];
    if (i == j || ids[i] == ids[j] || (p->max_dy > 0 && fabsf(dy) > p->max_dy))
        return INFINITY;
    return dx * dx + dy * dy;
}

/* Narrows [*lo, *hi], the extent of the m finite points' coordinate @p axis (0: x, 1: y), to
 * where most of them are, so that a few far points do not make every cell huge: twice, a
 * histogram of KNN_BINS bins over the extent, cut where fewer than 1% of the points in it lie
 * beyond on either side, kept when it is less than half as wide. Points outside the extent go
 * to the grid's border cells (the search's bounds stay valid: a cell beyond a side still holds
 * only points beyond that side). */
#define KNN_BINS 1024
static void robust_extent(const float *xy, int n, int axis, double *lo, double *hi)
{
    int hist[KNN_BINS];
    for (int pass = 0; pass < 2 && *hi > *lo; pass++) {
        const double bw = (*hi - *lo) / KNN_BINS;
        int in = 0;
        memset(hist, 0, sizeof(hist));
        for (int i = 0; i < n; i++) {
            double v = xy[2 * i + axis];
            if (!isfinite(xy[2 * i]) || !isfinite(xy[2 * i + 1]) || !(v >= *lo && v <= *hi))
                continue;
            double b = (v - *lo) / bw;
            hist[b >= KNN_BINS - 1 ? KNN_BINS - 1 : (int)b]++;
            in++;
        }
        int cut = in / 100, b0 = 0, b1 = KNN_BINS - 1;
        for (int sum = hist[0]; sum <= cut && b0 < KNN_BINS - 1;)
            sum += hist[++b0];
        for (int sum = hist[KNN_BINS - 1]; sum <= cut && b1 > 0;)
            sum += hist[--b1];
        if (b1 < b0 || (double)(b1 + 1 - b0) >= 0.5 * KNN_BINS)
            return;
        const double nlo = *lo + b0 * bw, nhi = *lo + (b1 + 1) * bw;
        *lo = nlo;
        *hi = nhi;
    }
}

/* Builds the grid over the points with finite coordinates: about two points per cell over
 * their extent (robust_extent), at most g->max_cells cells; fills cell_start, cell_pts and
 * pt_cell. */
static grid grid_build(cpu_knn *g, const float *xy, int n)
{
    grid gr = {0, 0, 1, 1, 1, 1};
    double x0 = INFINITY, y0 = INFINITY, x1 = -INFINITY, y1 = -INFINITY;
    int m = 0;
    for (int i = 0; i < n; i++) {
        double x = xy[2 * i], y = xy[2 * i + 1];
        if (!isfinite(x) || !isfinite(y))
            continue;
        m++;
        x0 = x < x0 ? x : x0;
        x1 = x > x1 ? x : x1;
        y0 = y < y0 ? y : y0;
        y1 = y > y1 ? y : y1;
    }
    if (m > 0) {
        robust_extent(xy, n, 0, &x0, &x1);
        robust_extent(xy, n, 1, &y0, &y1);
        double w = x1 - x0, h = y1 - y0;
        double target = m / 2 > 1 ? (double)(m / 2) : 1.0;
        if (target > g->max_cells)
            target = g->max_cells;
        double s = w * h > 0 ? sqrt(w * h / target) : fmax(w, h) > 0 ? fmax(w, h) / target : 1.0;
        for (;;) { /* gx * gy <= max_cells (s grows until it holds) */
            double cx = floor(w / s) + 1, cy = floor(h / s) + 1;
            if (cx * cy <= (double)g->max_cells) {
                gr.gx = (int)cx;
                gr.gy = (int)cy;
                break;
            }
            s *= 1.25;
        }
        gr.x0 = x0;
        gr.y0 = y0;
        gr.s = s;
        gr.inv = 1.0 / s;
    }
    int cells = gr.gx * gr.gy;
    memset(g->cell_start, 0, ((size_t)cells + 1) * sizeof(int));
    for (int i = 0; i < n; i++) {
        double x = xy[2 * i], y = xy[2 * i + 1];
        if (!isfinite(x) || !isfinite(y)) {
            g->pt_cell[i] = -1;
            continue;
        }
        /* Clamped before the conversion: points beyond the extent go to the border cells. */
        double fx = (x - gr.x0) * gr.inv, fy = (y - gr.y0) * gr.inv;
        int cx = fx < 0 ? 0 : fx >= gr.gx ? gr.gx - 1 : (int)fx;
        int cy = fy < 0 ? 0 : fy >= gr.gy ? gr.gy - 1 : (int)fy;
        g->pt_cell[i] = cy * gr.gx + cx;
        g->cell_start[g->pt_cell[i] + 1]++;
    }
    for (int c = 0; c < cells; c++)
        g->cell_start[c + 1] += g->cell_start[c];
    /* Scatter in index order (ascending within each cell), then shift the starts back. */
    for (int i = 0; i < n; i++)
        if (g->pt_cell[i] >= 0)
            g->cell_pts[g->cell_start[g->pt_cell[i]]++] = i;
    for (int c = cells; c > 0; c--)
        g->cell_start[c] = g->cell_start[c - 1];
    g->cell_start[0] = 0;
    return gr;
}

/* Offers point j (squared distance d2) to the k best of the point being searched, kept in
 * order of (squared distance, index); returns the new count. */
static int offer(float *best, int *best_j, int n_best, int k, float d2, int j)
{
    if (!(d2 < INFINITY))
        return n_best;
    if (n_best == k && !(d2 < best[k - 1] || (d2 == best[k - 1] && j < best_j[k - 1])))
        return n_best;
    int at = n_best < k ? n_best++ : k - 1;
    while (at > 0 && (best[at - 1] > d2 || (best[at - 1] == d2 && best_j[at - 1] > j))) {
        best[at] = best[at - 1];
        best_j[at] = best_j[at - 1];
        at--;
    }
    best[at] = d2;
    best_j[at] = j;
    return n_best;
}

/* Offers the points of cell c to point i's k best (@p best, @p best_j): dist2's arithmetic
 * (ids are distinct, so only i itself has i's id). */
static int scan_cell(const cpu_knn *g, const float *xy, int i, int c, int n_best, float *best,
                     int *best_j)
{
    const float xi = xy[2 * i], yi = xy[2 * i + 1], max_dy = g->p.max_dy;
    for (int q = g->cell_start[c]; q < g->cell_start[c + 1]; q++) {
        int j = g->cell_pts[q];
        float dx = xy[2 * j] - xi, dy = xy[2 * j + 1] - yi;
        if (j == i || (max_dy > 0 && fabsf(dy) > max_dy))
            continue;
        n_best = offer(best, best_j, n_best, g->p.k, dx * dx + dy * dy, j);
    }
    return n_best;
}

/* The k nearest neighbours of point i (a finite point) into g->knn_d2 / g->knn_j; returns how
 * many were found (fewer than k when fewer points are in reach). */
static int search(const cpu_knn *g, const grid *gr, const float *xy, int i)
{
    const keyer_knn_params *p = &g->p;
    const int k = p->k, ci = g->pt_cell[i] % gr->gx, cj = g->pt_cell[i] / gr->gx;
    const double x = xy[2 * i], y = xy[2 * i + 1];
    /* Slack for the rounding of cell positions. */
    const double eps = 1e-7 * (fabs(gr->x0) + fabs(gr->y0) + (gr->gx + gr->gy + 2) * gr->s);
    /* Rows that can hold a point within max_dy vertically. */
    int rlo = 0, rhi = gr->gy - 1;
    if (p->max_dy > 0) {
        double a = floor((y - p->max_dy - eps - gr->y0) * gr->inv);
        double b = floor((y + p->max_dy + eps - gr->y0) * gr->inv);
        rlo = a < 0 ? 0 : a > rhi ? rhi : (int)a;
        rhi = b < 0 ? 0 : b > rhi ? rhi : (int)b;
    }
    float *best = &g->knn_d2[(size_t)i * (size_t)k];
    int *best_j = &g->knn_j[(size_t)i * (size_t)k], n_best = 0;
    for (int r = 0;; r++) {
        int ylo = cj - r > rlo ? cj - r : rlo, yhi = cj + r < rhi ? cj + r : rhi;
        int xlo = ci - r > 0 ? ci - r : 0, xhi = ci + r < gr->gx - 1 ? ci + r : gr->gx - 1;
        for (int cy = ylo; cy <= yhi; cy++) {
            if (cy == cj - r || cy == cj + r) { /* a whole row of the ring */
                for (int cx = xlo; cx <= xhi; cx++)
                    n_best = scan_cell(g, xy, i, cy * gr->gx + cx, n_best, best, best_j);
                continue;
            }
            if (ci - r >= 0) /* its two sides */
                n_best = scan_cell(g, xy, i, cy * gr->gx + ci - r, n_best, best, best_j);
            if (ci + r < gr->gx)
                n_best = scan_cell(g, xy, i, cy * gr->gx + ci + r, n_best, best, best_j);
        }
        /* Unvisited cells lie beyond one of the block's sides that has cells behind it. */
        double lb = INFINITY;
        if (ci - r > 0)
            lb = fmin(lb, x - (gr->x0 + (ci - r) * gr->s));
        if (ci + r < gr->gx - 1)
            lb = fmin(lb, gr->x0 + (ci + r + 1) * gr->s - x);
        if (cj - r > rlo)
            lb = fmin(lb, y - (gr->y0 + (cj - r) * gr->s));
        if (cj + r < rhi)
            lb = fmin(lb, gr->y0 + (cj + r + 1) * gr->s - y);
        if (lb == INFINITY)
            return n_best; /* every reachable cell visited */
        lb -= eps;
        if (n_best == k && lb > 0 && lb * lb * (1 - 1e-5) > (double)best[k - 1])
            return n_best;
    }
}

static int cmp_id(const void *a, const void *b)
{
    const id_index *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* Equal lengths by ids (unique per frame), so the order never depends on the sort. */
static int cmp_cand_ids(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->e.a != y->e.a)
        return x->e.a < y->e.a ? -1 : 1;
    return (x->e.b > y->e.b) - (x->e.b < y->e.b);
}

static uint32_t len_bits(float len)
{
    uint32_t u;
    memcpy(&u, &len, sizeof(u));
    return u; /* lengths are >= +0 and finite: their bits sort as the numbers do */
}

/* Sorts g->cand[0..n) by (length, a, b): a stable radix sort on the length's bits (4 passes of
 * 8 bits through g->sorted), then each run of equal lengths by ids. */
static void sort_candidates(cpu_knn *g, int n)
{
    cand *src = g->cand, *dst = g->sorted;
    for (int shift = 0; shift < 32; shift += 8) {
        int count[257] = {0};
        for (int c = 0; c < n; c++)
            count[((len_bits(src[c].len) >> shift) & 255u) + 1]++;
        for (int b = 0; b < 256; b++)
            count[b + 1] += count[b];
        for (int c = 0; c < n; c++)
            dst[count[(len_bits(src[c].len) >> shift) & 255u]++] = src[c];
        cand *t = src;
        src = dst;
        dst = t;
    }
    /* Four passes: the result is back in g->cand. */
    for (int c = 0; c < n;) {
        int e = c + 1;
        while (e < n && g->cand[e].len == g->cand[c].len)
            e++;
        if (e - c > 1)
            qsort(&g->cand[c], (size_t)(e - c), sizeof(cand), cmp_cand_ids);
        c = e;
    }
}

/* The index of the point with id @p id in this frame (by_id sorted over n points), or -1;
 * @p hint is the index it had in the previous frame (tried first). */
static int index_of(const cpu_knn *g, const uint32_t *ids, int n, uint32_t id, int hint)
{
    if (hint >= 0 && hint < n && ids[hint] == id)
        return hint;
    id_index key = {id, 0};
    const id_index *hit = bsearch(&key, g->by_id, (size_t)n, sizeof(id_index), cmp_id);
    return hit ? hit->index : -1;
}

/* Whether points ia and ib are already joined in this frame's graph. */
static int joined(const cpu_knn *g, int ia, int ib)
{
    const int *nb = &g->nbr[(size_t)ia * (size_t)g->p.max_degree];
    for (int i = 0; i < g->degree[ia]; i++)
        if (nb[i] == ib)
            return 1;
    return 0;
}

/* Joins ia and ib (their degrees are below max_degree) as edge e of this frame. */
static void join(cpu_knn *g, int ia, int ib, keyer_knn_edge e, int *n_next)
{
    size_t md = (size_t)g->p.max_degree;
    g->nbr[(size_t)ia * md + (size_t)g->degree[ia]++] = ib;
    g->nbr[(size_t)ib * md + (size_t)g->degree[ib]++] = ia;
    g->next[*n_next] = e;
    g->next_at[2 * *n_next] = ia;
    g->next_at[2 * *n_next + 1] = ib;
    (*n_next)++;
}

/* Whether point i's neighbour list holds j. */
static int has_neighbour(const cpu_knn *g, int i, int j)
{
    const int *nb = &g->knn_j[(size_t)i * (size_t)g->p.k];
    for (int r = 0; r < g->n_knn[i]; r++)
        if (nb[r] == j)
            return 1;
    return 0;
}

static keyer_status cpu_update(void *state, const uint32_t *ids, const float *xy, int n,
                               keyer_knn_edge *edges, int capacity, int *count, void *stream,
                               keyer_error *err)
{
    (void)stream;
    cpu_knn *g = state;
    const keyer_knn_params *p = &g->p;
    const int k = p->k;
    /* Ids sorted (for the previous frame's edges); a repeated id is refused. */
    for (int i = 0; i < n; i++) {
        g->by_id[i].id = ids[i];
        g->by_id[i].index = i;
    }
    qsort(g->by_id, (size_t)n, sizeof(id_index), cmp_id);
    for (int i = 1; i < n; i++)
        if (g->by_id[i].id == g->by_id[i - 1].id)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "knn graph: id %u appears twice in one frame",
                                   (unsigned)g->by_id[i].id);
    /* k nearest per point. */
    grid gr = grid_build(g, xy, n);
    for (int i = 0; i < n; i++) {
        g->n_knn[i] = g->pt_cell[i] >= 0 ? search(g, &gr, xy, i) : 0;
        g->kth[i] = g->n_knn[i] > 0 ? sqrtf(g->knn_d2[(size_t)i * (size_t)k + (size_t)g->n_knn[i] - 1])
                                    : INFINITY;
    }
    /* One candidate per joined pair: from i when j is i's neighbour, unless i is also j's and
     * j has the smaller id (then from j). Both ends compute the same length. */
    int n_cand = 0;
    for (int i = 0; i < n; i++)
        for (int r = 0; r < g->n_knn[i]; r++) {
            int j = g->knn_j[(size_t)i * (size_t)k + (size_t)r];
            if (ids[j] < ids[i] && has_neighbour(g, j, i))
                continue;
            uint32_t a = ids[i], b = ids[j];
            cand c = {{a < b ? a : b, a < b ? b : a}, a < b ? i : j, a < b ? j : i,
                      sqrtf(g->knn_d2[(size_t)i * (size_t)k + (size_t)r])};
            g->cand[n_cand++] = c;
        }
    sort_candidates(g, n_cand);
    memset(g->degree, 0, (size_t)n * sizeof(int));
    int n_next = 0;
    /* 1. Keep previous edges that are still short enough (hysteresis), in their order. */
    for (int e = 0; e < g->n_prev; e++) {
        int ia = index_of(g, ids, n, g->prev[e].a, g->prev_at[2 * e]);
        int ib = index_of(g, ids, n, g->prev[e].b, g->prev_at[2 * e + 1]);
        if (ia < 0 || ib < 0 || joined(g, ia, ib))
            continue;
        float d = sqrtf(dist2(p, ids, xy, ia, ib));
        float bound = fmaxf(g->kth[ia], g->kth[ib]) * (1 + p->hysteresis);
        if (!isfinite(d) || d > bound || g->degree[ia] >= p->max_degree ||
            g->degree[ib] >= p->max_degree)
            continue;
        join(g, ia, ib, g->prev[e], &n_next);
    }
    /* 2. Add new candidate edges, shortest first, while degrees allow. */
    for (int c = 0; c < n_cand; c++) {
        int ia = g->cand[c].ia, ib = g->cand[c].ib;
        if (g->degree[ia] >= p->max_degree || g->degree[ib] >= p->max_degree || joined(g, ia, ib))
            continue;
        join(g, ia, ib, g->cand[c].e, &n_next);
    }
    keyer_knn_edge *t = g->prev;
    g->prev = g->next;
    g->next = t;
    int *ta = g->prev_at;
    g->prev_at = g->next_at;
    g->next_at = ta;
    g->n_prev = n_next;
    int n_out = n_next < capacity ? n_next : capacity;
    if (n_out > 0)
        memcpy(edges, g->prev, (size_t)n_out * sizeof(keyer_knn_edge));
    *count = n_out;
    return KEYER_OK;
}

const kr_knn_backend kr_knn_cpu = {
    .name = "cpu",
    .create = cpu_create,
    .update = cpu_update,
    .destroy = cpu_destroy,
};
