/*
 * Sessions over several devices, on the CPU (label cpu):
 *  - device lists: keyer_device_parse_list() ("cuda:all", "cuda:0,2", errors), the session
 *    table's cuda_devices option, keyer_session_create() refusing a list where no GPU exists;
 *  - the placement arithmetic (loads, least loaded, ties) and the fault-injection switch;
 *  - the several-engine machinery with two CPU engines (kr_session_create_engines): four
 *    streams of different sizes are placed by load, every frame comes out equal (per-frame
 *    checksum of the output pixels) to the same streams in a session on one engine, the
 *    callbacks and reports speak the session's stream ids, one model is chosen for all, and
 *    the merged report and statistics file count every engine.
 * The GPU side (two GPUs, a forced failure of one) is test_pipeline_multigpu_gpu.c.
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
#include <time.h>

#include <libavformat/avformat.h>

#include "keyer/image.h"
#include "keyer/io.h"
#include "keyer/pipeline.h"
#include "core/device.h"
#include "pipeline/engines.h"
#include "pipeline/placement.h"
#include "pipeline/split_gpus.h"
#include "pipeline/stream.h"
#include "kt_io.h"
#include "kt_json.h"
#include "kt_session.h"
#include "testutil.h"

/* ---- device lists ------------------------------------------------------------------------ */

static void test_device_lists(void **state)
{
    (void)state;
    keyer_device_kind k;
    int ord = -1;
    uint64_t set = 1;
    keyer_error err = {0};
    assert_int_equal(keyer_device_parse_list("cuda:all", &k, &ord, &set, &err), KEYER_OK);
    assert_int_equal(k, KEYER_DEVICE_CUDA);
    assert_int_equal(ord, 0);
    assert_true(set == KEYER_CUDA_DEVICES_ALL);
    assert_int_equal(keyer_device_parse_list("cuda:2,0", &k, &ord, &set, &err), KEYER_OK);
    assert_true(set == ((UINT64_C(1) << 0) | (UINT64_C(1) << 2)));
    assert_int_equal(ord, 0);
    assert_int_equal(keyer_device_parse_list("cuda:63,5,7", &k, &ord, &set, &err), KEYER_OK);
    assert_true(set == ((UINT64_C(1) << 63) | (UINT64_C(1) << 5) | (UINT64_C(1) << 7)));
    assert_int_equal(ord, 5);
    /* one device: the old forms, no list */
    assert_int_equal(keyer_device_parse_list("cuda:3", &k, &ord, &set, &err), KEYER_OK);
    assert_int_equal(k, KEYER_DEVICE_CUDA);
    assert_int_equal(ord, 3);
    assert_true(set == 0);
    assert_int_equal(keyer_device_parse_list("cpu", &k, &ord, &set, &err), KEYER_OK);
    assert_int_equal(k, KEYER_DEVICE_CPU);
    assert_true(set == 0);
    assert_int_equal(keyer_device_parse_list("auto", &k, &ord, &set, &err), KEYER_OK);
    assert_int_equal(k, KEYER_DEVICE_AUTO);
    struct {
        const char *text, *says;
    } bad[] = {
        {"cuda:0,0", "listed twice"},       {"cuda:1,2,1", "listed twice"},
        {"cuda:0,", "empty element"},       {"cuda:,1", "empty element"},
        {"cuda:0,,1", "empty element"},     {"cuda:0,64", "'64' is not a CUDA ordinal"},
        {"cuda:a,1", "'a' is not"},         {"cuda:-1,2", "'-1' is not"},
        {"cuda:all,1", "'all' is not"},     {"cuda:1,+2", "'+2' is not"},
        {"cuda:64", "unknown device"},      {"gpu", "unknown device 'gpu'"},
        {"cuda:ALL", "unknown device"},     {"cuda:0 ,1", "'0 ' is not"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        set = 7;
        keyer_error_clear(&err);
        assert_int_equal(keyer_device_parse_list(bad[i].text, &k, &ord, &set, &err),
                         KEYER_STATUS_INVALID_ARGUMENT);
        if (!strstr(err.message, bad[i].says))
            fail_msg("'%s': message '%s' lacks '%s'", bad[i].text, err.message, bad[i].says);
        assert_true(set == 7); /* untouched */
    }
    assert_int_equal(keyer_device_parse_list(NULL, &k, &ord, &set, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    char buf[64];
    keyer_device_list_format(KEYER_CUDA_DEVICES_ALL, buf, sizeof(buf));
    assert_string_equal(buf, "cuda:all");
    keyer_device_list_format((UINT64_C(1) << 0) | (UINT64_C(1) << 2), buf, sizeof(buf));
    assert_string_equal(buf, "cuda:0,2");
    assert_int_equal(keyer_device_parse_list(buf, &k, &ord, &set, &err), KEYER_OK);
    assert_true(set == 5);
    keyer_device_list_format(0, buf, sizeof(buf));
    assert_string_equal(buf, "");
}

static void test_session_option(void **state)
{
    (void)state;
    keyer_error err = {0};
    keyer_session_params p = keyer_session_params_defaults();
    assert_true(p.cuda_devices == 0);
    const keyer_option *t = keyer_session_options();
    assert_int_equal(keyer_option_set(t, &p, "cuda_devices", "all", &err), KEYER_OK);
    assert_true(p.cuda_devices == KEYER_CUDA_DEVICES_ALL);
    assert_int_equal(keyer_option_set(t, &p, "cuda_devices", "0,2", &err), KEYER_OK);
    assert_true(p.cuda_devices == 5);
    assert_int_equal(keyer_option_set(t, &p, "cuda_devices", "3", &err), KEYER_OK);
    assert_true(p.cuda_devices == 8);
    assert_int_equal(keyer_option_set(t, &p, "cuda_devices", "none", &err), KEYER_OK);
    assert_true(p.cuda_devices == 0);
    p.cuda_devices = 5;
    const char *bad[] = {"x", "0,0", "64", "1,", "-1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        keyer_error_clear(&err);
        assert_int_equal(keyer_option_set(t, &p, "cuda_devices", bad[i], &err),
                         KEYER_STATUS_INVALID_ARGUMENT);
        assert_true(p.cuda_devices == 5);
        assert_true(err.message[0] != 0);
    }
    assert_int_equal(keyer_options_parse(t, &p, "mode=latency,cuda_devices=1", &err), KEYER_OK);
    assert_true(p.cuda_devices == 2);
    assert_int_equal(p.mode, KEYER_PIPELINE_LATENCY);
}

/* Without a GPU (a CPU build, or no device) a list is an error naming why; auto stays auto. */
static void test_list_without_gpu(void **state)
{
    (void)state;
    const kr_device_fns *dev = kr_device_cuda();
    if (dev && dev->count() > 0) {
        printf("  (a CUDA device exists: the no-GPU errors are not checked here)\n");
        return;
    }
    keyer_error err = {0};
    keyer_session *s = NULL;
    keyer_session_params p = keyer_session_params_defaults();
    p.cuda_devices = KEYER_CUDA_DEVICES_ALL;
    assert_int_equal(keyer_session_create(&p, &s, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_null(s);
    printf("  cuda:all here: %s\n", err.message);
    assert_non_null(strstr(err.message, "cuda:all"));
    assert_non_null(strstr(err.message, dev ? "no CUDA device" : "built without CUDA"));
    p.cuda_devices = 3;
    keyer_error_clear(&err);
    assert_int_equal(keyer_session_create(&p, &s, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "cuda:0,1"));
    p.device = KEYER_DEVICE_CPU;
    keyer_error_clear(&err);
    assert_int_equal(keyer_session_create(&p, &s, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "device cpu"));
    /* auto without a list is unchanged */
    p = keyer_session_params_defaults();
    assert_int_equal(keyer_session_create(&p, &s, &err), KEYER_OK);
    keyer_session_destroy(&s);
}

/* ---- placement and the fault switch ------------------------------------------------------ */

static void test_placement(void **state)
{
    (void)state;
    assert_true(kr_place_load(1920, 1080, (keyer_rational){30, 1}) == 1920.0 * 1080 * 30);
    assert_true(kr_place_load(1920, 1080, (keyer_rational){30000, 1001}) ==
                1920.0 * 1080 * 30000 / 1001);
    assert_true(kr_place_load(100, 10, (keyer_rational){0, 1}) == 1000.0 * KR_PLACE_DEFAULT_FPS);
    assert_true(kr_place_load(0, 10, (keyer_rational){30, 1}) == 0.0);
    double l3[3] = {5, 2, 2};
    assert_int_equal(kr_place_pick(l3, 3), 1); /* tie: the lower index */
    assert_int_equal(kr_place_pick(l3, 0), -1);
    assert_int_equal(kr_place_pick(NULL, 2), -1);

    /* 2 GPUs: one 4K30, five 1080p30, one 720p60, in that order */
    const double k4 = 3840.0 * 2160 * 30, hd = 1920.0 * 1080 * 30, p720 = 1280.0 * 720 * 60;
    double streams[7] = {k4, hd, hd, hd, hd, hd, p720};
    double gpus[2] = {0, 0};
    int where[7];
    assert_int_equal(kr_place_streams(streams, 7, gpus, 2, where), 0);
    /* by hand, in units of hd (4K = 4): 4K -> 0 (0 = 0: tie, the lower); hd -> 1 (0 < 4);
     * hd -> 1 (1 < 4); hd -> 1 (2 < 4); hd -> 1 (3 < 4); hd -> 0 (4 = 4: tie);
     * 720p60 (0.89) -> 1 (4 < 5) */
    int expect[7] = {0, 1, 1, 1, 1, 0, 1};
    for (int i = 0; i < 7; i++)
        if (where[i] != expect[i])
            fail_msg("stream %d on GPU %d, expected %d", i, where[i], expect[i]);
    assert_true(gpus[0] == k4 + hd);
    assert_true(gpus[1] == 4 * hd + p720);
    /* equal streams spread round robin over 4 GPUs, starting from the lowest */
    double eq[8] = {1, 1, 1, 1, 1, 1, 1, 1}, g4[4] = {0, 0, 0, 0};
    int w8[8];
    assert_int_equal(kr_place_streams(eq, 8, g4, 4, w8), 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(w8[i], i % 4);
    /* a GPU that starts loaded gets nothing until the others catch up */
    double g2[2] = {10, 0}, s3[3] = {6, 6, 6};
    int w3[3];
    assert_int_equal(kr_place_streams(s3, 3, g2, 2, w3), 0);
    assert_int_equal(w3[0], 1);
    assert_int_equal(w3[1], 1);
    assert_int_equal(w3[2], 0); /* 10 < 12 */
    assert_int_equal(kr_place_streams(s3, 3, g2, 0, w3), -1);
    assert_int_equal(kr_place_streams(NULL, 3, g2, 2, w3), -1);
}

static void test_fail_spec(void **state)
{
    (void)state;
    int ord = 9, frame = 9;
    assert_int_equal(kr_fail_spec_parse("120", &ord, &frame), 0);
    assert_int_equal(ord, -1);
    assert_int_equal(frame, 120);
    assert_int_equal(kr_fail_spec_parse("cuda:1@120", &ord, &frame), 0);
    assert_int_equal(ord, 1);
    assert_int_equal(frame, 120);
    assert_int_equal(kr_fail_spec_parse("cuda:0@0", &ord, &frame), 0);
    assert_int_equal(ord, 0);
    assert_int_equal(frame, 0);
    const char *bad[] = {"", "x", "-1", "12x", "1073741824", "cuda:1", "cuda:@5", "cuda:1@",
                         "cuda:64@1", "cuda:a@1", "cuda:1@-2", "cuda:1@2@3", "cpu@1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ord = 7, frame = 7;
        if (kr_fail_spec_parse(bad[i], &ord, &frame) != -1)
            fail_msg("'%s' was accepted", bad[i]);
        assert_int_equal(ord, 7);
        assert_int_equal(frame, 7);
    }
    assert_int_equal(kr_fail_spec_parse(NULL, &ord, &frame), -1);
}

/* ---- two CPU engines against one --------------------------------------------------------- */

enum { STREAMS = 4, FRAMES = 10 };

static char inputs[STREAMS][4096];
static const int sizes[STREAMS][3] = {{320, 240, 24}, {640, 360, 30}, {320, 180, 30},
                                      {160, 120, 24}};

typedef struct run_record {
    uint64_t sum[STREAMS][FRAMES]; /* FNV-1a of each output frame's pixels */
    int calls[STREAMS];
    int bad_id;
    int64_t last_done, last_total;
    int progress_calls;
} run_record;

static uint64_t fnv(const keyer_frame *f)
{
    uint64_t h = 1469598103934665603ull;
    int planes = keyer_pixel_format_planes(f->format);
    for (int p = 0; p < planes; p++) {
        int pw = 0, rows = 0, bpe = 0;
        if (keyer_pixel_format_plane(f->format, f->width, f->height, p, &pw, &rows, &bpe, NULL))
            return 0;
        int w = pw * bpe;
        for (int y = 0; y < rows; y++)
            for (int x = 0; x < w; x++) {
                h ^= f->data[p][(size_t)y * (size_t)f->stride[p] + (size_t)x];
                h *= 1099511628211ull;
            }
    }
    return h;
}

static keyer_status on_frame(void *opaque, int stream_id, int64_t index, const keyer_frame *in,
                             keyer_frame *out, keyer_error *err)
{
    (void)in, (void)err;
    run_record *r = opaque;
    /* each stream's callback runs on its own writer thread: only its own row is written */
    if (stream_id < 0 || stream_id >= STREAMS || index < 0 || index >= FRAMES ||
        out->width != sizes[stream_id][0]) {
        r->bad_id = 1;
        return KEYER_OK;
    }
    r->sum[stream_id][index] = fnv(out);
    r->calls[stream_id]++;
    return KEYER_OK;
}

static void on_progress(void *opaque, const keyer_session_progress *p)
{
    run_record *r = opaque;
    r->last_done = p->frames_done;
    r->last_total = p->frames_total;
    r->progress_calls++;
}

static int setup(void **state)
{
    (void)state;
    char dir[3000], img[4096];
    kt_tmpdir(dir, sizeof(dir), "pipeline_multigpu");
    for (int i = 0; i < STREAMS; i++) {
        snprintf(inputs[i], sizeof(inputs[i]), "%s/in%d.mp4", dir, i);
        keyer_sample_params p = keyer_sample_params_defaults();
        p.width = sizes[i][0];
        p.height = sizes[i][1];
        p.frame_rate = (keyer_rational){sizes[i][2], 1};
        p.frames = FRAMES;
        p.preset = "ultrafast";
        p.audio_codec = NULL;
        keyer_error err = {0};
        if (keyer_video_write_sample(inputs[i], kt_data_path(img, sizeof(img), "grace_hopper.jpg"),
                                     &p, &err)) {
            fprintf(stderr, "sample: %s\n", err.message);
            return -1;
        }
    }
    return 0;
}

/* Runs the four inputs (null outputs) over @p engines CPU engines; fills @p rec and @p rep. */
static keyer_session *run_engines(int engines, run_record *rec, keyer_session_report *rep,
                                  const char *stats)
{
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_ERROR;
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.logger = &lg;
    sp.composite.mode = KEYER_COMPOSITE_BLUR;
    sp.refine_workers = 1; /* the default gives 2 per engine on machines of 8+ cores */
    sp.frame_fn = on_frame;
    sp.frame_opaque = rec;
    sp.progress = on_progress;
    sp.progress_opaque = rec;
    sp.progress_interval_ms = 10;
    keyer_device_kind kinds[2] = {KEYER_DEVICE_CPU, KEYER_DEVICE_CPU};
    int ordinals[2] = {0, 0};
    keyer_session *s = NULL;
    keyer_error err = {0};
    memset(rec, 0, sizeof(*rec));
    assert_int_equal(kr_session_create_engines(&sp, kinds, ordinals, engines, &s, &err), KEYER_OK);
    for (int i = 0; i < STREAMS; i++) {
        keyer_file_stream_params fp = keyer_file_stream_params_defaults();
        fp.input = inputs[i];
        int id = -1;
        if (keyer_session_add_file(s, &fp, &id, &err))
            fail_msg("add %s: %s", inputs[i], err.message);
        assert_int_equal(id, i);
    }
    if (keyer_session_run(s, &err))
        fail_msg("run over %d engine(s): %s", engines, err.message);
    keyer_session_get_report(s, rep);
    if (stats)
        assert_int_equal(keyer_session_write_stats(s, stats, &err), KEYER_OK);
    return s;
}

static void test_two_engines_equal_one(void **state)
{
    (void)state;
    static run_record one, two;
    keyer_session_report r1, r2;
    char dir[3000], stats[4096];
    kt_tmpdir(dir, sizeof(dir), "pipeline_multigpu");
    snprintf(stats, sizeof(stats), "%s/two.json", dir);
    keyer_session *s1 = run_engines(1, &one, &r1, NULL);
    keyer_session *s2 = run_engines(2, &two, &r2, stats);

    /* placement by load (pixels per second), in the order added: 320x240@24 -> 0 (tie),
     * 640x360@30 -> 1, 320x180@30 -> 0 (1.84M < 6.91M), 160x120@24 -> 0 (3.57M < 6.91M) */
    const int expect[STREAMS] = {0, 1, 0, 0};
    for (int i = 0; i < STREAMS; i++) {
        assert_int_equal(kr_session_stream_engine(s1, i), 0);
        assert_int_equal(kr_session_stream_engine(s2, i), expect[i]);
    }
    assert_int_equal(kr_session_stream_engine(s2, STREAMS), -1);

    /* every frame of every stream, equal to the one-engine run */
    assert_int_equal(one.bad_id, 0);
    assert_int_equal(two.bad_id, 0);
    for (int i = 0; i < STREAMS; i++) {
        assert_int_equal(one.calls[i], FRAMES);
        assert_int_equal(two.calls[i], FRAMES);
        for (int f = 0; f < FRAMES; f++)
            if (one.sum[i][f] != two.sum[i][f])
                fail_msg("stream %d frame %d differs between one engine and two", i, f);
    }
    /* one model for all: the 4:3 stream makes it "selfie", on the engine of the 16:9 one too */
    assert_string_equal(r1.model, "selfie");
    assert_string_equal(r2.model, "selfie");

    /* the merged report counts both engines */
    assert_int_equal(r2.frames_read, STREAMS * FRAMES);
    assert_int_equal(r2.frames_written, STREAMS * FRAMES);
    assert_int_equal(r2.frames_on_cpu, STREAMS * FRAMES);
    assert_int_equal(r2.frames_lost, 0);
    assert_int_equal(r2.latency.count, STREAMS * FRAMES);
    assert_string_equal(r1.device, "cpu");
    assert_string_equal(r2.device, "cpu + cpu");
    assert_true(r2.seconds > 0);
    assert_int_equal(r2.stage_count, r1.stage_count);
    for (int i = 0; i < r2.stage_count; i++) {
        assert_string_equal(r2.stages[i].name, r1.stages[i].name);
        assert_int_equal(r2.stages[i].frames, r1.stages[i].frames);
    }
    /* composite: one worker set per engine */
    for (int i = 0; i < r2.stage_count; i++)
        if (!strcmp(r2.stages[i].name, "infer") || !strcmp(r2.stages[i].name, "refine"))
            assert_int_equal(r2.stages[i].workers, 2);
    assert_int_equal(r2.batches, r1.batches);

    /* the progress calls summed the engines */
    assert_true(two.progress_calls > 0);
    assert_int_equal(two.last_done, STREAMS * FRAMES);
    assert_int_equal(two.last_total, STREAMS * FRAMES);

    /* stream reports by the session's ids */
    assert_int_equal(keyer_session_stream_count(s2), STREAMS);
    for (int i = 0; i < STREAMS; i++) {
        keyer_stream_report sr;
        keyer_error err = {0};
        assert_int_equal(keyer_session_get_stream_report(s2, i, &sr, &err), KEYER_OK);
        assert_string_equal(sr.input, inputs[i]);
        assert_int_equal(sr.width, sizes[i][0]);
        assert_int_equal(sr.frames_written, FRAMES);
        assert_string_equal(sr.device, "cpu");
        assert_int_equal(keyer_session_stream_status(s2, i, &err), KEYER_OK);
    }
    keyer_stream_report sr;
    keyer_error err = {0};
    assert_int_equal(keyer_session_get_stream_report(s2, STREAMS, &sr, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(keyer_session_write_trace(s2, stats, &err), KEYER_STATUS_UNSUPPORTED);
    assert_int_equal(keyer_session_run(s2, &err), KEYER_STATUS_INVALID_ARGUMENT);

    /* the statistics file: the devices, and each stream's */
    size_t n = 0;
    char *raw = kt_read_file(stats, &n);
    assert_non_null(raw);
    char *json = calloc(n + 1, 1); /* the file's bytes, NUL-terminated */
    assert_non_null(json);
    memcpy(json, raw, n);
    free(raw);
    assert_non_null(strstr(json, "\"device\": \"cpu + cpu\""));
    int per_stream = 0;
    for (const char *p = json; (p = strstr(p, "\"encoder\": \"\", \"device\": \"cpu\"")); p++)
        per_stream++;
    assert_int_equal(per_stream, STREAMS);
    assert_non_null(strstr(json, "\"written\": 40"));
    /* and each device's own report (frames, seconds, stages): streams 0, 2, 3 on engine 0 */
    assert_true(json_objects(json) > 0);
    const char *dev = strstr(json, "\"devices\": [");
    assert_non_null(dev);
    assert_int_equal(count(dev, "{\"device\": \"cpu\", \"seconds\": "), 2);
    const char *d0 = strstr(dev, "\"frames_written\": 30,");
    const char *d1 = strstr(dev, "\"frames_written\": 10,");
    assert_non_null(d0);
    assert_non_null(d1);
    assert_true(d0 < d1);
    assert_true(count(dev, "{\"name\": \"infer\", \"workers\": 1,") >= 2);
    free(json);
    keyer_session_destroy(&s1);
    keyer_session_destroy(&s2);
    assert_null(s2);
}

/* An input that cannot be opened fails alone on its engine; the others run to their end. */
static void test_failed_input_among_engines(void **state)
{
    (void)state;
    static run_record rec;
    memset(&rec, 0, sizeof(rec));
    char dir[3000], junk[4096];
    kt_tmpdir(dir, sizeof(dir), "pipeline_multigpu");
    snprintf(junk, sizeof(junk), "%s/not-a-video.mp4", dir);
    assert_int_equal(kt_write_file(junk, "hello", 5), 0);
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_ERROR;
    lg.callback = NULL;
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.logger = &lg;
    sp.passthrough = 1;
    sp.frame_fn = on_frame;
    sp.frame_opaque = &rec;
    keyer_device_kind kinds[2] = {KEYER_DEVICE_CPU, KEYER_DEVICE_CPU};
    int ordinals[2] = {0, 0};
    keyer_session *s = NULL;
    keyer_error err = {0};
    assert_int_equal(kr_session_create_engines(&sp, kinds, ordinals, 2, &s, &err), KEYER_OK);
    const char *in[3] = {inputs[0], junk, inputs[2]};
    for (int i = 0; i < 3; i++) {
        keyer_file_stream_params fp = keyer_file_stream_params_defaults();
        fp.input = in[i];
        fp.fail_alone = 1;
        int id = -1;
        assert_int_equal(keyer_session_add_file(s, &fp, &id, &err), KEYER_OK);
        assert_int_equal(id, i);
    }
    /* the junk input (load 0: the probe fails) goes to the engine with no load, engine 1,
     * and so does the third (1.73M against engine 0's 1.84M) */
    assert_int_equal(kr_session_stream_engine(s, 0), 0);
    assert_int_equal(kr_session_stream_engine(s, 1), 1);
    assert_int_equal(kr_session_stream_engine(s, 2), 1);
    keyer_status st = keyer_session_run(s, &err);
    assert_int_not_equal(st, KEYER_OK);
    assert_non_null(strstr(err.message, "not-a-video.mp4"));
    assert_int_equal(keyer_session_stream_status(s, 0, NULL), KEYER_OK);
    assert_int_not_equal(keyer_session_stream_status(s, 1, NULL), KEYER_OK);
    assert_int_equal(keyer_session_stream_status(s, 2, NULL), KEYER_OK);
    keyer_session_report rep;
    keyer_session_get_report(s, &rep);
    assert_int_equal(rep.frames_written, 2 * FRAMES);
    keyer_session_destroy(&s);
}

/* Pushed streams over two CPU engines: placed 0, 1; each frame as from one engine. */
static void test_pushed_streams(void **state)
{
    (void)state;
    keyer_frame *photo = NULL;
    char path[4096];
    keyer_error err = {0};
    assert_int_equal(keyer_frame_create(&photo, &err), KEYER_OK);
    assert_int_equal(keyer_image_read(kt_data_path(path, sizeof(path), "grace_hopper.jpg"),
                                      KEYER_PIXEL_FORMAT_RGBA, photo, &err),
                     KEYER_OK);
    uint64_t sums[2][2][3]; /* [engines - 1][stream][frame] */
    char model[2][64];
    for (int engines = 1; engines <= 2; engines++) {
        keyer_logger lg = keyer_logger_default();
        lg.level = KEYER_LOG_ERROR;
        keyer_session_params sp = keyer_session_params_defaults();
        sp.device = KEYER_DEVICE_CPU;
        sp.logger = &lg;
        sp.composite.mode = KEYER_COMPOSITE_MASK;
        keyer_device_kind kinds[2] = {KEYER_DEVICE_CPU, KEYER_DEVICE_CPU};
        int ordinals[2] = {0, 0};
        keyer_session *s = NULL;
        assert_int_equal(kr_session_create_engines(&sp, kinds, ordinals, engines, &s, &err),
                         KEYER_OK);
        int ids[2];
        for (int k = 0; k < 2; k++) {
            keyer_stream_params stp = keyer_stream_params_defaults();
            stp.width = photo->width;
            stp.height = photo->height;
            stp.format = KEYER_PIXEL_FORMAT_RGBA;
            stp.frame_rate = (keyer_rational){25, 1};
            assert_int_equal(keyer_session_open_stream(s, &stp, &ids[k], &err), KEYER_OK);
            assert_int_equal(ids[k], k);
            assert_int_equal(kr_session_stream_engine(s, k), engines == 2 ? k : 0);
        }
        keyer_frame *o = NULL;
        keyer_frame_create(&o, NULL);
        for (int f = 0; f < 3; f++) {
            for (int k = 0; k < 2; k++)
                assert_int_equal(keyer_session_send_frame(s, ids[k], photo, &err), KEYER_OK);
            for (int k = 0; k < 2; k++) {
                assert_int_equal(keyer_session_receive_frame(s, ids[k], o, -1, &err), KEYER_OK);
                assert_int_equal(o->format, KEYER_PIXEL_FORMAT_GRAY8);
                sums[engines - 1][k][f] = fnv(o);
                keyer_frame_unref(o);
            }
        }
        for (int k = 0; k < 2; k++) {
            assert_int_equal(keyer_session_close_stream(s, ids[k], &err), KEYER_OK);
            assert_int_equal(keyer_session_receive_frame(s, ids[k], o, -1, &err),
                             KEYER_STATUS_END);
        }
        assert_int_equal(keyer_session_send_frame(s, 2, photo, &err),
                         KEYER_STATUS_INVALID_ARGUMENT);
        keyer_frame_destroy(&o);
        keyer_session_report rep;
        keyer_session_get_report(s, &rep);
        assert_int_equal(rep.frames_written, 6);
        snprintf(model[engines - 1], sizeof(model[0]), "%s", rep.model);
        /* no file stream: nothing to run */
        assert_int_equal(keyer_session_run(s, &err), KEYER_STATUS_INVALID_ARGUMENT);
        keyer_session_destroy(&s);
    }
    assert_string_equal(model[0], model[1]);
    assert_memory_equal(sums[0], sums[1], sizeof(sums[0]));
    keyer_frame_destroy(&photo);
}

/* ---- GPU-to-GPU failover, on CPU engines ----------------------------------------------------- */

enum { FO_FRAMES = 48, FO_FAIL_AT = 5 };

typedef struct fo_record {
    uint64_t sum[2][FO_FRAMES];
    int calls[2];
    int bad;
    keyer_session *session;
    int fail_engine; /* -1: no failure */
    int failed;
} fo_record;

static keyer_status fo_frame(void *opaque, int stream_id, int64_t index, const keyer_frame *in,
                             keyer_frame *out, keyer_error *err)
{
    (void)in, (void)err;
    fo_record *r = opaque;
    if (stream_id < 0 || stream_id > 1 || index < 0 || index >= FO_FRAMES || r->sum[stream_id][index]) {
        r->bad = 1;
        return KEYER_OK;
    }
    r->sum[stream_id][index] = fnv(out) | 1; /* 0 marks a frame not seen */
    r->calls[stream_id]++;
    /* the engine of stream 1 "fails" when that stream writes its frame FO_FAIL_AT: its reader
     * is a pool ahead, so the frames up to there finish on it and the rest moves */
    if (stream_id == 1 && index == FO_FAIL_AT && r->fail_engine >= 0 && !r->failed) {
        r->failed = 1;
        kr_session_fail_engine(r->session, r->fail_engine);
    }
    /* stream 0's engine must still run when stream 1 moves (on a machine with many cores it
     * could otherwise finish first, and a finished engine takes no stream): its writer waits
     * here for the move, at most 10 s */
    if (stream_id == 0 && index == 2 * FO_FAIL_AT && r->fail_engine >= 0)
        for (int i = 0; i < 1000 && kr_session_stream_moved_to(r->session, 1) < 0; i++) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    return KEYER_OK;
}

/* Two inputs (the second written to @p out1 with its audio) over @p engines CPU engines;
 * with @p fail, stream 1's engine fails at its frame FO_FAIL_AT. */
static keyer_session *fo_run(const char *in0, const char *in1, const char *out1, int engines,
                             int fail, fo_record *rec, keyer_session_report *rep)
{
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_ERROR;
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.logger = &lg;
    sp.composite.mode = KEYER_COMPOSITE_BLUR;
    sp.refine.temporal = KEYER_TEMPORAL_OFF;
    /* short queues on any machine, so that the reader is still reading at the failure */
    sp.queue_depth = 2;
    sp.composite_workers = 1;
    sp.refine_workers = 1;
    sp.frame_fn = fo_frame;
    sp.frame_opaque = rec;
    keyer_device_kind kinds[2] = {KEYER_DEVICE_CPU, KEYER_DEVICE_CPU};
    int ordinals[2] = {0, 1};
    keyer_session *s = NULL;
    keyer_error err = {0};
    memset(rec, 0, sizeof(*rec));
    rec->fail_engine = -1;
    assert_int_equal(kr_session_create_engines(&sp, kinds, ordinals, engines, &s, &err), KEYER_OK);
    const char *ins[2] = {in0, in1}, *outs[2] = {NULL, out1};
    for (int i = 0; i < 2; i++) {
        keyer_file_stream_params fp = keyer_file_stream_params_defaults();
        fp.input = ins[i];
        fp.output = outs[i];
        if (keyer_session_add_file(s, &fp, NULL, &err))
            fail_msg("add %s: %s", ins[i], err.message);
    }
    rec->session = s;
    if (fail)
        rec->fail_engine = kr_session_stream_engine(s, 1);
    if (keyer_session_run(s, &err))
        fail_msg("run over %d engine(s), failure %d: %s", engines, fail, err.message);
    keyer_session_get_report(s, rep);
    return s;
}

/* Video and audio packets of a file (libavformat). */
static void count_packets(const char *path, int *video, int *audio)
{
    *video = *audio = 0;
    AVFormatContext *fc = NULL;
    if (avformat_open_input(&fc, path, NULL, NULL) < 0 || avformat_find_stream_info(fc, NULL) < 0)
        fail_msg("%s: cannot open", path);
    AVPacket *pkt = av_packet_alloc();
    assert_non_null(pkt);
    while (av_read_frame(fc, pkt) >= 0) {
        enum AVMediaType t = fc->streams[pkt->stream_index]->codecpar->codec_type;
        *video += t == AVMEDIA_TYPE_VIDEO;
        *audio += t == AVMEDIA_TYPE_AUDIO;
        av_packet_unref(pkt);
    }
    av_packet_free(&pkt);
    avformat_close_input(&fc);
}

static void test_failover_between_engines(void **state)
{
    (void)state;
    char dir[3000], img[4096], in0[4096], in1[4096], ref_out[4096], fo_out[4096];
    kt_tmpdir(dir, sizeof(dir), "pipeline_multigpu_failover");
    const char *names[2] = {in0, in1};
    snprintf(in0, sizeof(in0), "%s/a.mp4", dir);
    snprintf(in1, sizeof(in1), "%s/b.mp4", dir);
    snprintf(ref_out, sizeof(ref_out), "%s/ref.mp4", dir);
    snprintf(fo_out, sizeof(fo_out), "%s/moved.mp4", dir);
    for (int i = 0; i < 2; i++) {
        keyer_sample_params p = keyer_sample_params_defaults();
        p.width = 160;
        p.height = 96;
        p.frames = FO_FRAMES;
        p.frame_rate = (keyer_rational){24, 1};
        p.keyint = 12;
        p.preset = "ultrafast";
        p.noise = 3 * i;
        keyer_error err = {0};
        assert_int_equal(keyer_video_write_sample(names[i],
                                                  kt_data_path(img, sizeof(img),
                                                               i ? "messi5.jpg"
                                                                 : "grace_hopper.jpg"),
                                                  &p, &err),
                         KEYER_OK);
    }
    /* the healthy placement and the failover choice */
    double load[3] = {5, 1, 3};
    int healthy[3] = {1, 0, 1};
    assert_int_equal(kr_place_failover(load, healthy, 3), 2); /* the failed 1 is out */
    healthy[2] = 0;
    assert_int_equal(kr_place_failover(load, healthy, 3), 0);
    healthy[0] = 0;
    assert_int_equal(kr_place_failover(load, healthy, 3), -1); /* none: the CPU */
    double tie[2] = {2, 2};
    int both[2] = {1, 1};
    assert_int_equal(kr_place_failover(tie, both, 2), 0);
    assert_int_equal(kr_place_failover(NULL, both, 2), -1);

    static fo_record ref, moved;
    keyer_session_report r1, r2;
    keyer_session *s1 = fo_run(in0, in1, ref_out, 1, 0, &ref, &r1);
    keyer_session *s2 = fo_run(in0, in1, fo_out, 2, 1, &moved, &r2);
    assert_int_equal(ref.bad, 0);
    assert_int_equal(moved.bad, 0);
    assert_int_equal(moved.failed, 1);
    assert_int_equal(kr_session_stream_engine(s2, 0), 0);
    assert_int_equal(kr_session_stream_engine(s2, 1), 1);
    assert_int_equal(kr_session_stream_moved_to(s2, 1), 0); /* to the one engine left */
    assert_int_equal(kr_session_stream_moved_to(s2, 0), -1);
    assert_int_equal(kr_session_stream_moved_to(s1, 1), -1);
    /* no frame lost, each written once, in order, equal to the run without a failure */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ref.calls[i], FO_FRAMES);
        assert_int_equal(moved.calls[i], FO_FRAMES);
        for (int f = 0; f < FO_FRAMES; f++)
            if (!moved.sum[i][f] || moved.sum[i][f] != ref.sum[i][f])
                fail_msg("stream %d frame %d differs after the failover", i, f);
    }
    assert_int_equal(r2.frames_written, 2 * FO_FRAMES);
    assert_int_equal(r2.frames_lost, 0);
    assert_true(r2.warnings >= 2); /* the failure and the move */
    printf("  session: %s\n", r2.device);
    assert_string_equal(r2.device, "cpu + cpu (failed: 1 stream moved to other GPUs)");
    keyer_stream_report sr;
    keyer_error err = {0};
    assert_int_equal(keyer_session_get_stream_report(s2, 1, &sr, &err), KEYER_OK);
    printf("  stream 1: %lld frames read, %lld written on %s\n", (long long)sr.frames_read,
           (long long)sr.frames_written, sr.device);
    assert_string_equal(sr.device, "cpu, then cpu (GPU failure)");
    assert_int_equal(sr.frames_written, FO_FRAMES);
    assert_int_equal(sr.frames_read, FO_FRAMES);
    assert_int_equal(sr.frames_lost, 0);
    assert_int_equal(sr.status, KEYER_OK);
    assert_int_equal(keyer_session_stream_status(s2, 1, &err), KEYER_OK);
    assert_int_equal(keyer_session_get_stream_report(s2, 0, &sr, &err), KEYER_OK);
    assert_string_equal(sr.device, "cpu");
    keyer_session_destroy(&s1);
    keyer_session_destroy(&s2);
    /* one output file, whole: every video frame, and the audio after the move too */
    int v1 = 0, a1 = 0, v2 = 0, a2 = 0;
    count_packets(ref_out, &v1, &a1);
    count_packets(fo_out, &v2, &a2);
    printf("  output: %d video frames, %d audio packets (without a failure: %d, %d)\n", v2, a2,
           v1, a1);
    assert_int_equal(v1, FO_FRAMES);
    assert_int_equal(v2, FO_FRAMES);
    assert_true(a1 > 0);
    assert_true(a2 >= a1 - 1 && a2 <= a1);
}

/* One file split at keyframes over two CPU engines, written back in order: every output frame
 * equals the one-session run's (temporal smoothing off: a frame's matte is its own). */
enum { SPLIT_FRAMES = 96 };

/* @p reader_threads: the lanes' decoder threads (0: the default, one per core) */
static int run_split_lanes(const char *in, const char *out_pattern, int engines, int split,
                           int chunks, int reader_threads, keyer_stream_report *sr,
                           keyer_error *err)
{
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_ERROR;
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = KEYER_DEVICE_CPU;
    sp.logger = &lg;
    sp.composite.mode = KEYER_COMPOSITE_BLUR;
    sp.refine.temporal = KEYER_TEMPORAL_OFF;
    sp.split_gpus = split;
    sp.split_chunks = chunks;
    keyer_device_kind kinds[2] = {KEYER_DEVICE_CPU, KEYER_DEVICE_CPU};
    int ordinals[2] = {0, 0};
    keyer_session *s = NULL;
    assert_int_equal(kr_session_create_engines(&sp, kinds, ordinals, engines, &s, err), KEYER_OK);
    keyer_file_stream_params fp = keyer_file_stream_params_defaults();
    fp.input = in;
    fp.output = out_pattern;
    fp.reader.threads = reader_threads;
    int id = -1;
    keyer_status st = keyer_session_add_file(s, &fp, &id, err);
    if (!st) {
        assert_int_equal(id, 0);
        if (split && kr_split_gpus_lanes(engines, chunks) > 1) {
            assert_int_equal(kr_session_stream_engine(s, 0), -1);
            /* a second input, pushed streams: refused */
            assert_int_equal(keyer_session_add_file(s, &fp, NULL, err),
                             KEYER_STATUS_INVALID_ARGUMENT);
            keyer_stream_params stp = keyer_stream_params_defaults();
            stp.width = 64;
            stp.height = 64;
            stp.format = KEYER_PIXEL_FORMAT_RGBA;
            assert_int_equal(keyer_session_open_stream(s, &stp, NULL, err),
                             KEYER_STATUS_INVALID_ARGUMENT);
            keyer_error_clear(err);
        }
        st = keyer_session_run(s, err);
    }
    if (!st) {
        assert_int_equal(keyer_session_stream_count(s), 1);
        assert_int_equal(keyer_session_get_stream_report(s, 0, sr, err), KEYER_OK);
        keyer_session_report rep;
        keyer_session_get_report(s, &rep);
        assert_int_equal(rep.frames_written, sr->frames_written);
    }
    keyer_session_destroy(&s);
    return st;
}

static int run_split_chunks(const char *in, const char *out_pattern, int engines, int split,
                            int chunks, keyer_stream_report *sr, keyer_error *err)
{
    return run_split_lanes(in, out_pattern, engines, split, chunks, 0, sr, err);
}

static int run_split(const char *in, const char *out_pattern, int engines, int split,
                     keyer_stream_report *sr, keyer_error *err)
{
    return run_split_chunks(in, out_pattern, engines, split, 0, sr, err);
}

/* Every PNG of @p got equals @p ref's (@p frames of them), and there is no frame more. */
static void same_pngs_n(const char *dir, const char *ref_prefix, const char *got_prefix,
                        int frames)
{
    char ref[4096], got[4096];
    for (int f = 0; f < frames + 1; f++) {
        snprintf(ref, sizeof(ref), "%s/%s_%05d.png", dir, ref_prefix, f + 1);
        snprintf(got, sizeof(got), "%s/%s_%05d.png", dir, got_prefix, f + 1);
        if (f == frames) {
            assert_false(kt_exists(got)); /* no frame more */
            break;
        }
        size_t na = 0, nb = 0;
        void *a = kt_read_file(ref, &na), *b = kt_read_file(got, &nb);
        if (!a || !b || na != nb || memcmp(a, b, na))
            fail_msg("frame %d of the %s run differs from the one-session run", f, got_prefix);
        free(a);
        free(b);
    }
}

static void same_pngs(const char *dir, const char *ref_prefix, const char *got_prefix)
{
    same_pngs_n(dir, ref_prefix, got_prefix, SPLIT_FRAMES);
}

/* the reader parameters the session gives a stream (LIVE: live, paced or latency mode) from
 * the reader's defaults */
static keyer_reader_params knobs(const keyer_session_params *sp, int live)
{
    keyer_reader_params rp = keyer_reader_params_defaults();
    kr_stream_decoder_knobs(sp, live, &rp);
    return rp;
}

static void test_split_lanes(void **state)
{
    (void)state;
    /* lanes: engines x chunks in flight, default 2 each, at most 16 each and 128 in all */
    assert_int_equal(kr_split_gpus_lanes(1, 0), KR_SPLIT_DEFAULT_CHUNKS);
    assert_int_equal(kr_split_gpus_lanes(2, 0), 2 * KR_SPLIT_DEFAULT_CHUNKS);
    assert_int_equal(kr_split_gpus_lanes(1, 1), 1);
    assert_int_equal(kr_split_gpus_lanes(2, 3), 6);
    assert_int_equal(kr_split_gpus_lanes(3, 99), 3 * KR_SPLIT_MAX_CHUNKS);
    assert_int_equal(kr_split_gpus_lanes(64, 16), 128);
    assert_int_equal(kr_split_gpus_lanes(64, 1), 64);
    assert_int_equal(kr_split_gpus_lanes(0, 2), 0);
    assert_int_equal(kr_split_gpus_lanes(65, 1), 0);
    /* chunks from GOPs (pts in frames here, a GOP every 12): lanes x c chunks of at most
     * about 72 frames, each lane the same share within a GOP */
    int64_t gops[50], cut[50];
    for (int i = 0; i < 50; i++)
        gops[i] = 12 * i;
    /* 240 frames (20 GOPs): 4 lanes, 60 frames each (before: 72, 72, 48, 48); 2 lanes: 2
     * chunks of 60 each; 8 lanes: 24 or 36 frames, the cuts nearest to 30 x j */
    const int64_t four[] = {0, 60, 120, 180};
    assert_int_equal(kr_split_gpus_balance(gops, 20, 240, 4, 72, cut), 4);
    for (int k = 0; k < 4; k++)
        assert_int_equal(cut[k], four[k]);
    assert_int_equal(kr_split_gpus_balance(gops, 20, 240, 2, 72, cut), 4);
    for (int k = 0; k < 4; k++)
        assert_int_equal(cut[k], four[k]);
    const int64_t eight[] = {0, 24, 60, 84, 120, 144, 180, 204};
    assert_int_equal(kr_split_gpus_balance(gops, 20, 240, 8, 72, cut), 8);
    for (int k = 0; k < 8; k++)
        assert_int_equal(cut[k], eight[k]);
    /* the 96-frame file below on 2 GPUs x 2 lanes: 4 chunks of 24, as before */
    assert_int_equal(kr_split_gpus_balance(gops, 8, 96, 4, 72, cut), 4);
    for (int k = 0; k < 4; k++)
        assert_int_equal(cut[k], 24 * k);
    /* 600 frames (50 GOPs) on 4 lanes: 12 chunks of 48 to 60 frames, each lane 144 to 156
     * (before: 9 chunks of 72 and 24, lanes 216, 216, 144, 96) */
    int n = kr_split_gpus_balance(gops, 50, 600, 4, 72, cut);
    assert_int_equal(n, 12);
    int64_t lane[4] = {0, 0, 0, 0};
    for (int k = 0; k < n; k++) {
        int64_t len = (k + 1 < n ? cut[k + 1] : 600) - cut[k];
        assert_true(len >= 48 && len <= 60);
        lane[k % 4] += len;
    }
    for (int l = 0; l < 4; l++)
        assert_true(lane[l] >= 144 && lane[l] <= 156);
    /* fewer GOPs than chunks wanted: one chunk per GOP; bad arguments: the GOPs as they are */
    assert_int_equal(kr_split_gpus_balance(gops, 3, 36, 8, 72, cut), 3);
    assert_int_equal(cut[2], 24);
    assert_int_equal(kr_split_gpus_balance(gops, 20, 100, 4, 72, cut), 20); /* end < last */
    assert_int_equal(kr_split_gpus_balance(gops, 20, 240, 0, 72, cut), 20);
    assert_int_equal(kr_split_gpus_balance(gops, 20, 240, 4, 0, cut), 20);
    assert_int_equal(kr_split_gpus_balance(NULL, 20, 240, 4, 72, cut), 0);
    /* the session option */
    keyer_session_params p = keyer_session_params_defaults();
    keyer_error err = {0};
    assert_int_equal(p.split_chunks, 0);
    assert_int_equal(kt_session_option(&p, "split_chunks", "4"), KEYER_OK);
    assert_int_equal(p.split_chunks, 4);
    assert_int_not_equal(kt_session_option(&p, "split_chunks", "17"), KEYER_OK);
    assert_int_equal(kt_session_option(&p, "decode_segments", "2"), KEYER_OK);
    assert_int_equal(kt_session_option(&p, "decode_surfaces", "8"), KEYER_OK);
    assert_int_equal(kt_session_option(&p, "decode_shared_stream", "1"), KEYER_OK);
    assert_int_equal(p.decode_segments, 2);
    assert_int_equal(p.decode_surfaces, 8);
    assert_int_equal(p.decode_shared_stream, 1);
    assert_int_not_equal(kt_session_option(&p, "decode_surfaces", "17"), KEYER_OK);
    /* what the knobs give a stream's reader: its own values win */
    keyer_reader_params rp = knobs(&p, 0);
    assert_int_equal(rp.segments, 2);
    assert_int_equal(rp.hw_surfaces, 8);
    assert_int_equal(rp.hw_shared_stream, 1);
    rp = keyer_reader_params_defaults();
    rp.segments = 3;
    rp.hw_surfaces = 1;
    kr_stream_decoder_knobs(&p, 0, &rp);
    assert_int_equal(rp.segments, 3);
    assert_int_equal(rp.hw_surfaces, 1);
    keyer_session_params d = keyer_session_params_defaults();
    rp = knobs(&d, 0);
    assert_int_equal(rp.segments, 0);
    assert_int_equal(rp.hw_surfaces, 0);
    assert_int_equal(rp.hw_shared_stream, 0);
    assert_int_equal(rp.decode_ahead, 0);
    /* decode-ahead: explicit, or -1 (auto): 4 for a file stream, none for a live one */
    assert_int_equal(d.decode_ahead, 0);
    assert_int_equal(kt_session_option(&d, "decode_ahead", "6"), KEYER_OK);
    rp = knobs(&d, 1);
    assert_int_equal(rp.decode_ahead, 6);
    assert_int_equal(kt_session_option(&d, "decode_ahead", "-1"), KEYER_OK);
    rp = knobs(&d, 0);
    assert_int_equal(rp.decode_ahead, KR_DECODE_AHEAD_FILES);
    rp = knobs(&d, 1);
    assert_int_equal(rp.decode_ahead, 0);
    rp = keyer_reader_params_defaults();
    rp.decode_ahead = 2; /* the stream's own value wins */
    kr_stream_decoder_knobs(&d, 0, &rp);
    assert_int_equal(rp.decode_ahead, 2);
    assert_int_not_equal(kt_session_option(&d, "decode_ahead", "9"), KEYER_OK);
    assert_int_not_equal(kt_session_option(&d, "decode_ahead", "-2"), KEYER_OK);
    /* decode_segments -1 (the default): decided from the expected file streams before the
     * reader opens: two sessions below 16 per GPU, for a file on NVDEC (device AUTO/CUDA),
     * marked as keyer's choice; none when not said, at 16, for live/paced/latency streams,
     * CPU decoding, an explicit 0 or a stream's own value */
    keyer_session_params a = keyer_session_params_defaults();
    assert_int_equal(a.decode_segments, -1);
    assert_int_equal(a.expected_files, 0);
    const int files[] = {0, 1, 8, 15, 16, 64};
    const int expect[] = {0, 2, 2, 2, 0, 0};
    for (int k = 0; k < 6; k++) {
        a.expected_files = files[k];
        rp = knobs(&a, 0);
        assert_int_equal(rp.segments, expect[k]);
        assert_int_equal(rp.segments_auto, expect[k] ? 1 : 0);
    }
    a.expected_files = 8;
    rp = knobs(&a, 1); /* live, realtime or latency mode */
    assert_int_equal(rp.segments, 0);
    rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    kr_stream_decoder_knobs(&a, 0, &rp);
    assert_int_equal(rp.segments, 0);
    rp = keyer_reader_params_defaults();
    rp.segments = 3;
    kr_stream_decoder_knobs(&a, 0, &rp);
    assert_int_equal(rp.segments, 3);
    assert_int_equal(rp.segments_auto, 0);
    assert_int_equal(kt_session_option(&a, "decode_segments", "0"), KEYER_OK);
    rp = knobs(&a, 0);
    assert_int_equal(rp.segments, 0);
    assert_int_equal(kt_session_option(&a, "expected_files", "12"), KEYER_OK);
    assert_int_equal(a.expected_files, 12);
    assert_int_not_equal(kt_session_option(&a, "decode_segments", "-2"), KEYER_OK);
    /* and the reader refuses values out of range */
    keyer_reader *r = NULL;
    char img[4096];
    rp = keyer_reader_params_defaults();
    rp.hw_surfaces = 17;
    assert_int_equal(keyer_reader_open(kt_data_path(img, sizeof(img), "grace_hopper.jpg"), &rp,
                                       &r, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_null(r);
    rp = keyer_reader_params_defaults();
    rp.decode_ahead = 9;
    assert_int_equal(keyer_reader_open(kt_data_path(img, sizeof(img), "grace_hopper.jpg"), &rp,
                                       &r, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "decode_ahead 9"));
    assert_null(r);
}

static void test_split_over_engines(void **state)
{
    (void)state;
    char dir[3000], in[4096];
    kt_tmpdir(dir, sizeof(dir), "pipeline_multigpu_split");
    snprintf(in, sizeof(in), "%s/long.mp4", dir);
    keyer_sample_params p = keyer_sample_params_defaults();
    p.width = 192;
    p.height = 108;
    p.frames = SPLIT_FRAMES;
    p.frame_rate = (keyer_rational){24, 1};
    p.keyint = 12; /* chunks of 24 frames: 4 chunks, 2 per engine */
    p.preset = "ultrafast";
    keyer_error err = {0};
    kt_make_sample(in, &p);
    int64_t *starts = NULL;
    int chunks = 0;
    assert_int_equal(keyer_reader_plan_chunks(in, 2, &starts, NULL, &chunks, &err), KEYER_OK);
    printf("  %d chunks, starting at pts", chunks);
    for (int k = 0; k < chunks; k++)
        printf(" %lld", (long long)starts[k]);
    printf("\n");
    assert_int_equal(chunks, 4);
    for (int k = 1; k < chunks; k++)
        assert_true(starts[k] > starts[k - 1]);
    free(starts);

    char ref_pat[4096], got_pat[4096];
    snprintf(ref_pat, sizeof(ref_pat), "%s/ref_%%05d.png", dir);
    snprintf(got_pat, sizeof(got_pat), "%s/got_%%05d.png", dir);
    keyer_stream_report r1, r2;
    assert_int_equal(run_split(in, ref_pat, 1, 0, &r1, &err), KEYER_OK);
    if (run_split(in, got_pat, 2, 1, &r2, &err))
        fail_msg("split run: %s", err.message);
    assert_int_equal(r1.frames_written, SPLIT_FRAMES);
    assert_int_equal(r2.frames_written, SPLIT_FRAMES);
    assert_int_equal(r2.frames_read, SPLIT_FRAMES);
    assert_int_equal(r2.status, KEYER_OK);
    assert_string_equal(r2.device, "cpu + cpu (split)");
    same_pngs(dir, "ref", "got");

    /* one engine, three chunks in flight (three lanes over four chunks: lane 0 takes chunks
     * 0 and 3), and two engines with one chunk in flight each (lanes = engines) */
    char one_pat[4096], two_pat[4096];
    snprintf(one_pat, sizeof(one_pat), "%s/one_%%05d.png", dir);
    snprintf(two_pat, sizeof(two_pat), "%s/two_%%05d.png", dir);
    keyer_stream_report r3, r4;
    if (run_split_chunks(in, one_pat, 1, 1, 3, &r3, &err))
        fail_msg("split run on one engine: %s", err.message);
    assert_int_equal(r3.frames_written, SPLIT_FRAMES);
    assert_int_equal(r3.frames_read, SPLIT_FRAMES);
    assert_int_equal(r3.status, KEYER_OK);
    assert_string_equal(r3.device, "cpu (split)");
    same_pngs(dir, "ref", "one");
    if (run_split_chunks(in, two_pat, 2, 1, 1, &r4, &err))
        fail_msg("split run, one chunk per engine: %s", err.message);
    assert_int_equal(r4.frames_written, SPLIT_FRAMES);
    assert_string_equal(r4.device, "cpu + cpu (split)");
    same_pngs(dir, "ref", "two");

    /* a longer file (16 GOPs over 2 lanes: 4 chunks of 48 frames) split over one engine */
    enum { LONG = 192 };
    char lin[4096], lref[4096], lgot[4096];
    snprintf(lin, sizeof(lin), "%s/longer.mp4", dir);
    p.frames = LONG;
    p.width = 128;
    p.height = 72;
    kt_make_sample(lin, &p);
    int64_t *ls = NULL;
    int lc = 0;
    assert_int_equal(keyer_reader_plan_chunks(lin, 1 << 24, &ls, NULL, &lc, &err), KEYER_OK);
    assert_int_equal(lc, 16);
    int64_t lcut[16];
    int64_t frame = ls[1] / 12; /* pts of a frame */
    assert_int_equal(kr_split_gpus_balance(ls, lc, LONG * frame, 2, 72 * frame, lcut), 4);
    for (int k = 0; k < 4; k++)
        assert_int_equal(lcut[k], 48 * k * frame);
    free(ls);
    snprintf(lref, sizeof(lref), "%s/lref_%%05d.png", dir);
    snprintf(lgot, sizeof(lgot), "%s/lgot_%%05d.png", dir);
    keyer_stream_report r5, r6;
    assert_int_equal(run_split(lin, lref, 1, 0, &r5, &err), KEYER_OK);
    if (run_split_chunks(lin, lgot, 1, 1, 2, &r6, &err))
        fail_msg("split of the longer file: %s", err.message);
    assert_int_equal(r6.frames_written, LONG);
    assert_string_equal(r6.device, "cpu (split)");
    same_pngs_n(dir, "lref", "lgot", LONG);
}

/* The lanes decode exactly their chunks. Chunks between H.264 IDR pictures that the MP4 index
 * counts end with their own last frame: a lane does not read on to the next chunk's first
 * frame, which made its decoder take the next chunk's IDR picture too, only to see that the
 * chunk had ended (the lane that owns that chunk decodes it again). The sample has 2 B-frames
 * (keyer_sample_params' default), so a decoder on one thread outputs a picture D = 2
 * pictures after it takes it: each chunk but the file's last ends D pictures into the next
 * chunk (before, D + 1), and each lane but the first decodes the file's first 1 + D pictures
 * at its opening (keyer_reader_open's probe) for nothing; the first lane starts its first
 * chunk, the file's first, where its opening left it (before, it sought back to it and
 * decoded those pictures again, its decoder set up a second time). The frames are the
 * one-session run's (test_split_over_engines compares them). */
static void test_split_decoded_pictures(void **state)
{
    (void)state;
    enum { N = 192, GOP = 12 };
    char dir[3000], in[4096];
    kt_tmpdir(dir, sizeof(dir), "pipeline_multigpu_split_pictures");
    snprintf(in, sizeof(in), "%s/gops.mp4", dir);
    keyer_sample_params p = keyer_sample_params_defaults();
    p.width = 128;
    p.height = 72;
    p.frames = N;
    p.frame_rate = (keyer_rational){24, 1};
    p.keyint = GOP;
    p.preset = "ultrafast";
    keyer_error err = {0};
    kt_make_sample(in, &p);
    /* every GOP counted exactly: IDR pictures at both ends, every packet in the index */
    int64_t *starts = NULL;
    int *frames = NULL, gops = 0, sum = 0;
    assert_int_equal(keyer_reader_plan_chunks(in, 1 << 24, &starts, &frames, &gops, &err),
                     KEYER_OK);
    assert_int_equal(gops, N / GOP);
    for (int g = 0; g < gops; g++) {
        assert_int_equal(frames[g], GOP);
        sum += frames[g];
    }
    assert_int_equal(sum, N);
    free(starts);
    free(frames);
    /* one engine with 2 lanes (4 chunks of 48: two per lane), two engines with 2 lanes each
     * (4 lanes, 4 chunks of 48), one engine with 3 lanes (3 chunks of 60-72):
     * kr_split_gpus_balance with chunks of at most 72 frames */
    enum { D = 2 };
    const int engines[3] = {1, 2, 1}, per_engine[3] = {2, 2, 3}, chunks[3] = {4, 4, 3};
    for (int c = 0; c < 3; c++) {
        int lanes = engines[c] * per_engine[c];
        keyer_stream_report r;
        if (run_split_lanes(in, NULL, engines[c], 1, per_engine[c], 1, &r, &err))
            fail_msg("split over %d engine(s), %d lanes: %s", engines[c], lanes, err.message);
        int64_t extra = r.decoded_pictures - r.frames_read;
        int64_t bound = (lanes - 1) * (1 + D) + (chunks[c] - 1) * D;
        print_message("    %d engine(s), %d lanes, %d chunks: %lld pictures decoded for %lld "
                      "frames read (%lld more, at most %lld; reading to the next chunk's first "
                      "frame and seeking to the first: %lld), %lld decoder set-ups\n",
                      engines[c], lanes, chunks[c], (long long)r.decoded_pictures,
                      (long long)r.frames_read, (long long)extra, (long long)bound,
                      (long long)(bound + chunks[c] - 1 + 1 + D), (long long)r.decoder_setups);
        assert_int_equal(r.status, KEYER_OK);
        assert_int_equal(r.frames_read, N);
        assert_int_equal(r.frames_written, N);
        assert_true(extra >= lanes - 1 && extra <= bound);
        assert_int_equal(r.decoder_setups, lanes); /* one each: the seeks keep the decoders */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_lists),
        cmocka_unit_test(test_session_option),
        cmocka_unit_test(test_list_without_gpu),
        cmocka_unit_test(test_placement),
        cmocka_unit_test(test_fail_spec),
        cmocka_unit_test(test_two_engines_equal_one),
        cmocka_unit_test(test_failed_input_among_engines),
        cmocka_unit_test(test_pushed_streams),
        cmocka_unit_test(test_failover_between_engines),
        cmocka_unit_test(test_split_lanes),
        cmocka_unit_test(test_split_over_engines),
        cmocka_unit_test(test_split_decoded_pictures),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
