/* The automatic choice between the selfie model and people mode (people_switch.h). */
#include "vision/people_switch.h"

#include <stdlib.h>
#include <string.h>

struct kr_people_switch {
    kr_people_switch_params p;
    int w, h;
    uint8_t *seen;   /* w x h: cell visited by the flood fill */
    int32_t *stack;  /* w x h: cells to visit */
    int people;      /* 1: people mode */
    int streak;      /* frames in a row that argue for the other mode */
    float largest;   /* of the last mask */
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
    size_t cells = (size_t)w * (size_t)h;
    if (!sw || !(sw->seen = malloc(cells)) || !(sw->stack = malloc(cells * sizeof(int32_t)))) {
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
    free((*psw)->seen);
    free((*psw)->stack);
    free(*psw);
    *psw = NULL;
}

/* Cells of the largest 4-connected region of cells >= 0.5. */
static long largest_region(kr_people_switch *sw, const float *mask)
{
    int w = sw->w, h = sw->h;
    size_t cells = (size_t)w * (size_t)h;
    memset(sw->seen, 0, cells);
    long best = 0;
    for (size_t start = 0; start < cells; start++) {
        if (sw->seen[start] || !(mask[start] >= 0.5f))
            continue;
        long size = 0;
        size_t top = 0;
        sw->seen[start] = 1;
        sw->stack[top++] = (int32_t)start;
        while (top > 0) {
            int32_t c = sw->stack[--top];
            size++;
            int x = c % w, y = c / w;
            int32_t nb[4] = {x > 0 ? c - 1 : -1, x + 1 < w ? c + 1 : -1, y > 0 ? c - w : -1,
                             y + 1 < h ? c + w : -1};
            for (int k = 0; k < 4; k++) {
                int32_t q = nb[k];
                if (q < 0 || sw->seen[q] || !(mask[q] >= 0.5f))
                    continue;
                sw->seen[q] = 1; /* marked when pushed: each cell is pushed once */
                sw->stack[top++] = q;
            }
        }
        best = size > best ? size : best;
    }
    return best;
}

int kr_people_switch_update(kr_people_switch *sw, const float *mask)
{
    long big = largest_region(sw, mask);
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
