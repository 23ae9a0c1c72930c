/* The session's pose stage against the per-stream tracker: see kt_pose_session.h. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keyer/io.h"
#include "keyer/pipeline.h"
#include "keyer/effects.h"
#include "keyer/nn.h"
#include "keyer/registry.h"
#include "kt_pose_session.h"
#include "vision/pose_steps.h"
#include "kt_session.h"
#include "testutil.h"

static void record(ps_rec *r, int sid, int index, const keyer_pose_result *pose)
{
    r->found[sid][index] = pose->found;
    r->seeded[sid][index] = pose->seeded;
    r->side[sid][index] = pose->roi.width;
    r->roi[sid][index] = pose->roi;
    for (int k = 0; k < KEYER_POSE_LANDMARKS; k++) {
        r->lm[sid][index][k][0] = pose->landmarks[k].x;
        r->lm[sid][index][k][1] = pose->landmarks[k].y;
        r->lm[sid][index][k][2] = pose->landmarks[k].z;
        r->lm[sid][index][k][3] = pose->landmarks[k].visibility;
    }
}

/* pose_fn: the streams' writer threads call it concurrently, each for its own stream only
 * (rec's per-stream rows); the two counters are only read after the session is destroyed. */
static keyer_status ps_pose(void *opaque, int sid, int64_t index, const keyer_frame *frame,
                            const keyer_detection *dets, int count,
                            const keyer_pose_result *pose, keyer_overlay *ov, keyer_error *err)
{
    ps_rec *r = opaque;
    __atomic_add_fetch(&r->calls, 1, __ATOMIC_RELAXED);
    if (sid < 0 || sid >= r->streams || index != r->next[sid] || index >= r->frames || !frame ||
        !pose || count < 0 || (count > 0 && !dets)) {
        __atomic_add_fetch(&r->out_of_order, 1, __ATOMIC_RELAXED);
        return KEYER_OK;
    }
    r->next[sid]++;
    record(r, sid, (int)index, pose);
    /* the drawing the tool does, on the frame's device */
    return keyer_pose_draw(ov, pose, NULL, err);
}

static keyer_session *ps_session(int device, int precision, int batch, int keying, int model,
                                 ps_rec *rec, int streams, int frames, keyer_logger *lg)
{
    memset(rec, 0, sizeof(*rec));
    rec->streams = streams;
    rec->frames = frames;
    keyer_session_params sp = kt_session_params(device, precision, batch, keying, lg);
    sp.detect = KEYER_SESSION_DETECT_FACES_FULL;
    sp.pose = 1;
    sp.pose_model = model;
    sp.pose_fn = ps_pose;
    sp.pose_opaque = rec;
    return kt_session_create(&sp);
}

/* The pose stage's rounds of a finished run's report: every frame of a batch in one round
 * (one frame per stream); printed. */
static void ps_check_rounds(const keyer_session_report *rep)
{
    const keyer_rounds_report *lr = &rep->landmark_rounds;
    printf("  pose stage rounds: %lld batches, %lld rounds, %lld passes, %lld runs, %lld crops "
           "(+ %lld padding), %lld host waits; %.3f s in rounds, %.3f s waiting%s%s\n",
           (long long)lr->batches, (long long)lr->rounds, (long long)lr->passes,
           (long long)lr->runs, (long long)lr->crops, (long long)lr->padded,
           (long long)lr->syncs, lr->round_seconds, lr->wait_seconds,
           lr->schedule[0] ? "; schedule " : "", lr->schedule);
    assert_true(lr->batches >= 1);
    assert_true(lr->rounds >= lr->batches);
    assert_true(lr->crops >= 1 && lr->runs >= 1 && lr->passes >= 1);
}

/* One run over files (@p inputs) or pushed frames, recorded into @p rec and checked. */
static void ps_run(const char *const *inputs, keyer_frame *const *frames, int n, int nframes,
                   const char *dir, int device, int precision, int batch, int keying, int model,
                   ps_rec *rec)
{
    keyer_logger lg;
    keyer_session_report rep;
    keyer_session *s = ps_session(device, precision, batch, keying, model, rec, n, nframes, &lg);
    kt_session_feed(s, inputs, frames, n, nframes, dir, "ps_push");
    kt_session_finish(&s, device, n * nframes, 9, "pose", &rep);
    ps_check_rounds(&rep);
    kt_session_check_calls(rec->calls, rec->out_of_order, n * nframes);
}

void ps_run_files(const char *const *inputs, int n, int frames, int device, int precision,
                  int batch, int keying, int model, ps_rec *rec)
{
    ps_run(inputs, NULL, n, frames, NULL, device, precision, batch, keying, model, rec);
}

void ps_run_pushed(keyer_frame *const *frames, int n, int nframes, const char *dir, int device,
                   int precision, int model, ps_rec *rec)
{
    ps_run(NULL, frames, n, nframes, dir, device, precision, 0, 0, model, rec);
}

void ps_reference(keyer_frame *const *frames, int nframes, int sid, int model, ps_rec *rec)
{
    keyer_pose_params pp = keyer_pose_params_defaults();
    pp.model = model;
    pp.threads = 1;
    pp.segmentation = 0;
    keyer_pose *pose = NULL;
    keyer_error err = {0};
    if (keyer_pose_create(&pp, &pose, &err))
        fail_msg("pose: %s", err.message);
    if (sid >= rec->streams)
        rec->streams = sid + 1;
    rec->frames = nframes;
    for (int i = 0; i < nframes; i++) {
        keyer_pose_result r;
        if (keyer_pose_run(pose, frames[i], &r, &err))
            fail_msg("pose frame %d: %s", i, err.message);
        record(rec, sid, i, &r);
    }
    keyer_pose_destroy(&pose);
}

double ps_compare(const ps_rec *a, const ps_rec *b, int max_mismatch, double *worst_rel,
                  int *with_pose)
{
    double worst = 0, rel = 0;
    int mismatch = 0;
    *with_pose = 0;
    assert_int_equal(a->streams, b->streams);
    assert_int_equal(a->frames, b->frames);
    for (int s = 0; s < a->streams; s++)
        for (int i = 0; i < a->frames; i++) {
            if (a->found[s][i] != b->found[s][i]) {
                print_message("  stream %d frame %d: pose %d against %d\n", s, i,
                              a->found[s][i], b->found[s][i]);
                mismatch++;
                continue;
            }
            if (!max_mismatch && a->seeded[s][i] != b->seeded[s][i])
                fail_msg("stream %d frame %d: seeded %d against %d", s, i, a->seeded[s][i],
                         b->seeded[s][i]);
            if (!a->found[s][i])
                continue;
            (*with_pose)++;
            kt_points_distance(&a->lm[s][i][0][0], &b->lm[s][i][0][0], KEYER_POSE_LANDMARKS, 4,
                               a->side[s][i], &worst, &rel);
        }
    if (mismatch > max_mismatch)
        fail_msg("%d frames where only one side found a pose (at most %d allowed)", mismatch,
                 max_mismatch);
    if (worst_rel)
        *worst_rel = rel;
    return worst;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int ps_same_crops(const ps_rec *got, keyer_frame *const *frames, int nframes, int model,
                  double *max_rel, double *p99_rel, double *max_px)
{
    static const char *const names[] = {"pose-lite", "pose-full", "pose-heavy"};
    keyer_error err = {0};
    keyer_model *m = NULL;
    keyer_runtime *rt = NULL;
    keyer_prepare *prep = NULL;
    keyer_pose *tr = NULL;
    kt_cpu_model(names[model], &m, &rt);
    kr_pose_shape shape = {0, 0, 0, 0, 0, 0};
    int o_pts = -1, o_flag = -1, o_world = -1, o_heat = -1;
    for (int i = 0; i < keyer_model_output_count(m); i++) {
        keyer_tensor_info t;
        if (keyer_model_output_info(m, i, &t, &err))
            fail_msg("%s", err.message);
        size_t n = 1;
        for (int d = 1; d < t.rank; d++)
            n *= (size_t)t.dims[d];
        if (o_pts < 0 && n == KR_POSE_MODEL_POINTS * 5)
            o_pts = i;
        if (o_flag < 0 && n == 1)
            o_flag = i;
        if (o_world < 0 && n == KR_POSE_MODEL_POINTS * 3)
            o_world = i;
        if (t.rank == 4 && t.dims[3] == KR_POSE_MODEL_POINTS && o_heat < 0) {
            o_heat = i;
            shape.heat_h = t.dims[1];
            shape.heat_w = t.dims[2];
        } else if (t.rank == 4 && t.dims[3] == 1) {
            shape.seg_h = t.dims[1];
            shape.seg_w = t.dims[2];
        }
    }
    keyer_tensor_info in;
    if (keyer_model_input_info(m, 0, &in, &err))
        fail_msg("%s", err.message);
    shape.width = in.dims[2];
    shape.height = in.dims[1];
    assert_true(o_pts >= 0 && o_flag >= 0 && o_world >= 0 && o_heat >= 0);
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    pp.width = shape.width;
    pp.height = shape.height;
    pp.fit = KEYER_FIT_LETTERBOX;
    pp.scale = 1.0f;
    pp.offset = 0.0f;
    keyer_pose_params tp = keyer_pose_params_defaults();
    tp.model = model;
    tp.segmentation = 0;
    if (keyer_prepare_create(&pp, &prep, &err) ||
        kr_pose_create_external(&tp, &shape, &tr, &err))
        fail_msg("%s", err.message);
    size_t cap = (size_t)got->streams * (size_t)got->frames * KEYER_POSE_LANDMARKS;
    double *rel = malloc(cap * sizeof(double));
    assert_non_null(rel);
    size_t nrel = 0;
    int crops = 0;
    *max_rel = *p99_rel = *max_px = 0;
    for (int s = 0; s < got->streams; s++)
        for (int i = 0; i < got->frames && i < nframes; i++) {
            if (!got->found[s][i])
                continue;
            const keyer_frame *f = frames[s * nframes + i];
            keyer_roi roi = got->roi[s][i];
            keyer_prepare_geometry geo;
            if (keyer_prepare_run(prep, &f, &roi, 1, keyer_runtime_input_data(rt, 0), &geo,
                                  &err) ||
                keyer_runtime_run(rt, &err))
                fail_msg("%s", err.message);
            kr_pose_outputs o = {keyer_runtime_output_data(rt, o_pts),
                                 keyer_runtime_output_data(rt, o_flag)[0],
                                 keyer_runtime_output_data(rt, o_world),
                                 keyer_runtime_output_data(rt, o_heat), NULL};
            keyer_pose_result r;
            keyer_roi unused;
            kr_pose_begin(tr, f->width, f->height, &r, &unused);
            kr_pose_add_final(tr, &roi, &o, &geo, &r);
            crops++;
            double side = roi.width > 1 ? roi.width : 1;
            for (int k = 0; k < KEYER_POSE_LANDMARKS; k++) {
                double dx = (double)r.landmarks[k].x - got->lm[s][i][k][0];
                double dy = (double)r.landmarks[k].y - got->lm[s][i][k][1];
                double d = sqrt(dx * dx + dy * dy);
                if (isnan(d))
                    d = INFINITY;
                *max_px = d > *max_px ? d : *max_px;
                rel[nrel++] = d / side;
            }
        }
    if (nrel) {
        qsort(rel, nrel, sizeof(double), cmp_double);
        *max_rel = rel[nrel - 1];
        *p99_rel = rel[(size_t)((double)(nrel - 1) * 0.99)];
    }
    free(rel);
    keyer_pose_destroy(&tr);
    keyer_prepare_destroy(&prep);
    keyer_runtime_destroy(&rt);
    keyer_model_destroy(&m);
    return crops;
}
