/* The automatic choice between the selfie model and people mode (people_switch.h). */
#include "vision/people_switch.h"

#include <stdlib.h>
#include <string.h>

#ifdef KEYER_HAVE_CUDA
/* vision/cuda/people_switch.cu */
keyer_status kr_cuda_people_switch_pack(int ordinal, const float *const *masks, int n, int w,
                                        int h, uint32_t *bits, void *stream, keyer_error *err);
#endif

struct kr_people_switch {
    kr_people_switch_params p;
    int w, h;
    /* the mask's runs: a run is a row's cells [x0, x1) at or above 0.5, between two below */
    int32_t *x0, *x1; /* [runs]: a run's columns */
    int32_t *parent;  /* [runs]: union-find over the runs (a root is its own parent) */
    int64_t *size;    /* [runs]: a root's cells */
    uint32_t *bits;   /* a float mask packed (kr_people_switch_pack) */
    int people;       /* 1: people mode */
    int streak;       /* frames in a row that argue for the other mode */
    float largest;    /* of the last mask */
    int64_t frames, frames_people;
};

kr_people_switch_params kr_people_switch_params_defaults(void)
{
    kr_people_switch_params p = {0.08f, 0.15f, 5, 15};
    return p;
}

keyer_status kr_people_switch_create(const kr_people_switch_params *p, int w, int h,
                                     kr_people_switch **out, keyer_error *err)
{
    if (!p || !out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "people switch: NULL argument");
    *out = NULL;
    if (!(p->enter > 0 && p->enter <= p->leave && p->leave <= 1) || p->enter_frames < 1 ||
        p->enter_frames > 1000 || p->leave_frames < 1 || p->leave_frames > 1000 || w < 1 ||
        h < 1 || w > 4096 || h > 4096)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "people switch: a parameter is out of range (0 < enter <= leave "
                               "<= 1, frames 1..1000, mask 1..4096 cells a side; got %g, %g, "
                               "%d, %d, %dx%d)", (double)p->enter, (double)p->leave,
                               p->enter_frames, p->leave_frames, w, h);
    kr_people_switch *sw = calloc(1, sizeof(*sw));
    /* a row of w cells holds at most (w + 1) / 2 runs */
    size_t runs = (size_t)h * (((size_t)w + 1) / 2);
    if (!sw || !(sw->x0 = malloc(runs * sizeof(int32_t))) ||
        !(sw->x1 = malloc(runs * sizeof(int32_t))) ||
        !(sw->parent = malloc(runs * sizeof(int32_t))) ||
        !(sw->size = malloc(runs * sizeof(int64_t))) ||
        !(sw->bits = malloc((size_t)h * (size_t)kr_people_switch_row_words(w) *
                            sizeof(uint32_t)))) {
        kr_people_switch_destroy(&sw);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "people switch: out of memory");
    }
    sw->p = *p;
    sw->w = w;
    sw->h = h;
    *out = sw;
    return KEYER_OK;
}

void kr_people_switch_destroy(kr_people_switch **psw)
{
    if (!psw || !*psw)
        return;
    free((*psw)->x0);
    free((*psw)->x1);
    free((*psw)->parent);
    free((*psw)->size);
    free((*psw)->bits);
    free(*psw);
    *psw = NULL;
}

/* The root of run @p r's set (path halving). */
static int32_t root(int32_t *parent, int32_t r)
{
    while (parent[r] != r) {
        parent[r] = parent[parent[r]];
        r = parent[r];
    }
    return r;
}

/* Joins the sets of runs @p a and @p b (the smaller under the larger). */
static void join(kr_people_switch *sw, int32_t a, int32_t b)
{
    a = root(sw->parent, a);
    b = root(sw->parent, b);
    if (a == b)
        return;
    if (sw->size[a] < sw->size[b]) {
        int32_t t = a;
        a = b;
        b = t;
    }
    sw->parent[b] = a;
    sw->size[a] += sw->size[b];
}

/* Run @p n: cells [x0, x1) of its row; joined with the runs of the row above sharing a column
 * (from *@p above, in column order, up to @p above_end). */
static void add_run(kr_people_switch *sw, int32_t n, int x0, int x1, int32_t *above,
                    int32_t above_end)
{
    sw->x0[n] = x0;
    sw->x1[n] = x1;
    sw->parent[n] = n;
    sw->size[n] = x1 - x0;
    /* a run above that ends before x0 shares no column with this run nor with the next ones */
    while (*above < above_end && sw->x1[*above] <= x0)
        (*above)++;
    for (int32_t a = *above; a < above_end && sw->x0[a] < x1; a++)
        join(sw, n, a);
}

/* Cells of the largest 4-connected region of set bits of @p bits (kr_people_switch_pack's
 * rows), by runs: each row is cut into runs of set bits (a word at a time: the edges between
 * bits that differ), a run joins every run of the row above that shares a column with it
 * (union-find), and a set's size is its runs' cells. Work in the words and the runs, not the
 * cells: the same regions as a flood fill over the cells. */
static int64_t largest_region(kr_people_switch *sw, const uint32_t *bits)
{
    int w = sw->w, h = sw->h, words = kr_people_switch_row_words(w);
    int32_t n = 0, above = 0, above_end = 0; /* the row above's runs: [above, above_end) */
    for (int y = 0; y < h; y++) {
        const uint32_t *row = bits + (size_t)y * (size_t)words;
        int32_t first = n;
        int open = -1; /* the column where the current run started; -1: none */
        for (int k = 0; k < words; k++) {
            int x0 = 32 * k, m = w - x0 < 32 ? w - x0 : 32;
            uint32_t b = row[k];
            if (m < 32)
                b &= ((uint32_t)1 << m) - 1; /* bits past w are not cells */
            /* the run boundaries in this word: where a bit differs from the one before */
            uint32_t edges = b ^ ((b << 1) | (open >= 0 ? 1u : 0u));
            if (m < 32)
                edges &= ((uint32_t)1 << m) - 1;
            while (edges) {
                int x = x0 + __builtin_ctz(edges);
                edges &= edges - 1;
                if (open < 0) {
                    open = x;
                } else {
                    add_run(sw, n++, open, x, &above, above_end);
                    open = -1;
                }
            }
        }
        if (open >= 0)
            add_run(sw, n++, open, w, &above, above_end);
        above = first;
        above_end = n;
    }
    int64_t best = 0;
    for (int32_t r = 0; r < n; r++)
        if (sw->parent[r] == r && sw->size[r] > best)
            best = sw->size[r];
    return best;
}

int kr_people_switch_row_words(int w)
{
    return (w + 31) / 32;
}

void kr_people_switch_pack(const float *mask, int w, int h, uint32_t *bits)
{
    int words = kr_people_switch_row_words(w);
    for (int y = 0; y < h; y++) {
        const float *row = mask + (size_t)y * (size_t)w;
        uint32_t *out = bits + (size_t)y * (size_t)words;
        for (int k = 0; k < words; k++) {
            int x0 = 32 * k, m = w - x0 < 32 ? w - x0 : 32;
            uint32_t b = 0;
            for (int i = 0; i < m; i++)
                b |= (uint32_t)(row[x0 + i] >= 0.5f) << i;
            out[k] = b;
        }
    }
}

keyer_status kr_people_switch_pack_cuda(int ordinal, const float *const *masks, int n, int w,
                                        int h, uint32_t *bits, void *stream, keyer_error *err)
{
#ifdef KEYER_HAVE_CUDA
    return kr_cuda_people_switch_pack(ordinal, masks, n, w, h, bits, stream, err);
#else
    (void)ordinal, (void)masks, (void)n, (void)w, (void)h, (void)bits, (void)stream;
    return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                           "people switch: masks on CUDA, but keyer was built without CUDA");
#endif
}

/* The hysteresis on the last mask's largest region of @p big cells. */
static int decide(kr_people_switch *sw, int64_t big)
{
    sw->largest = (float)((double)big / ((double)sw->w * (double)sw->h));
    /* the other mode's condition, held for its number of frames, switches */
    int other = sw->people ? sw->largest >= sw->p.leave : sw->largest < sw->p.enter;
    sw->streak = other ? sw->streak + 1 : 0;
    if (sw->streak >= (sw->people ? sw->p.leave_frames : sw->p.enter_frames)) {
        sw->people = !sw->people;
        sw->streak = 0;
    }
    sw->frames++;
    sw->frames_people += sw->people;
    return sw->people;
}

int kr_people_switch_update(kr_people_switch *sw, const float *mask)
{
    kr_people_switch_pack(mask, sw->w, sw->h, sw->bits);
    return decide(sw, largest_region(sw, sw->bits));
}

int kr_people_switch_update_bits(kr_people_switch *sw, const uint32_t *bits)
{
    return decide(sw, largest_region(sw, bits));
}

int kr_people_switch_people(const kr_people_switch *sw)
{
    return sw->people;
}

float kr_people_switch_largest(const kr_people_switch *sw)
{
    return sw->largest;
}

void kr_people_switch_counts(const kr_people_switch *sw, int64_t *frames, int64_t *people)
{
    if (frames)
        *frames = sw->frames;
    if (people)
        *people = sw->frames_people;
}
