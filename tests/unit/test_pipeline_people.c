/*
 * The session's people stage on the CPU (model people, src/pipeline/people_stage.h): the
 * people's crops of all streams run in one stage after the person detector, each stream's
 * keyer driven through the steps of keyer_people_run() (vision/people_steps.h). On the CPU
 * the stage runs each frame's crops exactly as the keyer does, so its mattes are bit for bit
 * those of a session where each stream's keyer runs them itself (a session with a face
 * detector keeps that path: the items' detections are the detector's there). Two streams of
 * different sizes, read as files (the pans over grace_hopper.jpg of kt_mesh_session.h, small
 * enough that no tiles run: the test runs under the sanitizers in CI), keyed as masks; the
 * report names the people stage and counts its rounds. The GPU side (the same stage on CUDA
 * frames, against the CPU session) is test_people_device_gpu.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/people.h"
#include "keyer/pipeline.h"
#include "kt_mesh_session.h"
#include "kt_session.h"
#include "testutil.h"

enum { STREAMS = 2, FRAMES = 3, MAX_W = 480, MAX_H = 480 };

typedef struct mattes {
    int frames[STREAMS];
    int w[STREAMS], h[STREAMS];
    uint8_t *luma[STREAMS]; /* FRAMES x MAX_W x MAX_H: plane 0 of each output */
} mattes;

static keyer_status keep_matte(void *opaque, int sid, int64_t index, const keyer_frame *input,
                               keyer_frame *output, keyer_error *err)
{
    (void)input, (void)err;
    mattes *m = opaque;
    if (sid < 0 || sid >= STREAMS || index < 0 || index >= FRAMES || output->width > MAX_W ||
        output->height > MAX_H || output->memory != KEYER_MEMORY_HOST)
        return KEYER_OK; /* counted: frames must be FRAMES */
    m->w[sid] = output->width;
    m->h[sid] = output->height;
    for (int y = 0; y < output->height; y++)
        memcpy(m->luma[sid] + ((size_t)index * MAX_H + (size_t)y) * MAX_W,
               output->data[0] + (size_t)y * (size_t)output->stride[0], (size_t)output->width);
    m->frames[sid]++;
    return KEYER_OK;
}

static keyer_status no_detections(void *opaque, int sid, int64_t index,
                                  const keyer_frame *frame, const keyer_detection *dets,
                                  int count, keyer_overlay *ov, keyer_error *err)
{
    (void)opaque, (void)sid, (void)index, (void)frame, (void)dets, (void)count, (void)ov;
    (void)err;
    return KEYER_OK;
}

/* Keys the clips as masks on the CPU; @p per_stream: with a face detector, so that each
 * stream's keyer runs its crops (no people stage). */
static void run_session(char paths[][4096], int per_stream, mattes *m)
{
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_WARNING;
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.model = KEYER_PEOPLE_MODEL;
    sp.logger = &lg;
    sp.threads = 2;
    sp.composite.mode = KEYER_COMPOSITE_MASK;
    sp.frame_fn = keep_matte;
    sp.frame_opaque = m;
    if (per_stream) {
        sp.detect = KEYER_SESSION_DETECT_FACES;
        sp.detect_fn = no_detections;
    }
    keyer_session *s = kt_session_create(&sp);
    const char *inputs[STREAMS];
    for (int i = 0; i < STREAMS; i++)
        inputs[i] = paths[i];
    kt_session_run_files(s, inputs, STREAMS);
    keyer_session_report rep;
    keyer_session_get_report(s, &rep);
    assert_int_equal(rep.frames_written, STREAMS * FRAMES);
    assert_string_equal(rep.model, KEYER_PEOPLE_MODEL);
    int people_stage = -1;
    for (int i = 0; i < rep.stage_count; i++)
        if (!strcmp(rep.stages[i].name, "people"))
            people_stage = i;
    const keyer_rounds_report *lr = &rep.landmark_rounds;
    print_message("  %s: people stage %s, %lld batches, %lld rounds, %lld passes, %lld runs, "
                  "%lld crops (+ %lld padding)\n",
                  per_stream ? "per-stream keyers" : "people stage",
                  people_stage >= 0 ? "present" : "absent", (long long)lr->batches,
                  (long long)lr->rounds, (long long)lr->passes, (long long)lr->runs,
                  (long long)lr->crops, (long long)lr->padded);
    if (per_stream) {
        assert_int_equal(people_stage, -1);
        assert_int_equal(lr->rounds, 0);
    } else {
        assert_true(people_stage >= 0);
        assert_int_equal(rep.stages[people_stage].frames, STREAMS * FRAMES);
        assert_true(lr->rounds >= lr->batches && lr->batches >= 1);
        assert_true(lr->passes >= 1 && lr->runs >= 1 && lr->crops >= lr->runs);
    }
    keyer_session_destroy(&s);
    for (int i = 0; i < STREAMS; i++)
        assert_int_equal(m->frames[i], FRAMES);
}

static void test_people_stage_cpu(void **state)
{
    (void)state;
    char dir[3000];
    kt_tmpdir(dir, sizeof(dir), "pipeline_people");
    const int sizes[STREAMS][2] = {{480, 360}, {360, 480}};
    char paths[STREAMS][4096];
    ms_make_clips(dir, STREAMS, sizes, FRAMES, paths);
    mattes a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    for (int i = 0; i < STREAMS; i++) {
        a.luma[i] = calloc((size_t)FRAMES * MAX_W * MAX_H, 1);
        b.luma[i] = calloc((size_t)FRAMES * MAX_W * MAX_H, 1);
        assert_non_null(a.luma[i]);
        assert_non_null(b.luma[i]);
    }
    run_session(paths, 0, &a);
    run_session(paths, 1, &b);
    size_t keyed = 0, differ = 0, n = 0;
    for (int i = 0; i < STREAMS; i++) {
        assert_int_equal(a.w[i], sizes[i][0]);
        assert_int_equal(a.h[i], sizes[i][1]);
        assert_int_equal(b.w[i], a.w[i]);
        assert_int_equal(b.h[i], a.h[i]);
        for (int f = 0; f < FRAMES; f++)
            for (int y = 0; y < a.h[i]; y++)
                for (int x = 0; x < a.w[i]; x++) {
                    size_t o = ((size_t)f * MAX_H + (size_t)y) * MAX_W + (size_t)x;
                    keyed += a.luma[i][o] >= 128;
                    differ += a.luma[i][o] != b.luma[i][o];
                    n++;
                }
    }
    print_message("  mattes: %.2f%% of pixels keyed in; %zu of %zu differ between the people "
                  "stage and the per-stream keyers\n", 100.0 * (double)keyed / (double)n,
                  differ, n);
    assert_true(keyed > n / 200); /* the person is keyed at all */
    assert_int_equal(differ, 0);
    for (int i = 0; i < STREAMS; i++) {
        free(a.luma[i]);
        free(b.luma[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_people_stage_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
