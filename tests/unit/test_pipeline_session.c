/*
 * The keying session end to end on the CPU:
 *  - pushed frames come out equal to the effects chain run by hand (prepare, runtime, refine,
 *    composite), for a stretched probability model and a letterboxed logit model;
 *  - several streams of different sizes and formats in one session give the same frames as
 *    separate sessions (per-stream temporal state, shared batches, order);
 *  - files: frame count, timestamps and audio kept, statistics and trace files valid;
 *  - cancel mid-run leaves a valid output holding every frame read;
 *  - back-pressure (AGAIN), live dropping, received frames outliving the session;
 *  - bad inputs and parameters give the documented statuses and messages.
 */
#define _POSIX_C_SOURCE 200809L
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
#include <unistd.h>

#include "keyer/effects.h"
#include "keyer/image.h"
#include "keyer/io.h"
#include "keyer/nn.h"
#include "keyer/pipeline.h"
#include "keyer/registry.h"
#include "kt_detect_session.h"
#include "kt_json.h"
#include "kt_mesh_session.h"
#include "kt_session.h"
#include "testutil.h"

static keyer_frame *photo; /* grace_hopper.jpg, RGB24 */

static int setup(void **state)
{
    (void)state;
    char path[4096];
    keyer_error err = {0};
    if (keyer_frame_create(&photo, &err) ||
        keyer_image_read(kt_data_path(path, sizeof(path), "grace_hopper.jpg"),
                         KEYER_PIXEL_FORMAT_RGB24, photo, &err)) {
        fprintf(stderr, "cannot read the test photo: %s\n", err.message);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    keyer_frame_destroy(&photo);
    return 0;
}

static keyer_logger quiet(void)
{
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_ERROR;
    return lg;
}

/* Frame @p i of a synthetic clip: a window over the photo moving right and down, resampled
 * (nearest) to w x h, in RGB24 or RGBA. */
static keyer_frame *make_frame(int w, int h, keyer_pixel_format fmt, int i)
{
    keyer_frame *f = NULL;
    assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
    assert_int_equal(keyer_frame_alloc(f, fmt, w, h, NULL, NULL), KEYER_OK);
    int bpp = fmt == KEYER_PIXEL_FORMAT_RGBA ? 4 : 3;
    int win_w = photo->width * 3 / 4, win_h = photo->height * 3 / 4;
    int ox = (i * 5) % (photo->width - win_w), oy = (i * 3) % (photo->height - win_h);
    for (int y = 0; y < h; y++) {
        const uint8_t *srow = photo->data[0] + (ptrdiff_t)(oy + y * win_h / h) * photo->stride[0];
        uint8_t *d = f->data[0] + (ptrdiff_t)y * f->stride[0];
        for (int x = 0; x < w; x++) {
            const uint8_t *s = srow + 3 * (ox + x * win_w / w);
            d[bpp * x] = s[0];
            d[bpp * x + 1] = s[1];
            d[bpp * x + 2] = s[2];
            if (bpp == 4)
                d[bpp * x + 3] = 255;
        }
    }
    f->pts = i;
    f->time_base = (keyer_rational){1, 30};
    return f;
}

/* ---- the effects chain by hand --------------------------------------------------------------- */

typedef struct reference {
    const keyer_model_entry *entry;
    keyer_model *model;
    keyer_runtime *rt;
    keyer_prepare *prep;
    keyer_refine *refine;
    keyer_composite *comp;
    keyer_frame *mask, *alpha;
    float *maskbuf;
    int mw, mh, mc;
} reference;

static void reference_open(reference *r, const char *model, const keyer_session_params *sp)
{
    memset(r, 0, sizeof(*r));
    char path[4096];
    keyer_error err = {0};
    r->entry = keyer_registry_find(model);
    assert_non_null(r->entry);
    assert_int_equal(keyer_registry_resolve(model, path, sizeof(path), &err), KEYER_OK);
    assert_int_equal(keyer_model_load_file(path, &r->model, &err), KEYER_OK);
    keyer_runtime_params rp = keyer_runtime_params_defaults();
    rp.batch = 1;
    assert_int_equal(keyer_runtime_create(r->model, &rp, &r->rt, &err), KEYER_OK);
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    pp.width = r->entry->input_width;
    pp.height = r->entry->input_height;
    pp.fit = r->entry->letterbox ? KEYER_FIT_LETTERBOX : KEYER_FIT_STRETCH;
    pp.scale = r->entry->input_scale;
    pp.offset = r->entry->input_offset;
    pp.threads = 1;
    assert_int_equal(keyer_prepare_create(&pp, &r->prep, &err), KEYER_OK);
    keyer_refine_params fp = sp->refine;
    fp.max_streams = 4;
    fp.threads = 1;
    assert_int_equal(keyer_refine_create(&fp, &r->refine, &err), KEYER_OK);
    keyer_composite_params cp = sp->composite;
    cp.threads = 1;
    assert_int_equal(keyer_composite_create(&cp, &r->comp, &err), KEYER_OK);
    keyer_tensor_info mo;
    assert_int_equal(keyer_model_output_info(r->model, r->entry->mask_output, &mo, &err), KEYER_OK);
    r->mh = mo.dims[1];
    r->mw = mo.dims[2];
    r->mc = mo.rank == 4 ? mo.dims[3] : 1;
    r->maskbuf = malloc(sizeof(float) * (size_t)r->mw * (size_t)r->mh);
    assert_non_null(r->maskbuf);
    assert_int_equal(keyer_frame_create(&r->mask, &err), KEYER_OK);
    r->mask->format = KEYER_PIXEL_FORMAT_GRAYF32;
    r->mask->width = r->mw;
    r->mask->height = r->mh;
    r->mask->data[0] = (uint8_t *)r->maskbuf;
    r->mask->stride[0] = (ptrdiff_t)r->mw * 4;
    assert_int_equal(keyer_frame_create(&r->alpha, &err), KEYER_OK);
}

/* Keys @p f (stream @p stream of the reference's refine state) into a new frame. */
static keyer_frame *reference_run(reference *r, const keyer_frame *f, int stream)
{
    keyer_error err = {0};
    keyer_prepare_geometry g;
    const keyer_frame *frames[1] = {f};
    assert_int_equal(keyer_prepare_run(r->prep, frames, NULL, 1, keyer_runtime_input_data(r->rt, 0),
                                       &g, &err),
                     KEYER_OK);
    assert_int_equal(keyer_runtime_run(r->rt, &err), KEYER_OK);
    const float *out = keyer_runtime_output_data(r->rt, r->entry->mask_output);
    for (int k = 0; k < r->mw * r->mh; k++) {
        float v = out[(size_t)k * (size_t)r->mc];
        r->maskbuf[k] = r->entry->mask_is_logit ? 1.0f / (1.0f + expf(-v)) : v;
    }
    keyer_rectf region, *rp = NULL;
    if (r->entry->letterbox) {
        float sx = (float)r->mw / (float)r->entry->input_width;
        float sy = (float)r->mh / (float)r->entry->input_height;
        region = (keyer_rectf){g.content.x * sx, g.content.y * sy, g.content.width * sx,
                               g.content.height * sy};
        rp = &region;
    }
    if (r->alpha->width != f->width || r->alpha->height != f->height)
        assert_int_equal(keyer_frame_alloc(r->alpha, KEYER_PIXEL_FORMAT_GRAY8, f->width, f->height,
                                           NULL, &err),
                         KEYER_OK);
    assert_int_equal(keyer_refine_run(r->refine, stream, f, r->mask, rp, r->alpha, &err), KEYER_OK);
    keyer_frame *o = NULL;
    assert_int_equal(keyer_frame_create(&o, &err), KEYER_OK);
    int mode = keyer_composite_params_defaults().mode;
    (void)mode;
    assert_int_equal(keyer_frame_alloc(o, f->format, f->width, f->height, NULL, &err), KEYER_OK);
    assert_int_equal(keyer_composite_run(r->comp, f, r->alpha, o, &err), KEYER_OK);
    return o;
}

static void reference_close(reference *r)
{
    keyer_composite_destroy(&r->comp);
    keyer_refine_destroy(&r->refine);
    keyer_prepare_destroy(&r->prep);
    keyer_runtime_destroy(&r->rt);
    keyer_model_destroy(&r->model);
    keyer_frame_destroy(&r->mask);
    keyer_frame_destroy(&r->alpha);
    free(r->maskbuf);
}

/* Largest difference between the pixels of two host frames of one packed format. */
static int max_diff(const keyer_frame *a, const keyer_frame *b, double *mean)
{
    assert_int_equal(a->format, b->format);
    assert_int_equal(a->width, b->width);
    assert_int_equal(a->height, b->height);
    int bpp = a->format == KEYER_PIXEL_FORMAT_RGBA ? 4 : a->format == KEYER_PIXEL_FORMAT_GRAY8 ? 1 : 3;
    int worst = 0;
    double sum = 0;
    for (int y = 0; y < a->height; y++) {
        const uint8_t *pa = a->data[0] + (ptrdiff_t)y * a->stride[0];
        const uint8_t *pb = b->data[0] + (ptrdiff_t)y * b->stride[0];
        for (int x = 0; x < a->width * bpp; x++) {
            int d = abs((int)pa[x] - (int)pb[x]);
            sum += d;
            if (d > worst)
                worst = d;
        }
    }
    if (mean)
        *mean = sum / ((double)a->width * a->height * bpp);
    return worst;
}

/* Sends @p n frames through a one-stream session and returns them (caller frees). */
static keyer_frame **session_frames(keyer_session_params *sp, int w, int h, keyer_pixel_format fmt,
                                    int n)
{
    keyer_session *s = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_session_create(sp, &s, &err), KEYER_OK);
    keyer_stream_params stp = keyer_stream_params_defaults();
    stp.width = w;
    stp.height = h;
    stp.format = fmt;
    int id = -1;
    assert_int_equal(keyer_session_open_stream(s, &stp, &id, &err), KEYER_OK);
    assert_int_equal(id, 0);
    keyer_frame **out = calloc((size_t)n, sizeof(*out));
    assert_non_null(out);
    int sent = 0, got = 0;
    while (got < n) {
        while (sent < n) {
            keyer_frame *f = make_frame(w, h, fmt, sent);
            keyer_status st = keyer_session_send_frame(s, id, f, &err);
            keyer_frame_destroy(&f);
            if (st == KEYER_STATUS_AGAIN)
                break;
            assert_int_equal(st, KEYER_OK);
            if (++sent == n)
                assert_int_equal(keyer_session_close_stream(s, id, &err), KEYER_OK);
        }
        assert_int_equal(keyer_frame_create(&out[got], &err), KEYER_OK);
        assert_int_equal(keyer_session_receive_frame(s, id, out[got], -1, &err), KEYER_OK);
        assert_int_equal(out[got]->pts, got);
        got++;
    }
    keyer_frame *extra = NULL;
    keyer_frame_create(&extra, NULL);
    assert_int_equal(keyer_session_receive_frame(s, id, extra, -1, &err), KEYER_STATUS_END);
    keyer_frame_destroy(&extra);
    keyer_session_report rep;
    keyer_session_get_report(s, &rep);
    assert_int_equal(rep.frames_read, n);
    assert_int_equal(rep.frames_written, n);
    assert_int_equal(rep.frames_on_cpu, n);
    assert_string_equal(rep.device, "cpu");
    assert_int_equal(rep.latency.count, n);
    keyer_session_destroy(&s);
    return out;
}

static void check_against_reference(const char *model, int batch)
{
    enum { N = 10, W = 320, H = 192 };
    keyer_logger lg = quiet();
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.model = model;
    sp.batch = batch;
    sp.logger = &lg;
    keyer_frame **got = session_frames(&sp, W, H, KEYER_PIXEL_FORMAT_RGB24, N);
    reference r;
    reference_open(&r, model, &sp);
    int worst = 0;
    for (int i = 0; i < N; i++) {
        keyer_frame *f = make_frame(W, H, KEYER_PIXEL_FORMAT_RGB24, i);
        keyer_frame *want = reference_run(&r, f, 0);
        double mean;
        int d = max_diff(got[i], want, &mean);
        if (d > worst)
            worst = d;
        if (getenv("KEYER_TEST_VERBOSE"))
            printf("%s batch %d frame %d: max diff %d mean %.5f\n", model, batch, i, d, mean);
        if (d > 1 || mean > 0.01)
            fail_msg("%s batch %d frame %d: max diff %d, mean %.4f", model, batch, i, d, mean);
        keyer_frame_destroy(&f);
        keyer_frame_destroy(&want);
        keyer_frame_destroy(&got[i]);
    }
    free(got);
    reference_close(&r);
}

static void test_push_matches_reference(void **state)
{
    (void)state;
    check_against_reference("selfie", 1);
    check_against_reference("selfie", 4);
}

static void test_push_letterboxed_logits(void **state)
{
    (void)state;
    check_against_reference("pose-lite", 2);
}

/* ---- several streams ------------------------------------------------------------------------- */

static void test_streams_equal_separate_runs(void **state)
{
    (void)state;
    enum { N = 12 };
    keyer_logger lg = quiet();
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.model = "selfie";
    sp.batch = 4;
    sp.composite_workers = 3;
    sp.logger = &lg;
    const int w[2] = {320, 200}, h[2] = {180, 256};
    const keyer_pixel_format fmt[2] = {KEYER_PIXEL_FORMAT_RGB24, KEYER_PIXEL_FORMAT_RGBA};
    keyer_frame **alone[2];
    for (int k = 0; k < 2; k++)
        alone[k] = session_frames(&sp, w[k], h[k], fmt[k], N);
    /* both in one session, frames interleaved, shared batches; then again with the two
     * streams on two refine workers */
    for (int workers = 1; workers <= 2; workers++) {
        sp.refine_workers = workers;
        keyer_session *s = NULL;
        keyer_error err = {0};
        assert_int_equal(keyer_session_create(&sp, &s, &err), KEYER_OK);
        int id[2];
        for (int k = 0; k < 2; k++) {
            keyer_stream_params stp = keyer_stream_params_defaults();
            stp.width = w[k];
            stp.height = h[k];
            stp.format = fmt[k];
            assert_int_equal(keyer_session_open_stream(s, &stp, &id[k], &err), KEYER_OK);
        }
        assert_int_equal(keyer_session_stream_count(s), 2);
        int sent[2] = {0, 0}, got[2] = {0, 0};
        while (got[0] < N || got[1] < N) {
            for (int k = 0; k < 2; k++) {
                if (sent[k] < N) {
                    keyer_frame *f = make_frame(w[k], h[k], fmt[k], sent[k]);
                    keyer_status st = keyer_session_send_frame(s, id[k], f, &err);
                    keyer_frame_destroy(&f);
                    if (st == KEYER_OK && ++sent[k] == N)
                        assert_int_equal(keyer_session_close_stream(s, id[k], &err), KEYER_OK);
                    else if (st != KEYER_OK)
                        assert_int_equal(st, KEYER_STATUS_AGAIN);
                }
            }
            for (int k = 0; k < 2; k++) {
                keyer_frame *o = NULL;
                keyer_frame_create(&o, NULL);
                keyer_status st = keyer_session_receive_frame(s, id[k], o, 20000, &err);
                if (st == KEYER_OK) {
                    assert_int_equal(o->pts, got[k]);
                    double mean;
                    int d = max_diff(o, alone[k][got[k]], &mean);
                    if (d > 1)
                        fail_msg("stream %d frame %d differs from its separate run by %d", k, got[k], d);
                    got[k]++;
                } else if (st != KEYER_STATUS_AGAIN) {
                    assert_int_equal(st, KEYER_STATUS_END);
                    assert_int_equal(got[k], N);
                }
                keyer_frame_destroy(&o);
            }
        }
        keyer_session_report rep;
        keyer_session_get_report(s, &rep);
        assert_int_equal(rep.frames_written, 2 * N);
        assert_true(rep.batches >= 2 * N / 4);
        assert_true(rep.batch_mean >= 1.0 && rep.batch_mean <= 4.0);
        int refine_seen = 0;
        for (int i = 0; i < rep.stage_count; i++)
            if (!strcmp(rep.stages[i].name, "refine")) {
                assert_int_equal(rep.stages[i].workers, workers);
                assert_int_equal(rep.stages[i].frames, 2 * N);
                refine_seen = 1;
            }
        assert_true(refine_seen);
        keyer_stream_report sr;
        assert_int_equal(keyer_session_get_stream_report(s, 1, &sr, &err), KEYER_OK);
        assert_int_equal(sr.width, 200);
        assert_int_equal(sr.frames_written, N);
        assert_int_equal(keyer_session_get_stream_report(s, 2, &sr, &err),
                         KEYER_STATUS_INVALID_ARGUMENT);
        keyer_session_destroy(&s);
    }
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < N; i++)
            keyer_frame_destroy(&alone[k][i]);
        free(alone[k]);
    }
}

/* ---- files ------------------------------------------------------------------------------------ */

static const char *tmp_path(char *buf, size_t n, const char *name)
{
    char dir[3000];
    kt_tmpdir(dir, sizeof(dir), "pipeline_session");
    snprintf(buf, n, "%s/%s", dir, name);
    return buf;
}

static void make_sample(const char *path, int w, int h, int frames)
{
    char img[4096];
    keyer_sample_params p = keyer_sample_params_defaults();
    p.width = w;
    p.height = h;
    p.frames = frames;
    p.frame_rate = (keyer_rational){25, 1};
    p.preset = "ultrafast";
    keyer_error err = {0};
    if (keyer_video_write_sample(path, kt_data_path(img, sizeof(img), "grace_hopper.jpg"), &p,
                                 &err))
        fail_msg("sample: %s", err.message);
}

/* Decodes @p path: frame count, first/last pts, audio. */
/* Adds the file @p in to session @p s, written to @p out with x264's fastest preset (@p out
 * NULL: analysed and discarded); asserts that the session takes it. */
static void add_file(keyer_session *s, const char *in, const char *out)
{
    keyer_file_stream_params fp = keyer_file_stream_params_defaults();
    fp.input = in;
    fp.output = out;
    fp.writer.preset = "ultrafast";
    keyer_error err = {0};
    assert_int_equal(keyer_session_add_file(s, &fp, NULL, &err), KEYER_OK);
}

static int64_t count_frames(const char *path, int *has_audio, int64_t *last_pts)
{
    keyer_logger lg = quiet();
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    rp.logger = &lg;
    keyer_reader *r = NULL;
    keyer_frame *f = NULL;
    keyer_error err = {0};
    if (keyer_reader_open(path, &rp, &r, &err))
        fail_msg("%s", err.message);
    keyer_frame_create(&f, NULL);
    if (has_audio)
        *has_audio = keyer_reader_info(r)->has_audio;
    int64_t n = 0, prev = INT64_MIN;
    while (keyer_reader_read(r, f, &err) == KEYER_OK) {
        assert_true(f->pts > prev);
        prev = f->pts;
        n++;
    }
    if (last_pts)
        *last_pts = prev;
    keyer_frame_destroy(&f);
    keyer_reader_destroy(&r);
    return n;
}

static char *slurp_file(const char *path)
{
    size_t n = 0;
    char *data = kt_read_file(path, &n);
    if (!data)
        return NULL;
    char *text = realloc(data, n + 1);
    if (!text) {
        free(data);
        return NULL;
    }
    text[n] = 0;
    return text;
}

static void test_file_run(void **state)
{
    (void)state;
    char in[4096], out[4096], stats[4096], trace[4096];
    tmp_path(in, sizeof(in), "in.mp4");
    tmp_path(out, sizeof(out), "out.mp4");
    tmp_path(stats, sizeof(stats), "stats.json");
    tmp_path(trace, sizeof(trace), "trace.json");
    make_sample(in, 320, 240, 30);
    keyer_logger lg = quiet();
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.logger = &lg;
    sp.trace_events = 4096;
    sp.composite.mode = KEYER_COMPOSITE_COLOR;
    sp.composite.color = 0x2040ff;
    keyer_session *s = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_session_create(&sp, &s, &err), KEYER_OK);
    add_file(s, in, out);
    assert_int_equal(keyer_session_run(s, &err), KEYER_OK);
    assert_int_equal(keyer_session_run(s, &err), KEYER_STATUS_INVALID_ARGUMENT); /* once */
    keyer_session_report rep;
    keyer_session_get_report(s, &rep);
    assert_int_equal(rep.frames_read, 30);
    assert_int_equal(rep.frames_written, 30);
    assert_int_equal(rep.frames_dropped, 0);
    assert_string_equal(rep.model, "selfie"); /* 4:3 is not wide: the square model */
    assert_string_equal(rep.model_precision, "f32"); /* AUTO on the CPU */
    assert_string_equal(rep.model_schedule, "");      /* no CUDA runtime */
    assert_string_equal(rep.detector_precision, "");  /* no detector */
    assert_true(rep.fps > 0);
    assert_int_equal(rep.stage_count, 6);
    assert_true(rep.bottleneck >= 0 && rep.bottleneck < 6);
    for (int i = 0; i < rep.stage_count; i++)
        assert_int_equal(rep.stages[i].frames, 30);
    keyer_stream_report sr;
    assert_int_equal(keyer_session_get_stream_report(s, 0, &sr, &err), KEYER_OK);
    assert_int_equal(sr.has_audio, 1);
    assert_string_equal(sr.encoder, "libx264");
    assert_int_equal(keyer_session_write_stats(s, stats, &err), KEYER_OK);
    assert_int_equal(keyer_session_write_trace(s, trace, &err), KEYER_OK);
    keyer_session_destroy(&s);
    int audio = 0;
    int64_t last = 0, first_in_last = 0;
    assert_int_equal(count_frames(out, &audio, &last), 30);
    assert_int_equal(audio, 1);
    assert_int_equal(count_frames(in, NULL, &first_in_last), 30);
    assert_int_equal(last, first_in_last); /* same timestamps, so the same duration */
    char *text = slurp_file(stats);
    assert_non_null(text);
    assert_true(json_objects(text) > 5);
    assert_non_null(strstr(text, "\"bottleneck\": \""));
    assert_non_null(strstr(text, "\"written\": 30"));
    free(text);
    text = slurp_file(trace);
    assert_non_null(text);
    assert_true(json_objects(text) > 30 * 5);
    assert_non_null(strstr(text, "\"name\":\"composite\""));
    free(text);
}

/* What the frame callback saw: frames in order per stream, host memory, the output equal to
 * the input in passthrough; it draws a white square on the output, and fails at fail_at. */
/* frame_fn runs on each stream's writer thread, concurrently for two streams: the counters
 * both streams add to are atomic; next[] is per stream. */
typedef struct hook_log {
    int64_t next[2];
    atomic_int calls, out_of_order, not_host, differs, bad_size;
    int64_t fail_at;
} hook_log;

static keyer_status hook(void *opaque, int stream_id, int64_t index, const keyer_frame *in,
                         keyer_frame *out, keyer_error *err)
{
    hook_log *h = opaque;
    h->calls++;
    if (stream_id < 0 || stream_id > 1 || index != h->next[stream_id])
        h->out_of_order++;
    if (stream_id >= 0 && stream_id <= 1)
        h->next[stream_id] = index + 1;
    if (in->memory != KEYER_MEMORY_HOST || out->memory != KEYER_MEMORY_HOST)
        h->not_host++;
    if (in->width != out->width || in->height != out->height || in->format != out->format)
        h->bad_size++;
    else if (memcmp(in->data[0], out->data[0], (size_t)in->width) != 0)
        h->differs++; /* first luma row: equal in passthrough */
    for (int y = 0; y < 16 && y < out->height; y++)
        memset(out->data[0] + y * out->stride[0], 235, (size_t)(out->width < 16 ? out->width : 16));
    if (index == h->fail_at)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "hook failed on purpose at %lld",
                               (long long)index);
    return KEYER_OK;
}

/* keyer_session_params::frame_fn and ::passthrough: every frame of every stream reaches the
 * callback once, in order, in host memory; passthrough loads no model and writes the input
 * with what the callback drew; a callback error fails the stream with a valid output. */
static void test_frame_callback_passthrough(void **state)
{
    (void)state;
    char in[4096], in2[4096], out[4096], out2[4096];
    tmp_path(in, sizeof(in), "cb_in.mp4");
    tmp_path(in2, sizeof(in2), "cb_in2.mp4");
    tmp_path(out, sizeof(out), "cb_out.mp4");
    tmp_path(out2, sizeof(out2), "cb_out2.mp4");
    make_sample(in, 320, 240, 20);
    make_sample(in2, 160, 120, 12);
    keyer_logger lg = quiet();
    hook_log h;
    memset(&h, 0, sizeof(h));
    h.fail_at = -1;
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.logger = &lg;
    sp.passthrough = 1;
    sp.frame_fn = hook;
    sp.frame_opaque = &h;
    keyer_session *s = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_session_create(&sp, &s, &err), KEYER_OK);
    add_file(s, in, out);
    add_file(s, in2, NULL); /* analysed and discarded */
    assert_int_equal(keyer_session_run(s, &err), KEYER_OK);
    keyer_session_report rep;
    keyer_session_get_report(s, &rep);
    assert_string_equal(rep.model, "none");
    assert_int_equal(rep.frames_written, 32);
    keyer_session_destroy(&s);
    assert_int_equal(h.calls, 32);
    assert_int_equal(h.next[0], 20);
    assert_int_equal(h.next[1], 12);
    assert_int_equal(h.out_of_order, 0);
    assert_int_equal(h.not_host, 0);
    assert_int_equal(h.bad_size, 0);
    assert_int_equal(h.differs, 0);
    assert_int_equal(count_frames(out, NULL, NULL), 20);
    /* what the callback drew is in the written frames: a white corner */
    keyer_reader *r = NULL;
    keyer_frame *f = NULL;
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    assert_int_equal(keyer_reader_open(out, &rp, &r, &err), KEYER_OK);
    assert_int_equal(keyer_frame_create(&f, &err), KEYER_OK);
    assert_int_equal(keyer_reader_read(r, f, &err), KEYER_OK);
    assert_true(f->data[0][4 * f->stride[0] + 4] > 220);
    keyer_frame_destroy(&f);
    keyer_reader_destroy(&r);

    /* with keying, and a callback that fails at frame 5: the output holds frames 0..4 */
    memset(&h, 0, sizeof(h));
    h.fail_at = 5;
    sp.passthrough = 0;
    sp.composite.mode = KEYER_COMPOSITE_COLOR;
    assert_int_equal(keyer_session_create(&sp, &s, &err), KEYER_OK);
    add_file(s, in, out2);
    assert_int_not_equal(keyer_session_run(s, &err), KEYER_OK);
    assert_non_null(strstr(err.message, "hook failed on purpose at 5"));
    keyer_session_destroy(&s);
    assert_int_equal(h.out_of_order, 0);
    assert_int_equal(h.differs > 0, 1); /* the keyed output is not the input */
    assert_int_equal(count_frames(out2, NULL, NULL), 5);
}

/* keyer_session_params::detect on the CPU (kt_detect_session.h). */
static void test_session_detect(void **state)
{
    (void)state;
    char dir[3000];
    kt_tmpdir(dir, sizeof(dir), "pipeline_session");
    ds_check_session_detect(dir, KEYER_DEVICE_CPU, 0.999f);
}

static keyer_status detect_fails_at_5(void *opaque, int sid, int64_t index,
                                      const keyer_frame *frame, const keyer_detection *dets,
                                      int count, keyer_overlay *ov, keyer_error *err)
{
    (void)sid, (void)frame, (void)dets, (void)count, (void)ov;
    (*(int *)opaque)++;
    if (index == 5)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "detect_fn failed on purpose at 5");
    return KEYER_OK;
}

/* A failing detect_fn fails its stream like a write error: the output holds the frames before
 * it and is valid; the error names the stream and frame. Bad detect parameters are refused. */
static void test_session_detect_errors(void **state)
{
    (void)state;
    char in[4096], out[4096];
    tmp_path(in, sizeof(in), "det_err_in.mp4");
    tmp_path(out, sizeof(out), "det_err_out.mp4");
    make_sample(in, 320, 240, 12);
    keyer_logger lg = quiet();
    int calls = 0;
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.logger = &lg;
    sp.passthrough = 1;
    sp.detect = KEYER_SESSION_DETECT_FACES;
    sp.detect_fn = detect_fails_at_5;
    sp.detect_opaque = &calls;
    keyer_session *s = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_session_create(&sp, &s, &err), KEYER_OK);
    add_file(s, in, out);
    assert_int_not_equal(keyer_session_run(s, &err), KEYER_OK);
    assert_non_null(strstr(err.message, "detect_fn failed on purpose at 5"));
    assert_non_null(strstr(err.message, "frame 5"));
    keyer_session_destroy(&s);
    assert_int_equal(calls, 6);
    assert_int_equal(count_frames(out, NULL, NULL), 5);
    /* parameters */
    sp.detect_fn = NULL;
    kt_session_refused(&sp, &s, "detect_fn");
    sp.detect_fn = detect_fails_at_5;
    sp.detect = 7;
    kt_session_refused(&sp, &s, NULL);
    sp.detect = KEYER_SESSION_DETECT_FACES_FULL;
    sp.detect_min_score = 1.5f;
    kt_session_refused(&sp, &s, NULL);
    assert_null(s);
}

/* What a detect_fn for pulled streams saw: one call per frame, in order. */
typedef struct pulled_calls {
    int calls;
    int64_t last_index;
    int in_order;
} pulled_calls;

/* Records the call; fills the left half of frame 1 with opaque red; fails at frame 3. */
static keyer_status detect_pulled(void *opaque, int sid, int64_t index, const keyer_frame *frame,
                                  const keyer_detection *dets, int count, keyer_overlay *ov,
                                  keyer_error *err)
{
    (void)sid, (void)dets, (void)count;
    pulled_calls *c = opaque;
    c->in_order &= index == c->last_index + 1;
    c->last_index = index;
    c->calls++;
    if (index == 1)
        return keyer_overlay_add_box(ov, 0, 0, (float)frame->width / 2, (float)frame->height, 0,
                                     0, (keyer_color){0, 0, 0, 0}, (keyer_color){1, 0, 0, 1},
                                     err);
    if (index == 3)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "detect_fn failed on purpose at 3");
    return KEYER_OK;
}

/* A pushed stream read with keyer_session_receive_frame (passthrough with the session's
 * detector): detect_fn is called for each frame, in order, before receive returns it (on the
 * caller's thread); what it draws is on the returned frame (frame 1: the left half red, the
 * right half the input's pixels), an undrawn frame is the input; a failing detect_fn fails
 * the stream at that frame with its message. */
static void test_session_detect_pulled(void **state)
{
    (void)state;
    keyer_logger lg = quiet();
    pulled_calls calls = {0, -1, 1};
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.logger = &lg;
    sp.mode = KEYER_PIPELINE_LATENCY;
    sp.passthrough = 1;
    sp.detect = KEYER_SESSION_DETECT_FACES;
    sp.detect_fn = detect_pulled;
    sp.detect_opaque = &calls;
    keyer_session *s = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_session_create(&sp, &s, &err), KEYER_OK);
    const int w = 64, h = 48;
    keyer_stream_params stp = keyer_stream_params_defaults();
    stp.width = w;
    stp.height = h;
    stp.format = KEYER_PIXEL_FORMAT_RGBA;
    int id = -1;
    assert_int_equal(keyer_session_open_stream(s, &stp, &id, &err), KEYER_OK);
    keyer_frame *out = NULL;
    assert_int_equal(keyer_frame_create(&out, &err), KEYER_OK);
    for (int i = 0; i < 4; i++) {
        keyer_frame *f = make_frame(w, h, KEYER_PIXEL_FORMAT_RGBA, i);
        f->pts = i;
        assert_int_equal(keyer_session_send_frame(s, id, f, &err), KEYER_OK);
        keyer_status st = keyer_session_receive_frame(s, id, out, -1, &err);
        assert_int_equal(calls.calls, i + 1); /* called before the frame came back */
        if (i == 3) {
            assert_int_equal(st, KEYER_STATUS_INTERNAL);
            assert_non_null(strstr(err.message, "detect_fn failed on purpose at 3"));
            assert_non_null(strstr(err.message, "frame 3"));
            keyer_frame_destroy(&f);
            break;
        }
        assert_int_equal(st, KEYER_OK);
        assert_int_equal(out->pts, i);
        assert_int_equal(out->memory, KEYER_MEMORY_HOST);
        for (int y = 0; y < h; y++) {
            const uint8_t *o = out->data[0] + (ptrdiff_t)y * out->stride[0];
            const uint8_t *in = f->data[0] + (ptrdiff_t)y * f->stride[0];
            for (int x = 0; x < w; x++) {
                if (i == 1 && x < w / 2 - 1) { /* inside the box (its edge is antialiased) */
                    if (o[4 * x] != 255 || o[4 * x + 1] != 0 || o[4 * x + 2] != 0)
                        fail_msg("frame 1 (%d,%d): %d,%d,%d, not red", x, y, o[4 * x],
                                 o[4 * x + 1], o[4 * x + 2]);
                } else if (i != 1 || x > w / 2) {
                    if (memcmp(o + 4 * x, in + 4 * x, 3))
                        fail_msg("frame %d (%d,%d) differs from the input", i, x, y);
                }
            }
        }
        keyer_frame_unref(out);
        keyer_frame_destroy(&f);
    }
    assert_true(calls.in_order);
    /* the stream failed: sending more is refused with the same error */
    keyer_frame *f = make_frame(w, h, KEYER_PIXEL_FORMAT_RGBA, 4);
    assert_int_not_equal(keyer_session_send_frame(s, id, f, &err), KEYER_OK);
    keyer_frame_destroy(&f);
    keyer_frame_destroy(&out);
    keyer_session_destroy(&s);
}

/* keyer_session_params::mesh on the CPU: the face-mesh stage, batched across three streams
 * (batch 4: frames of one stream in one batch run in rounds), gives every frame the faces of
 * keyer_faces_run() on the same frames: same counts and ids, landmarks equal (the same
 * crops and the same CPU runtime; 1e-3 px allows for nothing but printing), and the CPU face
 * mesh run again on each face's recorded crop (ms_same_crops, the GPU test's check) gives its
 * landmarks within 1e-3 px too. The clips are
 * decoded to NV12 and pushed, then read as files (the CPU decoder's own frames), also keyed
 * (the mesh then hands its items to the keying model). */
static void test_session_mesh_cpu(void **state)
{
    (void)state;
    char dir[3000];
    kt_tmpdir(dir, sizeof(dir), "pipeline_session");
    const int sizes[3][2] = {{480, 360}, {640, 360}, {360, 480}};
    char paths[3][4096];
    ms_make_clips(dir, 3, sizes, 16, paths);
    ms_rec *ref = calloc(1, sizeof(*ref)), *got = calloc(1, sizeof(*got));
    keyer_frame *frames[3 * 16];
    assert_non_null(ref);
    assert_non_null(got);
    for (int i = 0; i < 3; i++) {
        ms_decode(paths[i], 16, KEYER_PIXEL_FORMAT_NV12, frames + i * 16);
        ms_reference(frames + i * 16, 16, i, ref);
    }
    ms_run_pushed(frames, 3, 16, dir, KEYER_DEVICE_CPU, KEYER_PRECISION_AUTO, got);
    int faces = 0, with = 0;
    double worst = ms_compare(ref, got, 0, NULL, &faces, &with);
    print_message("  mesh stage (cpu, pushed): %d faces in %d frames, max landmark distance "
                  "%.6f px\n", faces, with, worst);
    assert_true(with >= 6);
    assert_true(with < 3 * 16); /* the face leaves the view: loss and detection again */
    assert_true(worst <= 1e-3);
    /* the GPU test's per-crop check (ms_same_crops) on the CPU's own run: the same crops give
     * the same landmarks */
    double crop_rel = 0, crop_px = 0;
    int crops = ms_same_crops(got, frames, 16, &crop_rel, &crop_px);
    print_message("  mesh stage (cpu, pushed): on the same %d crops as the CPU face mesh: max "
                  "%.6f px\n", crops, crop_px);
    assert_int_equal(crops, faces);
    assert_true(crop_px <= 1e-3);
    /* files: decoded by the session's reader; the reference on the same decoder's frames */
    const char *inputs[3] = {paths[0], paths[1], paths[2]};
    ms_run_files(inputs, 3, 16, KEYER_DEVICE_CPU, KEYER_PRECISION_AUTO, 4, 0, got);
    worst = ms_compare(ref, got, 0, NULL, &faces, &with);
    print_message("  mesh stage (cpu, files, batch 4): max landmark distance %.6f px\n", worst);
    assert_true(worst <= 1e-3);
    /* keyed: the mesh hands its items on to the keying model */
    ms_run_files(inputs, 3, 16, KEYER_DEVICE_CPU, KEYER_PRECISION_AUTO, 2, 1, got);
    worst = ms_compare(ref, got, 0, NULL, &faces, &with);
    print_message("  mesh stage (cpu, files, batch 2, keyed): max landmark distance %.6f px\n",
                  worst);
    assert_true(worst <= 1e-3);
    for (int i = 0; i < 3 * 16; i++)
        keyer_frame_destroy(&frames[i]);
    free(ref);
    free(got);
}

/* Bad mesh parameters are refused. */
static void test_session_mesh_errors(void **state)
{
    (void)state;
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.passthrough = 1;
    sp.mesh = 1;
    keyer_session *s = NULL;
    /* no detect, no faces_fn */
    kt_session_refused(&sp, &s, "mesh");
    sp.detect = KEYER_SESSION_DETECT_FACES;
    kt_session_refused(&sp, &s, NULL);
    sp.faces_fn = (keyer_faces_fn)1; /* never called: create fails first */
    sp.mesh_max_faces = KEYER_FACES_MAX + 1;
    kt_session_refused(&sp, &s, NULL);
    sp.mesh_max_faces = 4;
    sp.mesh_detect_interval = -1;
    kt_session_refused(&sp, &s, NULL);
    assert_null(s);
}

typedef struct stopper {
    keyer_session *s;
    int64_t at;
    int64_t seen_total;
} stopper;

static void stop_after(void *opaque, const keyer_session_progress *p)
{
    stopper *st = opaque;
    st->seen_total = p->frames_total;
    if (p->frames_done >= st->at)
        keyer_session_cancel(st->s);
}

static void test_cancel_leaves_valid_output(void **state)
{
    (void)state;
    char in[4096], out[4096];
    tmp_path(in, sizeof(in), "long.mp4");
    tmp_path(out, sizeof(out), "cut.mp4");
    make_sample(in, 160, 96, 250);
    keyer_logger lg = quiet();
    stopper stop = {NULL, 5, 0};
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.logger = &lg;
    sp.progress = stop_after;
    sp.progress_opaque = &stop;
    sp.progress_interval_ms = 10;
    keyer_session *s = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_session_create(&sp, &s, &err), KEYER_OK);
    stop.s = s;
    add_file(s, in, out);
    assert_int_equal(keyer_session_run(s, &err), KEYER_STATUS_INTERRUPTED);
    keyer_session_report rep;
    keyer_session_get_report(s, &rep);
    keyer_session_destroy(&s);
    assert_int_equal(stop.seen_total, 250);
    assert_true(rep.frames_written >= 5);
    assert_true(rep.frames_written < 250);
    assert_int_equal(rep.frames_written, rep.frames_read); /* every frame read was written */
    int audio = 0;
    assert_int_equal(count_frames(out, &audio, NULL), rep.frames_written);
    assert_int_equal(audio, 1);
}

/* ---- back-pressure, live inputs, lifetimes ------------------------------------------------------- */

static void test_again_and_latency_mode(void **state)
{
    (void)state;
    keyer_logger lg = quiet();
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.mode = KEYER_PIPELINE_LATENCY;
    sp.model = "selfie-landscape";
    sp.logger = &lg;
    keyer_session *s = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_session_create(&sp, &s, &err), KEYER_OK);
    keyer_stream_params stp = keyer_stream_params_defaults();
    stp.width = 256;
    stp.height = 144;
    stp.format = KEYER_PIXEL_FORMAT_RGB24;
    int id;
    assert_int_equal(keyer_session_open_stream(s, &stp, &id, &err), KEYER_OK);
    /* nobody receives: the pool fills and send says AGAIN */
    int sent = 0;
    keyer_status st = KEYER_OK;
    while (sent < 200) {
        keyer_frame *f = make_frame(256, 144, KEYER_PIXEL_FORMAT_RGB24, sent);
        st = keyer_session_send_frame(s, id, f, &err);
        keyer_frame_destroy(&f);
        if (st != KEYER_OK)
            break;
        sent++;
    }
    assert_int_equal(st, KEYER_STATUS_AGAIN);
    assert_true(sent >= 2 && sent < 200);
    keyer_session_report rep;
    keyer_session_get_report(s, &rep);
    assert_int_equal(rep.batch, 1);
    keyer_frame *o = NULL;
    keyer_frame_create(&o, NULL);
    for (int i = 0; i < sent; i++) {
        assert_int_equal(keyer_session_receive_frame(s, id, o, -1, &err), KEYER_OK);
        assert_int_equal(o->pts, i);
        keyer_frame_unref(o);
    }
    assert_int_equal(keyer_session_receive_frame(s, id, o, 0, &err), KEYER_STATUS_AGAIN);
    assert_int_equal(keyer_session_close_stream(s, id, &err), KEYER_OK);
    assert_int_equal(keyer_session_receive_frame(s, id, o, -1, &err), KEYER_STATUS_END);
    keyer_frame *late = make_frame(256, 144, KEYER_PIXEL_FORMAT_RGB24, 0);
    assert_int_equal(keyer_session_send_frame(s, id, late, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_frame_destroy(&late);
    keyer_session_get_report(s, &rep);
    assert_int_equal(rep.latency.count, sent);
    assert_true(rep.latency.p99 >= rep.latency.p50 && rep.latency.p50 > 0);
    keyer_frame_destroy(&o);
    keyer_session_destroy(&s);
}

static void test_live_drops_oldest(void **state)
{
    (void)state;
    enum { N = 80 };
    keyer_logger lg = quiet();
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.model = "selfie-landscape";
    sp.logger = &lg;
    keyer_session *s = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_session_create(&sp, &s, &err), KEYER_OK);
    keyer_stream_params stp = keyer_stream_params_defaults();
    stp.width = 512;
    stp.height = 288;
    stp.format = KEYER_PIXEL_FORMAT_RGB24;
    stp.live = 1;
    int id;
    assert_int_equal(keyer_session_open_stream(s, &stp, &id, &err), KEYER_OK);
    keyer_frame *o = NULL;
    keyer_frame_create(&o, NULL);
    keyer_frame *frames[8];
    for (int i = 0; i < 8; i++)
        frames[i] = make_frame(512, 288, KEYER_PIXEL_FORMAT_RGB24, i);
    int64_t got = 0, prev = -1;
    for (int i = 0; i < N; i++) {
        frames[i % 8]->pts = i;
        keyer_status st;
        while ((st = keyer_session_send_frame(s, id, frames[i % 8], &err)) == KEYER_STATUS_AGAIN) {
            assert_int_equal(keyer_session_receive_frame(s, id, o, -1, &err), KEYER_OK);
            assert_true(o->pts > prev);
            prev = o->pts;
            got++;
        }
        assert_int_equal(st, KEYER_OK);
    }
    assert_int_equal(keyer_session_close_stream(s, id, &err), KEYER_OK);
    keyer_status st;
    while ((st = keyer_session_receive_frame(s, id, o, -1, &err)) == KEYER_OK) {
        assert_true(o->pts > prev);
        prev = o->pts;
        got++;
    }
    assert_int_equal(st, KEYER_STATUS_END);
    keyer_session_report rep;
    keyer_session_get_report(s, &rep);
    /* a sender faster than the pipeline: some frames dropped, none lost or duplicated */
    assert_int_equal(rep.frames_read, N);
    assert_int_equal(got + rep.frames_dropped, N);
    assert_true(rep.frames_dropped > 0);
    assert_int_equal(prev, N - 1); /* the newest frame is never the one dropped */
    for (int i = 0; i < 8; i++)
        keyer_frame_destroy(&frames[i]);
    keyer_frame_destroy(&o);
    keyer_session_destroy(&s);
}

static void test_received_frame_outlives_session(void **state)
{
    (void)state;
    keyer_logger lg = quiet();
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.model = "selfie";
    sp.composite.mode = KEYER_COMPOSITE_MASK;
    sp.logger = &lg;
    keyer_session *s = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_session_create(&sp, &s, &err), KEYER_OK);
    keyer_stream_params stp = keyer_stream_params_defaults();
    stp.width = 160;
    stp.height = 160;
    stp.format = KEYER_PIXEL_FORMAT_RGB24;
    int id;
    assert_int_equal(keyer_session_open_stream(s, &stp, &id, &err), KEYER_OK);
    /* a frame without buffers is copied at send time */
    keyer_frame *f = make_frame(160, 160, KEYER_PIXEL_FORMAT_RGB24, 0);
    keyer_frame view = *f;
    memset(view.buf, 0, sizeof(view.buf));
    assert_int_equal(keyer_session_send_frame(s, id, &view, &err), KEYER_OK);
    memset(f->data[0], 0, (size_t)f->stride[0] * 160); /* the copy is unaffected */
    keyer_frame *o = NULL, *keep = NULL;
    keyer_frame_create(&o, NULL);
    keyer_frame_create(&keep, NULL);
    assert_int_equal(keyer_session_receive_frame(s, id, o, -1, &err), KEYER_OK);
    assert_int_equal(o->format, KEYER_PIXEL_FORMAT_GRAY8);
    assert_int_equal(keyer_frame_ref(keep, o, &err), KEYER_OK);
    keyer_frame_destroy(&o);
    keyer_session_destroy(&s);
    /* the matte: the person in the middle, background at the top corners */
    const uint8_t *m = keep->data[0];
    int centre = m[100 * keep->stride[0] + 80];
    int corner = m[2 * keep->stride[0] + 2];
    assert_true(centre > 200);
    assert_true(corner < 60);
    keyer_frame_destroy(&keep);
    keyer_frame_destroy(&f);
}

/* ---- streams fail alone ---------------------------------------------------------------------- */

static keyer_status fail_stream2_at_5(void *opaque, int stream_id, int64_t index,
                                      const keyer_frame *in, keyer_frame *out, keyer_error *err)
{
    (void)in, (void)out;
    atomic_fetch_add((atomic_int *)opaque, 1);
    if (stream_id == 2 && index == 5)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "stream 2 failed on purpose at 5");
    return KEYER_OK;
}

/* Three file streams: 0 fine, 1 not a video (added with fail_alone), 2 failing at frame 5 in
 * its frame_fn. Stream 0 runs to its end, 2 keeps frames 0..4 in a valid output, 1 writes
 * nothing; the run returns stream 1's error; keyer_session_stream_status() and the stream
 * reports tell each stream's error. */
static void test_streams_fail_alone(void **state)
{
    (void)state;
    char in[4096], txt[4096], out0[4096], out1[4096], out2[4096];
    tmp_path(in, sizeof(in), "alone_in.mp4");
    tmp_path(txt, sizeof(txt), "alone_notes.mp4");
    tmp_path(out0, sizeof(out0), "alone_out0.mp4");
    tmp_path(out1, sizeof(out1), "alone_out1.mp4");
    tmp_path(out2, sizeof(out2), "alone_out2.mp4");
    make_sample(in, 160, 96, 12);
    kt_write_file(txt, "this is not a video\n", 20);
    unlink(out1);
    keyer_logger lg = quiet();
    atomic_int calls;
    atomic_init(&calls, 0);
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.logger = &lg;
    sp.passthrough = 1;
    sp.frame_fn = fail_stream2_at_5;
    sp.frame_opaque = &calls;
    keyer_session *s = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_session_create(&sp, &s, &err), KEYER_OK);
    add_file(s, in, out0);
    keyer_file_stream_params fp = keyer_file_stream_params_defaults();
    fp.input = txt;
    fp.output = out1;
    fp.fail_alone = 1;
    int id = -1;
    assert_int_equal(keyer_session_add_file(s, &fp, &id, &err), KEYER_OK);
    assert_int_equal(id, 1);
    assert_int_equal(keyer_session_stream_status(s, 1, &err), KEYER_STATUS_BAD_DATA);
    assert_non_null(strstr(err.message, "alone_notes.mp4"));
    add_file(s, in, out2);
    assert_int_equal(keyer_session_stream_count(s), 3);
    /* fail_alone does not hide bad arguments */
    fp.input = NULL;
    assert_int_equal(keyer_session_add_file(s, &fp, NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_session_stream_count(s), 3);

    assert_int_equal(keyer_session_run(s, &err), KEYER_STATUS_BAD_DATA);
    assert_non_null(strstr(err.message, "alone_notes.mp4"));
    keyer_error e = {0};
    assert_int_equal(keyer_session_stream_status(s, 0, &e), KEYER_OK);
    assert_int_equal(keyer_session_stream_status(s, 1, &e), KEYER_STATUS_BAD_DATA);
    assert_int_equal(keyer_session_stream_status(s, 2, &e), KEYER_STATUS_INTERNAL);
    assert_non_null(strstr(e.message, "failed on purpose at 5"));
    assert_int_equal(keyer_session_stream_status(s, 3, &e), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_session_stream_status(NULL, 0, &e), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_stream_report sr;
    assert_int_equal(keyer_session_get_stream_report(s, 0, &sr, &e), KEYER_OK);
    assert_int_equal(sr.status, KEYER_OK);
    assert_string_equal(sr.error, "");
    assert_int_equal(sr.frames_written, 12);
    assert_int_equal(keyer_session_get_stream_report(s, 1, &sr, &e), KEYER_OK);
    assert_int_equal(sr.status, KEYER_STATUS_BAD_DATA);
    assert_non_null(strstr(sr.error, "alone_notes.mp4"));
    assert_int_equal(sr.frames_written, 0);
    assert_int_equal(keyer_session_get_stream_report(s, 2, &sr, &e), KEYER_OK);
    assert_int_equal(sr.status, KEYER_STATUS_INTERNAL);
    assert_int_equal(sr.frames_written, 5);
    keyer_session_destroy(&s);
    assert_int_equal(count_frames(out0, NULL, NULL), 12);
    assert_int_equal(count_frames(out2, NULL, NULL), 5);
    assert_int_equal(access(out1, F_OK), -1);
    assert_int_equal(atomic_load(&calls), 12 + 6);

    /* every input failing to open: the run starts nothing and returns the first error */
    assert_int_equal(keyer_session_create(&sp, &s, &err), KEYER_OK);
    fp.input = txt;
    assert_int_equal(keyer_session_add_file(s, &fp, NULL, &err), KEYER_OK);
    assert_int_equal(keyer_session_run(s, &err), KEYER_STATUS_BAD_DATA);
    assert_non_null(strstr(err.message, "alone_notes.mp4"));
    keyer_session_destroy(&s);
    assert_int_equal(access(out1, F_OK), -1);
}

/* ---- bad inputs and parameters ------------------------------------------------------------------- */

static void test_bad_inputs(void **state)
{
    (void)state;
    keyer_logger lg = quiet();
    keyer_session_params sp = keyer_session_params_defaults();
    sp.logger = &lg;
    keyer_session *s = NULL;
    keyer_error err = {0};
    /* parameters */
    sp.batch = 65;
    kt_session_refused(&sp, &s, "batch");
    sp.batch = 0;
    sp.model = "no-such-model";
    kt_session_refused(&sp, &s, "selfie"); /* the known names are listed */
    sp.model = NULL;
    sp.composite.mode = KEYER_COMPOSITE_IMAGE;
    kt_session_refused(&sp, &s, NULL);
    sp.background = "/nonexistent/beach.jpg";
    assert_int_equal(keyer_session_create(&sp, &s, &err), KEYER_STATUS_IO);
    assert_non_null(strstr(err.message, "/nonexistent/beach.jpg"));
    sp.composite.mode = KEYER_COMPOSITE_BLUR;
    sp.background = NULL;
    sp.refine.threshold_low = 0.9f;
    sp.refine.threshold_high = 0.1f;
    kt_session_refused(&sp, &s, "threshold");
    sp.refine = keyer_refine_params_defaults();
    assert_null(s);
    assert_int_equal(keyer_session_create(&sp, &s, &err), KEYER_OK);
    /* run without inputs */
    assert_int_equal(keyer_session_run(s, &err), KEYER_STATUS_INVALID_ARGUMENT);
    /* inputs */
    keyer_file_stream_params fp = keyer_file_stream_params_defaults();
    fp.input = "/nonexistent/in.mp4";
    assert_int_equal(keyer_session_add_file(s, &fp, NULL, &err), KEYER_STATUS_IO);
    assert_non_null(strstr(err.message, "/nonexistent/in.mp4"));
    char txt[4096];
    tmp_path(txt, sizeof(txt), "notes.mp4");
    kt_write_file(txt, "this is not a video\n", 20);
    fp.input = txt;
    assert_int_equal(keyer_session_add_file(s, &fp, NULL, &err), KEYER_STATUS_BAD_DATA);
    assert_non_null(strstr(err.message, "notes.mp4"));
    fp.input = NULL;
    assert_int_equal(keyer_session_add_file(s, &fp, NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_session_stream_count(s), 0);
    /* pushed streams */
    keyer_stream_params stp = keyer_stream_params_defaults();
    int id;
    assert_int_equal(keyer_session_open_stream(s, &stp, &id, &err), KEYER_STATUS_INVALID_ARGUMENT);
    stp.width = 64;
    stp.height = 64;
    stp.format = KEYER_PIXEL_FORMAT_GRAY8;
    assert_int_equal(keyer_session_open_stream(s, &stp, &id, &err), KEYER_STATUS_INVALID_ARGUMENT);
    stp.format = KEYER_PIXEL_FORMAT_RGBA;
    assert_int_equal(keyer_session_open_stream(s, &stp, &id, &err), KEYER_OK);
    keyer_frame *f = make_frame(32, 32, KEYER_PIXEL_FORMAT_RGBA, 0);
    assert_int_equal(keyer_session_send_frame(s, id, f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "32x32"));
    assert_int_equal(keyer_session_send_frame(s, id + 1, f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_frame_destroy(&f);
    /* files may not be added once frames flow */
    fp.input = txt;
    assert_int_equal(keyer_session_add_file(s, &fp, NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_session_destroy(&s);
    keyer_session_destroy(NULL);
    keyer_session_cancel(NULL);
}

static void test_device_parse_and_options(void **state)
{
    (void)state;
    keyer_device_kind k;
    int ord = -1;
    keyer_error err = {0};
    assert_int_equal(keyer_device_parse("auto", &k, &ord, &err), KEYER_OK);
    assert_int_equal(k, KEYER_DEVICE_AUTO);
    assert_int_equal(keyer_device_parse("cpu", &k, &ord, &err), KEYER_OK);
    assert_int_equal(k, KEYER_DEVICE_CPU);
    assert_int_equal(keyer_device_parse("cuda:3", &k, &ord, &err), KEYER_OK);
    assert_int_equal(k, KEYER_DEVICE_CUDA);
    assert_int_equal(ord, 3);
    assert_int_equal(keyer_device_parse("cuda", &k, &ord, &err), KEYER_OK);
    assert_int_equal(ord, 0);
    const char *bad[] = {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "cuda:99", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(keyer_device_parse(bad[i], &k, &ord, &err), KEYER_STATUS_INVALID_ARGUMENT);
    keyer_session_params p = keyer_session_params_defaults();
    assert_int_equal(keyer_options_validate(keyer_session_options(), &p, "session", &err), KEYER_OK);
    assert_int_equal(kt_session_option(&p, "mode", "latency"), KEYER_OK);
    assert_int_equal(p.mode, KEYER_PIPELINE_LATENCY);
    assert_int_equal(kt_session_option(&p, "batch", "99"), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(p.max_streams, 64);
    assert_int_equal(p.live, -1);

    /* precision: AUTO by default, resolved per model by the registry */
    assert_int_equal(p.precision, KEYER_PRECISION_AUTO);
    assert_int_equal(kt_session_option(&p, "precision", "f16"), KEYER_OK);
    assert_int_equal(p.precision, KEYER_PRECISION_F16);
    assert_int_equal(kt_session_option(&p, "precision", "f8"), KEYER_STATUS_INVALID_ARGUMENT);
    const keyer_model_entry *selfie = keyer_registry_find("selfie");
    const keyer_model_entry *lite = keyer_registry_find("pose-lite");
    assert_non_null(selfie);
    assert_non_null(lite);
    assert_int_equal(keyer_registry_precision(selfie, KEYER_PRECISION_AUTO, 1),
                     selfie->half_ok ? KEYER_PRECISION_F16 : KEYER_PRECISION_F32);
    assert_int_equal(keyer_registry_precision(lite, KEYER_PRECISION_AUTO, 1),
                     lite->half_ok ? KEYER_PRECISION_F16 : KEYER_PRECISION_F32);
    assert_int_equal(keyer_registry_precision(selfie, KEYER_PRECISION_AUTO, 0), KEYER_PRECISION_F32);
    assert_int_equal(keyer_registry_precision(NULL, KEYER_PRECISION_AUTO, 1), KEYER_PRECISION_F32);
    assert_int_equal(keyer_registry_precision(lite, KEYER_PRECISION_F16, 1), KEYER_PRECISION_F16);
    assert_int_equal(keyer_registry_precision(selfie, KEYER_PRECISION_F32, 1), KEYER_PRECISION_F32);
    keyer_precision pr;
    assert_int_equal(keyer_precision_from_name("auto", &pr, &err), KEYER_OK);
    assert_int_equal(pr, KEYER_PRECISION_AUTO);
    assert_string_equal(keyer_precision_name(KEYER_PRECISION_AUTO), "auto");
    /* a runtime needs a definite precision */
    char path[4096];
    keyer_model *m = NULL;
    keyer_runtime *rt = NULL;
    assert_int_equal(keyer_registry_resolve("selfie", path, sizeof(path), &err), KEYER_OK);
    assert_int_equal(keyer_model_load_file(path, &m, &err), KEYER_OK);
    keyer_runtime_params rp = keyer_runtime_params_defaults();
    rp.precision = KEYER_PRECISION_AUTO;
    assert_int_equal(keyer_runtime_create(m, &rp, &rt, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "auto"));
    assert_null(rt);
    keyer_model_destroy(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_parse_and_options),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_push_matches_reference),
        cmocka_unit_test(test_push_letterboxed_logits),
        cmocka_unit_test(test_streams_equal_separate_runs),
        cmocka_unit_test(test_file_run),
        cmocka_unit_test(test_frame_callback_passthrough),
        cmocka_unit_test(test_session_detect),
        cmocka_unit_test(test_session_detect_errors),
        cmocka_unit_test(test_session_detect_pulled),
        cmocka_unit_test(test_session_mesh_cpu),
        cmocka_unit_test(test_session_mesh_errors),
        cmocka_unit_test(test_cancel_leaves_valid_output),
        cmocka_unit_test(test_again_and_latency_mode),
        cmocka_unit_test(test_live_drops_oldest),
        cmocka_unit_test(test_received_frame_outlives_session),
        cmocka_unit_test(test_streams_fail_alone),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
