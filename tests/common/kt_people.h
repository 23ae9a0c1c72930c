/*
 * The people keyer on two backends or two kinds of frames, side by side (test_people_gpu,
 * test_people_device_gpu): a "side" is one keyer_people with its last frame's detections,
 * people and mask; kt_people_compare() holds two sides to the bounds those tests share.
 * Every failure fails the running cmocka test.
 */
#ifndef KEYER_KT_PEOPLE_H
#define KEYER_KT_PEOPLE_H

#include "keyer/people.h"

#define KT_PEOPLE_MAX_DETS 32

/** One people keyer and what it found in the last frame. */
typedef struct kt_people_side {
    keyer_people *pp;
    keyer_frame *mask; /* GRAYF32 at the last frame's size (host memory) */
    keyer_detection dets[KT_PEOPLE_MAX_DETS];
    keyer_person people[KEYER_PEOPLE_MAX];
    int nd, np;
} kt_people_side;

/** Creates the side's keyer (defaults, @p backend, 4 threads) and its mask frame. */
void kt_people_side_open(kt_people_side *s, keyer_backend backend);

/** kt_people_side_open() with the keyer's parameters @p p (the caller's backend, threads,
 *  tiles, ...). */
void kt_people_side_open_with(kt_people_side *s, const keyer_people_params *p);

/** Destroys what kt_people_side_open() made; the side may be opened again. */
void kt_people_side_close(kt_people_side *s);

/** Runs the side on frame @p f (host or device memory): the detections
 *  (keyer_people_detect), the people (keyer_people_run) and their mask at the frame's size. */
void kt_people_side_run(kt_people_side *s, const keyer_frame *f);

/**
 * Checks that side @p b agrees with side @p a after both ran on the same picture, and prints
 * the figures as "<what>: ..." with the sides named @p na and @p nb: the same detections (count;
 * scores within 1e-3; boxes and keypoints within 0.5 pixel), the same people (count, ids), and
 * masks whose mean absolute difference is <= 5e-3 and that lie on the same side of 0.5 on
 * >= 99.5% of pixels.
 */
void kt_people_compare(const kt_people_side *a, const kt_people_side *b, const char *what,
                       const char *na, const char *nb);

#endif
