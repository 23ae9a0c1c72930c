/* Two people keyers side by side: see kt_people.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>

#include "kt_people.h"

void kt_people_side_open(kt_people_side *s, keyer_backend backend)
{
    keyer_people_params p = keyer_people_params_defaults();
    p.backend = backend;
    p.threads = 4;
    kt_people_side_open_with(s, &p);
}

void kt_people_side_open_with(kt_people_side *s, const keyer_people_params *p)
{
    keyer_error err = {0};
    keyer_status st = keyer_people_create(p, &s->pp, &err);
    if (st)
        print_message("%s\n", err.message);
    assert_int_equal(st, KEYER_OK);
    assert_int_equal(keyer_frame_create(&s->mask, &err), KEYER_OK);
}

void kt_people_side_close(kt_people_side *s)
{
    keyer_people_destroy(&s->pp);
    keyer_frame_destroy(&s->mask);
}

void kt_people_side_run(kt_people_side *s, const keyer_frame *f)
{
    keyer_error err = {0};
    if (s->mask->width != f->width || s->mask->height != f->height) {
        keyer_frame_unref(s->mask);
        assert_int_equal(keyer_frame_alloc(s->mask, KEYER_PIXEL_FORMAT_GRAYF32, f->width,
                                           f->height, NULL, &err),
                         KEYER_OK);
    }
    keyer_status st = keyer_people_detect(s->pp, f, s->dets, KT_PEOPLE_MAX_DETS, &s->nd, &err);
    if (!st)
        st = keyer_people_run(s->pp, f, s->people, KEYER_PEOPLE_MAX, &s->np, &err);
    if (st)
        print_message("%s\n", err.message);
    assert_int_equal(st, KEYER_OK);
    assert_int_equal(keyer_people_mask(s->pp, s->mask, &err), KEYER_OK);
}

void kt_people_compare(const kt_people_side *a, const kt_people_side *b, const char *what,
                       const char *na, const char *nb)
{
    print_message("%s: %d detections, %d people (%s), %d and %d (%s)\n", what, a->nd, a->np, na,
                  b->nd, b->np, nb);
    assert_int_equal(b->nd, a->nd);
    for (int i = 0; i < a->nd; i++) {
        const keyer_detection *x = &a->dets[i], *y = &b->dets[i];
        assert_float_equal(x->score, y->score, 1e-3);
        assert_float_equal(x->xmin, y->xmin, 0.5);
        assert_float_equal(x->ymin, y->ymin, 0.5);
        assert_float_equal(x->xmax, y->xmax, 0.5);
        assert_float_equal(x->ymax, y->ymax, 0.5);
        for (int k = 0; k < x->num_keypoints; k++) {
            assert_float_equal(x->keypoints[k][0], y->keypoints[k][0], 0.5);
            assert_float_equal(x->keypoints[k][1], y->keypoints[k][1], 0.5);
        }
    }
    assert_int_equal(b->np, a->np);
    for (int i = 0; i < a->np; i++)
        assert_int_equal(b->people[i].id, a->people[i].id);
    const keyer_frame *ma = a->mask, *mb = b->mask;
    assert_int_equal(mb->width, ma->width);
    assert_int_equal(mb->height, ma->height);
    double sum = 0;
    long differ = 0, n = (long)ma->width * ma->height;
    for (int y = 0; y < ma->height; y++) {
        const float *ra = (const float *)(ma->data[0] + y * ma->stride[0]);
        const float *rb = (const float *)(mb->data[0] + y * mb->stride[0]);
        for (int x = 0; x < ma->width; x++) {
            sum += fabs((double)ra[x] - (double)rb[x]);
            differ += (ra[x] >= 0.5f) != (rb[x] >= 0.5f);
        }
    }
    print_message("%s: mask mean |%s - %s| %.2e, %.3f%% of pixels on different sides of 0.5\n",
                  what, na, nb, sum / (double)n, 100.0 * (double)differ / (double)n);
    assert_true(sum / (double)n <= 5e-3);
    assert_true((double)differ / (double)n <= 0.005);
}
