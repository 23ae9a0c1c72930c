/* The session's own detector, checked end to end: see kt_detect_session.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/faces.h"
#include "keyer/io.h"
#include "keyer/pipeline.h"
#include "kt_detect_session.h"
#include "testutil.h"

#define DS_KEEP 4

/* The callbacks run on each stream's writer thread, concurrently for the two streams: the
 * counters both streams add to are atomic; the rest is per stream. */
typedef struct ds_log {
    int frames;                             /* per stream, <= DS_FRAMES */
    int next[2];                            /* next frame expected per stream */
    atomic_int out_of_order, calls, hooks;
    int n[2][DS_FRAMES];                    /* detections per frame */
    keyer_detection dets[2][DS_FRAMES][DS_KEEP];
    atomic_int drawn_seen, drawn_missing, outside_changed;
} ds_log;

static keyer_status ds_detect(void *opaque, int sid, int64_t index,
                              const keyer_frame *frame, const keyer_detection *dets,
                              int count, keyer_overlay *ov, keyer_error *err)
{
    ds_log *l = opaque;
    l->calls++;
    if (sid < 0 || sid > 1 || index != l->next[sid] || index >= l->frames || !frame ||
        count < 0 || count > KEYER_SESSION_MAX_DETECTIONS) {
        l->out_of_order++;
        return KEYER_OK;
    }
    l->next[sid]++;
    l->n[sid][index] = count;
    for (int i = 0; i < count && i < DS_KEEP; i++)
        l->dets[sid][index][i] = dets[i];
    keyer_color white = {1, 1, 1, 1}, none = {0, 0, 0, 0};
    for (int i = 0; i < count; i++) {
        keyer_status st = keyer_overlay_add_box(ov, dets[i].xmin, dets[i].ymin, dets[i].xmax,
                                                dets[i].ymax, 0, 4, white, none, err);
        if (st)
            return st;
    }
    return KEYER_OK;
}

/* frame_fn after the drawing: the output is white on the first box's top edge where the
 * input is not, and equal to the input in the top-left corner (no box there). */
static keyer_status ds_hook(void *opaque, int sid, int64_t index, const keyer_frame *in,
                            keyer_frame *out, keyer_error *err)
{
    ds_log *l = opaque;
    (void)err;
    l->hooks++;
    int yuv = in->format == KEYER_PIXEL_FORMAT_NV12 || in->format == KEYER_PIXEL_FORMAT_YUV420P;
    if (sid < 0 || sid > 1 || index >= l->frames || !yuv || out->format != in->format)
        return KEYER_OK; /* plane 0 is luma in both */
    if (l->n[sid][index] > 0) {
        const keyer_detection *d = &l->dets[sid][index][0];
        int x = (int)((d->xmin + d->xmax) / 2), y = (int)d->ymin;
        if (x >= 0 && x < out->width && y >= 0 && y < out->height) {
            int o = out->data[0][y * out->stride[0] + x];
            if (o >= 230)
                l->drawn_seen++;
            else
                l->drawn_missing++;
        }
    }
    for (int y = 0; y < 4; y++)
        if (memcmp(in->data[0] + y * in->stride[0], out->data[0] + y * out->stride[0], 4))
            l->outside_changed++;
    return KEYER_OK;
}

/* Runs the session on @p inputs (two clips) and fills @p l. */
static void ds_run(const char *const inputs[2], const char *out, int device, int keying,
                   int frames, ds_log *l)
{
    memset(l, 0, sizeof(*l));
    l->frames = frames;
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_ERROR;
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = device;
    sp.logger = &lg;
    sp.passthrough = !keying;
    sp.composite.mode = KEYER_COMPOSITE_BLUR;
    sp.detect = KEYER_SESSION_DETECT_FACES;
    sp.detect_fn = ds_detect;
    sp.detect_opaque = l;
    sp.frame_fn = ds_hook;
    sp.frame_opaque = l;
    keyer_session *s = NULL;
    keyer_error err = {0};
    if (keyer_session_create(&sp, &s, &err))
        fail_msg("session: %s", err.message);
    for (int i = 0; i < 2; i++) {
        keyer_file_stream_params fp = keyer_file_stream_params_defaults();
        fp.input = inputs[i];
        fp.output = i == 0 ? out : NULL;
        fp.writer.preset = "ultrafast";
        if (keyer_session_add_file(s, &fp, NULL, &err))
            fail_msg("add %s: %s", inputs[i], err.message);
    }
    if (keyer_session_run(s, &err))
        fail_msg("run: %s", err.message);
    keyer_session_report rep;
    keyer_session_get_report(s, &rep);
    assert_int_equal(rep.frames_written, 2 * frames);
    assert_int_equal(rep.stage_count, 7);
    assert_string_equal(rep.stages[6].name, "detect");
    assert_int_equal(rep.stages[6].frames, 2 * frames);
    if (device == KEYER_DEVICE_CUDA)
        assert_non_null(strstr(rep.device, "cuda"));
    keyer_session_destroy(&s);
}

/* The per-frame reference: keyer_faces_detect on the clip decoded on the CPU. */
static void ds_check_against_faces(const char *input, const ds_log *l, int sid,
                                   float min_iou)
{
    keyer_faces_params fp = keyer_faces_params_defaults();
    fp.landmarks = 0;
    fp.threads = 1;
    keyer_faces *fa = NULL;
    keyer_error err = {0};
    if (keyer_faces_create(&fp, &fa, &err))
        fail_msg("faces: %s", err.message);
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    keyer_reader *r = NULL;
    keyer_frame *f = NULL;
    if (keyer_reader_open(input, &rp, &r, &err) || keyer_frame_create(&f, &err))
        fail_msg("%s: %s", input, err.message);
    int with_faces = 0, without = 0;
    for (int i = 0; i < l->frames; i++) {
        if (keyer_reader_read(r, f, &err))
            fail_msg("%s frame %d: %s", input, i, err.message);
        keyer_detection ref[DS_KEEP];
        int n = 0;
        if (keyer_faces_detect(fa, f, ref, DS_KEEP, &n, &err))
            fail_msg("detect: %s", err.message);
        int got = l->n[sid][i] < DS_KEEP ? l->n[sid][i] : DS_KEEP;
        if (got != n)
            fail_msg("stream %d frame %d: %d faces, the per-frame detector finds %d", sid, i,
                     l->n[sid][i], n);
        for (int k = 0; k < n; k++) {
            float iou = keyer_detection_iou(&ref[k], &l->dets[sid][i][k]);
            if (!(iou >= min_iou))
                fail_msg("stream %d frame %d face %d: IoU %.4f with the per-frame detector", sid,
                         i, k, iou);
        }
        with_faces += n > 0;
        without += n == 0;
    }
    /* the clip shows the face, then the jacket */
    assert_true(with_faces >= l->frames / 4);
    assert_true(without >= 1);
    keyer_frame_destroy(&f);
    keyer_reader_destroy(&r);
    keyer_faces_destroy(&fa);
}

/* The whole check on @p device; @p dir holds the clips and the output. */
void ds_check_session_detect(const char *dir, int device, float min_iou, int frames)
{
    assert_true(frames >= 8 && frames <= DS_FRAMES);
    char in0[4096], in1[4096], out[4096], img[4096];
    snprintf(in0, sizeof(in0), "%s/ds_in0.mp4", dir);
    snprintf(in1, sizeof(in1), "%s/ds_in1.mp4", dir);
    snprintf(out, sizeof(out), "%s/ds_out.mp4", dir);
    keyer_error err = {0};
    for (int i = 0; i < 2; i++) {
        keyer_sample_params p = keyer_sample_params_defaults();
        p.width = i == 0 ? 640 : 480;
        p.height = i == 0 ? 360 : 360;
        p.frames = frames;
        p.frame_rate = (keyer_rational){25, 1};
        p.preset = "ultrafast";
        if (keyer_video_write_sample(i == 0 ? in0 : in1,
                                     kt_data_path(img, sizeof(img), "grace_hopper.jpg"), &p,
                                     &err))
            fail_msg("sample: %s", err.message);
    }
    const char *inputs[2] = {in0, in1};
    ds_log *l = calloc(1, sizeof(*l));
    assert_non_null(l);
    for (int keying = 0; keying < 2; keying++) {
        ds_run(inputs, out, device, keying, frames, l);
        assert_int_equal(l->out_of_order, 0);
        assert_int_equal(l->calls, 2 * frames);
        assert_int_equal(l->hooks, 2 * frames);
        assert_int_equal(l->next[0], frames);
        assert_int_equal(l->next[1], frames);
        assert_true(l->drawn_seen >= frames / 2);
        assert_int_equal(l->drawn_missing, 0);
        if (!keying) /* the passthrough output is the input where nothing was drawn */
            assert_int_equal(l->outside_changed, 0);
        for (int sid = 0; sid < 2; sid++)
            ds_check_against_faces(inputs[sid], l, sid, min_iou);
    }
    free(l);
}
