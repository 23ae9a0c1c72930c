/* The session's face-mesh stage against the per-frame analyser: see kt_mesh_session.h. */
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
#include "keyer/registry.h"
#include "kt_mesh_session.h"
#include "kt_session.h"
#include "vision/vmodel.h"
#include "testutil.h"

/* faces_fn: the streams' writer threads call it concurrently, each for its own stream only
 * (rec's per-stream rows); the two counters are only read after the session is destroyed,
 * and a race on them could only make a correct run fail the counts, never pass a wrong one. */
static keyer_status ms_faces(void *opaque, int sid, int64_t index, const keyer_frame *frame,
                             const keyer_face *faces, int count, keyer_overlay *ov,
                             keyer_error *err)
{
    ms_rec *r = opaque;
    __atomic_add_fetch(&r->calls, 1, __ATOMIC_RELAXED);
    if (sid < 0 || sid >= r->streams || index != r->next[sid] || index >= r->frames || !frame ||
        count < 0 || count > MS_KEEP || (count > 0 && !faces)) {
        __atomic_add_fetch(&r->out_of_order, 1, __ATOMIC_RELAXED);
        return KEYER_OK;
    }
    r->next[sid]++;
    r->n[sid][index] = count;
    for (int i = 0; i < count; i++) {
        if (!faces[i].has_landmarks)
            __atomic_add_fetch(&r->out_of_order, 1, __ATOMIC_RELAXED);
        r->ids[sid][index][i] = faces[i].id;
        r->presence[sid][index][i] = faces[i].presence;
        r->side[sid][index][i] = faces[i].roi.width;
        r->roi[sid][index][i] = faces[i].roi;
        for (int k = 0; k < KEYER_FACE_MESH_POINTS; k++) {
            r->lm[sid][index][i][k][0] = faces[i].landmarks[k][0];
            r->lm[sid][index][i][k][1] = faces[i].landmarks[k][1];
        }
    }
    /* the drawing the tool does, on the frame's device */
    return keyer_faces_draw(ov, faces, count, NULL, err);
}

static keyer_session *ms_session(int device, int precision, int batch, int keying, ms_rec *rec,
                                 int streams, int frames, keyer_logger *lg)
{
    memset(rec, 0, sizeof(*rec));
    rec->streams = streams;
    rec->frames = frames;
    keyer_session_params sp = kt_session_params(device, precision, batch, keying, lg);
    sp.detect = KEYER_SESSION_DETECT_FACES;
    sp.mesh = 1;
    sp.mesh_max_faces = MS_KEEP;
    sp.mesh_detect_interval = MS_INTERVAL;
    sp.faces_fn = ms_faces;
    sp.faces_opaque = rec;
    return kt_session_create(&sp);
}

void ms_make_clips(const char *dir, int n, const int sizes[][2], int frames, char paths[][4096])
{
    char img[4096];
    keyer_error err = {0};
    for (int i = 0; i < n; i++) {
        snprintf(paths[i], 4096, "%s/ms_in%d_%dx%d.mp4", dir, i, sizes[i][0], sizes[i][1]);
        keyer_sample_params p = keyer_sample_params_defaults();
        p.width = sizes[i][0];
        p.height = sizes[i][1];
        p.frames = frames;
        p.frame_rate = (keyer_rational){25, 1};
        p.preset = "ultrafast";
        p.bframes = 0;
        if (keyer_video_write_sample(paths[i], kt_data_path(img, sizeof(img), "grace_hopper.jpg"),
                                     &p, &err))
            fail_msg("sample: %s", err.message);
    }
}

/* One run over files (@p inputs) or pushed frames, recorded into @p rec and checked. */
static void ms_run(const char *const *inputs, keyer_frame *const *frames, int n, int nframes,
                   const char *dir, int device, int precision, int batch, int keying, ms_rec *rec)
{
    keyer_logger lg;
    keyer_session_report rep;
    keyer_session *s = ms_session(device, precision, batch, keying, rec, n, nframes, &lg);
    kt_session_feed(s, inputs, frames, n, nframes, dir, "ms_push");
    kt_session_finish(&s, device, n * nframes, 8, "mesh", &rep);
    kt_session_check_calls(rec->calls, rec->out_of_order, n * nframes);
}

void ms_run_files(const char *const *inputs, int n, int frames, int device, int precision,
                  int batch, int keying, ms_rec *rec)
{
    ms_run(inputs, NULL, n, frames, NULL, device, precision, batch, keying, rec);
}

void ms_run_pushed(keyer_frame *const *frames, int n, int nframes, const char *dir, int device,
                   int precision, ms_rec *rec)
{
    ms_run(NULL, frames, n, nframes, dir, device, precision, 0, 0, rec);
}

void ms_decode(const char *input, int nframes, int format, keyer_frame **out)
{
    keyer_error err = {0};
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    rp.format = format;
    keyer_reader *r = NULL;
    keyer_frame *f = NULL;
    if (keyer_reader_open(input, &rp, &r, &err) || keyer_frame_create(&f, &err))
        fail_msg("%s: %s", input, err.message);
    for (int i = 0; i < nframes; i++) {
        out[i] = NULL;
        if (keyer_reader_read(r, f, &err) || keyer_frame_create(&out[i], &err) ||
            keyer_frame_alloc(out[i], f->format, f->width, f->height, NULL, &err) ||
            keyer_frame_copy(out[i], f, &err))
            fail_msg("%s frame %d: %s", input, i, err.message);
    }
    keyer_frame_destroy(&f);
    keyer_reader_destroy(&r);
}

void ms_reference(keyer_frame *const *frames, int nframes, int sid, ms_rec *rec)
{
    keyer_faces_params fp = keyer_faces_params_defaults();
    fp.landmarks = 1;
    fp.max_faces = MS_KEEP;
    fp.detect_interval = MS_INTERVAL;
    fp.threads = 1;
    keyer_faces *fa = NULL;
    keyer_error err = {0};
    if (keyer_faces_create(&fp, &fa, &err))
        fail_msg("faces: %s", err.message);
    if (sid >= rec->streams)
        rec->streams = sid + 1;
    rec->frames = nframes;
    for (int i = 0; i < nframes; i++) {
        const keyer_face *faces = NULL;
        int n = 0;
        if (keyer_faces_run(fa, frames[i], &faces, &n, &err))
            fail_msg("faces frame %d: %s", i, err.message);
        rec->n[sid][i] = n;
        for (int k = 0; k < n && k < MS_KEEP; k++) {
            rec->ids[sid][i][k] = faces[k].id;
            rec->presence[sid][i][k] = faces[k].presence;
            rec->side[sid][i][k] = faces[k].roi.width;
            rec->roi[sid][i][k] = faces[k].roi;
            for (int p = 0; p < KEYER_FACE_MESH_POINTS; p++) {
                rec->lm[sid][i][k][p][0] = faces[k].landmarks[p][0];
                rec->lm[sid][i][k][p][1] = faces[k].landmarks[p][1];
            }
        }
    }
    keyer_faces_destroy(&fa);
}

double ms_compare(const ms_rec *a, const ms_rec *b, int max_mismatch, double *worst_rel,
                  int *faces, int *with_faces)
{
    double worst = 0, rel = 0;
    int mismatch = 0;
    *faces = *with_faces = 0;
    assert_int_equal(a->streams, b->streams);
    assert_int_equal(a->frames, b->frames);
    for (int s = 0; s < a->streams; s++)
        for (int i = 0; i < a->frames; i++) {
            if (a->n[s][i] != b->n[s][i]) {
                print_message("  stream %d frame %d: %d faces against %d\n", s, i, a->n[s][i],
                              b->n[s][i]);
                mismatch++;
                continue;
            }
            *with_faces += a->n[s][i] > 0;
            for (int k = 0; k < a->n[s][i]; k++) {
                if (!max_mismatch && a->ids[s][i][k] != b->ids[s][i][k])
                    fail_msg("stream %d frame %d face %d: id %u against %u", s, i, k,
                             (unsigned)a->ids[s][i][k], (unsigned)b->ids[s][i][k]);
                (*faces)++;
                kt_points_distance(&a->lm[s][i][k][0][0], &b->lm[s][i][k][0][0],
                                   KEYER_FACE_MESH_POINTS, 2, a->side[s][i][k], &worst, &rel);
            }
        }
    if (mismatch > max_mismatch)
        fail_msg("%d frames with different face counts (at most %d allowed)", mismatch,
                 max_mismatch);
    if (worst_rel)
        *worst_rel = rel;
    return worst;
}

int ms_same_crops(const ms_rec *got, keyer_frame *const *frames, int nframes, double *max_rel,
                  double *max_px)
{
    keyer_error err = {0};
    keyer_model *m = NULL;
    keyer_runtime *rt = NULL;
    keyer_prepare *prep = NULL;
    kt_cpu_model("face-mesh", &m, &rt);
    int o_pts = -1;
    for (int i = 0; i < keyer_model_output_count(m) && o_pts < 0; i++) {
        keyer_tensor_info t;
        if (keyer_model_output_info(m, i, &t, &err))
            fail_msg("%s", err.message);
        size_t n = 1;
        for (int d = 0; d < t.rank; d++)
            n *= (size_t)t.dims[d];
        if (n == KEYER_FACE_MESH_POINTS * 3)
            o_pts = i;
    }
    assert_true(o_pts >= 0);
    keyer_tensor_info in;
    if (keyer_model_input_info(m, 0, &in, &err))
        fail_msg("%s", err.message);
    /* the mesh stage's preparation (src/pipeline/mesh.c) and keyer_faces_run()'s */
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    pp.width = in.dims[2];
    pp.height = in.dims[1];
    pp.fit = KEYER_FIT_STRETCH;
    pp.scale = 1.0f;
    pp.offset = 0.0f;
    if (keyer_prepare_create(&pp, &prep, &err))
        fail_msg("%s", err.message);
    int crops = 0;
    *max_rel = *max_px = 0;
    for (int s = 0; s < got->streams; s++)
        for (int i = 0; i < got->frames && i < nframes; i++)
            for (int k = 0; k < got->n[s][i]; k++) {
                const keyer_frame *f = frames[s * nframes + i];
                keyer_roi roi = got->roi[s][i][k];
                keyer_prepare_geometry geo;
                if (keyer_prepare_run(prep, &f, &roi, 1, keyer_runtime_input_data(rt, 0), &geo,
                                      &err) ||
                    keyer_runtime_run(rt, &err))
                    fail_msg("stream %d frame %d face %d: %s", s, i, k, err.message);
                const float *pts = keyer_runtime_output_data(rt, o_pts);
                double side = got->side[s][i][k] > 1 ? got->side[s][i][k] : 1;
                for (int p = 0; p < KEYER_FACE_MESH_POINTS; p++) {
                    float x, y;
                    kr_geo_apply(&geo, pts[3 * p], pts[3 * p + 1], &x, &y);
                    double dx = (double)x - got->lm[s][i][k][p][0];
                    double dy = (double)y - got->lm[s][i][k][p][1];
                    double d = sqrt(dx * dx + dy * dy);
                    if (isnan(d))
                        d = INFINITY;
                    *max_px = d > *max_px ? d : *max_px;
                    *max_rel = d / side > *max_rel ? d / side : *max_rel;
                }
                crops++;
            }
    keyer_prepare_destroy(&prep);
    keyer_runtime_destroy(&rt);
    keyer_model_destroy(&m);
    return crops;
}
