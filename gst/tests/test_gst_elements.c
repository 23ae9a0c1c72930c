/*
 * The GStreamer plugin (gst/): both elements through GstHarness and real pipelines.
 *  - every property generated from the option tables exists, is writable and reads back;
 *    keyerdetect's properties too;
 *  - caps negotiation for each system-memory format (and RGBA / GRAY8 out in the alpha and
 *    mask modes; RGB refused by keyerdetect when it draws), one frame in, one frame out;
 *  - filesrc ! decodebin ! videoconvert ! keyer on tests/data/sample_hevc.mp4 gives the `keyer`
 *    command's frames (lossless FFV1 output) within 1 code value, on the CPU;
 *  - keyerdetect's region-of-interest metas carry what `keyer ... --detect faces,pose
 *    --export` writes for the same clip; its faces found by a keyer session (device=cuda:
 *    the GPU, or the session on the CPU without one) are the CPU analysers' faces; its pad
 *    templates have CUDA memory exactly when built with GStreamer's CUDA library, and then
 *    each pad offers the other pad's memory in the other pad's order;
 *  - a live videotestsrc pipeline answers the latency query with keyer's added latency;
 *  - QoS: a frame later than the last QoS event allows is dropped;
 *  - an unknown model, a missing model file and nothing to detect post an error naming the
 *    problem and the pipeline stops cleanly;
 *  - NULL <-> PLAYING repeated and a flushing seek (leaks are found by the sanitizer build);
 *  - session groups: two keyer elements with the same session-group share one session (two
 *    members while they run, frames batched together) and each gives the frames it gives
 *    alone (within 1 code value); an element with other settings cannot join.
 * The plugin is registered statically (no plugin scanner, so the sanitizer build runs it too).
 * Needs the `keyer` command (KEYER_BIN), the models and gst-libav's HEVC decoder; exits 77
 * (skipped) with the reason when GStreamer's own elements it uses are missing.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <gst/check/gstharness.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include "keyer/effects.h"
#include "keyer/io.h"
#include "keyer/pipeline.h"
#include "testutil.h"

GST_PLUGIN_STATIC_DECLARE(keyer);

static char sample[4096];

/* ---- helpers ----------------------------------------------------------------------------- */

/* Runs @p pipeline to EOS or an error; returns the error message (g_free) or NULL. */
static gchar *run_pipeline(GstElement *pipeline)
{
    GstStateChangeReturn sr = gst_element_set_state(pipeline, GST_STATE_PLAYING);
    GstBus *bus = gst_element_get_bus(pipeline);
    gchar *error = NULL;
    GstMessage *m = gst_bus_timed_pop_filtered(bus, 120 * GST_SECOND,
                                               GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
    if (!m) {
        error = g_strdup("timed out");
    } else if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR) {
        GError *e = NULL;
        gst_message_parse_error(m, &e, NULL);
        error = g_strdup(e->message);
        g_error_free(e);
    }
    if (m)
        gst_message_unref(m);
    gst_object_unref(bus);
    assert_int_equal(gst_element_set_state(pipeline, GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);
    if (!error && sr == GST_STATE_CHANGE_FAILURE)
        error = g_strdup("state change failed without an error message");
    return error;
}

static GstElement *parse(const char *desc)
{
    GError *e = NULL;
    GstElement *p = gst_parse_launch(desc, &e);
    if (e) {
        fail_msg("gst_parse_launch(%s): %s", desc, e->message);
    }
    assert_non_null(p);
    return p;
}

static void run_command(const char *cmd)
{
    int rc = system(cmd);
    if (rc != 0)
        fail_msg("command failed (%d): %s", rc, cmd);
}

/* ---- properties ---------------------------------------------------------------------------- */

static const char *const skipped_session[] = {"max_streams", "live", "realtime", "trace_events",
                                              "progress_interval_ms", "cuda_devices",
                                              "split_gpus", NULL};

static int listed(const char *const *l, const char *n)
{
    for (; *l; l++)
        if (!strcmp(*l, n))
            return 1;
    return 0;
}

/* A valid value other than the default of the property, set and read back. */
static void check_roundtrip(GObject *o, GParamSpec *ps)
{
    GValue v = G_VALUE_INIT, back = G_VALUE_INIT;
    g_value_init(&v, ps->value_type);
    g_value_init(&back, ps->value_type);
    if (G_IS_PARAM_SPEC_INT(ps)) {
        GParamSpecInt *s = G_PARAM_SPEC_INT(ps);
        g_value_set_int(&v, s->default_value < s->maximum ? s->default_value + 1 : s->minimum);
    } else if (G_IS_PARAM_SPEC_FLOAT(ps)) {
        GParamSpecFloat *s = G_PARAM_SPEC_FLOAT(ps);
        g_value_set_float(&v, (s->default_value + s->maximum) / 2);
    } else if (G_IS_PARAM_SPEC_BOOLEAN(ps)) {
        g_value_set_boolean(&v, !G_PARAM_SPEC_BOOLEAN(ps)->default_value);
    } else if (G_IS_PARAM_SPEC_UINT(ps)) {
        g_value_set_uint(&v, 0x123456);
    } else if (G_IS_PARAM_SPEC_ENUM(ps)) {
        GEnumClass *ec = G_PARAM_SPEC_ENUM(ps)->enum_class;
        g_value_set_enum(&v, ec->values[ec->n_values - 1].value);
    } else if (G_IS_PARAM_SPEC_STRING(ps)) {
        g_value_set_string(&v, "selfie");
    } else {
        fail_msg("property %s: unexpected type %s", ps->name, g_type_name(ps->value_type));
    }
    g_object_set_property(o, ps->name, &v);
    g_object_get_property(o, ps->name, &back);
    if (gst_value_compare(&v, &back) != GST_VALUE_EQUAL) {
        gchar *a = gst_value_serialize(&v), *b = gst_value_serialize(&back);
        fail_msg("property %s: set %s, read %s", ps->name, a, b);
    }
    g_value_unset(&v);
    g_value_unset(&back);
}

static void test_keyer_properties(void **state)
{
    GstElement *e = gst_element_factory_make("keyer", NULL);
    assert_non_null(e);
    GObjectClass *k = G_OBJECT_GET_CLASS(e);
    struct {
        const keyer_option *t;
        const char *const *skip;
    } tables[] = {{keyer_session_options(), skipped_session},
                  {keyer_refine_options(), (const char *const[]){"max_streams", "threads", NULL}},
                  {keyer_composite_options(), (const char *const[]){"threads", NULL}}};
    int n = 0;
    for (size_t i = 0; i < 3; i++) {
        for (const keyer_option *o = tables[i].t; o->name; o++) {
            if (listed(tables[i].skip, o->name))
                continue;
            gchar *name = g_strdup(o->name);
            g_strdelimit(name, "_", '-');
            /* the compositing mode is the element's effect; the session's threads covers the
             * effects' */
            const char *pname = tables[i].t == keyer_composite_options() && !strcmp(o->name, "mode")
                                    ? "effect"
                                    : name;
            GParamSpec *ps = g_object_class_find_property(k, pname);
            if (!ps)
                fail_msg("option %s has no property %s", o->name, pname);
            assert_true(ps->flags & G_PARAM_WRITABLE);
            assert_non_null(g_param_spec_get_blurb(ps));
            check_roundtrip(G_OBJECT(e), ps);
            g_free(name);
            n++;
        }
    }
    assert_true(n >= 25);
    check_roundtrip(G_OBJECT(e), g_object_class_find_property(k, "model"));
    check_roundtrip(G_OBJECT(e), g_object_class_find_property(k, "background"));
    /* defaults are the library's */
    gfloat radius = 0;
    gint feather = -1;
    gst_object_unref(e);
    e = gst_element_factory_make("keyer", NULL);
    g_object_get(e, "blur-radius", &radius, "feather", &feather, NULL);
    assert_true(radius == keyer_composite_params_defaults().blur_radius);
    assert_int_equal(feather, keyer_refine_params_defaults().feather);
    gst_object_unref(e);
}

static void test_detect_properties(void **state)
{
    GstElement *e = gst_element_factory_make("keyerdetect", NULL);
    assert_non_null(e);
    const char *names[] = {"faces", "full-range", "landmarks", "pose", "max-faces",
                           "min-score", "threads", "draw", "post-messages", "device",
                           "cuda-device"};
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        GParamSpec *ps = g_object_class_find_property(G_OBJECT_GET_CLASS(e), names[i]);
        if (!ps)
            fail_msg("keyerdetect has no property %s", names[i]);
        check_roundtrip(G_OBJECT(e), ps);
    }
    /* read-only: where the faces are detected, "" before the first start */
    GParamSpec *dd = g_object_class_find_property(G_OBJECT_GET_CLASS(e), "detector-device");
    assert_non_null(dd);
    assert_false(dd->flags & G_PARAM_WRITABLE);
    gchar *dev = NULL;
    g_object_get(e, "detector-device", &dev, NULL);
    assert_string_equal(dev, "");
    g_free(dev);
    gst_object_unref(e);
}

/* ---- caps and frames through GstHarness --------------------------------------------------- */

/* One 96x64 grey-ish frame of @p format through @p h; returns the output caps' format. */
static gchar *one_frame(GstHarness *h, const char *format)
{
    gchar *caps = g_strdup_printf("video/x-raw,format=%s,width=96,height=64,framerate=30/1",
                                  format);
    gst_harness_set_src_caps_str(h, caps);
    g_free(caps);
    GstVideoInfo info;
    GstCaps *sc = gst_pad_get_current_caps(h->srcpad);
    assert_true(gst_video_info_from_caps(&info, sc));
    gst_caps_unref(sc);
    GstBuffer *in = gst_harness_create_buffer(h, GST_VIDEO_INFO_SIZE(&info));
    GstMapInfo m;
    assert_true(gst_buffer_map(in, &m, GST_MAP_WRITE));
    for (gsize i = 0; i < m.size; i++)
        m.data[i] = (guint8)(96 + (i * 7) % 64);
    gst_buffer_unmap(in, &m);
    GST_BUFFER_PTS(in) = 5 * GST_SECOND;
    GST_BUFFER_DURATION(in) = GST_SECOND / 30;
    GstFlowReturn ret = gst_harness_push(h, in);
    if (ret != GST_FLOW_OK)
        fail_msg("%s: pushing a %s frame: %s", GST_ELEMENT_NAME(h->element), format,
                 gst_flow_get_name(ret));
    GstBuffer *out = gst_harness_pull(h);
    assert_non_null(out);
    assert_int_equal(GST_BUFFER_PTS(out), 5 * GST_SECOND);
    assert_int_equal(GST_BUFFER_DURATION(out), GST_SECOND / 30);
    GstCaps *oc = gst_pad_get_current_caps(h->sinkpad);
    GstVideoInfo oi;
    assert_true(gst_video_info_from_caps(&oi, oc));
    gst_caps_unref(oc);
    assert_int_equal(GST_VIDEO_INFO_WIDTH(&oi), 96);
    assert_int_equal(GST_VIDEO_INFO_HEIGHT(&oi), 64);
    assert_true(gst_buffer_get_size(out) >= GST_VIDEO_INFO_SIZE(&oi));
    gst_buffer_unref(out);
    return g_strdup(GST_VIDEO_INFO_NAME(&oi));
}

static const char *const formats[] = {"NV12", "I420", "RGBA", "BGRx", "RGB"};

static void test_keyer_caps(void **state)
{
    const char *effects[] = {"blur", "color", "green", "alpha", "mask"};
    for (size_t e = 0; e < G_N_ELEMENTS(effects); e++) {
        for (size_t f = 0; f < G_N_ELEMENTS(formats); f++) {
            gchar *desc = g_strdup_printf("keyer effect=%s device=cpu mode=latency", effects[e]);
            GstHarness *h = gst_harness_new_parse(desc);
            g_free(desc);
            gchar *out = one_frame(h, formats[f]);
            const char *want = !strcmp(effects[e], "alpha") ? "RGBA"
                               : !strcmp(effects[e], "mask") ? "GRAY8"
                                                              : formats[f];
            if (strcmp(out, want))
                fail_msg("effect %s on %s gave %s, not %s", effects[e], formats[f], out, want);
            g_free(out);
            gst_harness_teardown(h);
        }
    }
}

/* The output buffers come from the element's own pool: one video meta, its own layout, also
 * when the input's memory is laid out otherwise (I420 with padded rows and its video meta):
 * the same pixels as the unpadded frame gives. */
static void test_keyer_output_buffers(void **state)
{
    const int w = 64, h = 48, pad = 128; /* luma row stride of the padded input */
    GstBuffer *outs[2];
    for (int k = 0; k < 2; k++) {
        GstHarness *hn = gst_harness_new_parse("keyer device=cpu mode=latency effect=color");
        gst_harness_set_src_caps_str(hn,
                                     "video/x-raw,format=I420,width=64,height=48,framerate=30/1");
        gsize offset[4] = {0, (gsize)pad * h, (gsize)pad * h + (gsize)(pad / 2) * (h / 2)};
        gint stride[4] = {k ? pad : w, k ? pad / 2 : w / 2, k ? pad / 2 : w / 2};
        if (!k) {
            offset[1] = (gsize)w * h;
            offset[2] = offset[1] + (gsize)(w / 2) * (h / 2);
        }
        gsize size = offset[2] + (gsize)stride[2] * (h / 2);
        GstBuffer *in = gst_buffer_new_allocate(NULL, size, NULL);
        gst_buffer_memset(in, 0, 0x55, size);
        gst_buffer_add_video_meta_full(in, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_FORMAT_I420, w,
                                       h, 3, offset, stride);
        GstVideoInfo info;
        gst_video_info_set_format(&info, GST_VIDEO_FORMAT_I420, w, h);
        GstVideoFrame vf;
        assert_true(gst_video_frame_map(&vf, &info, in, GST_MAP_WRITE));
        for (int p = 0; p < 3; p++) { /* the same picture in either layout */
            int pw = p ? w / 2 : w, ph = p ? h / 2 : h;
            for (int y = 0; y < ph; y++)
                for (int x = 0; x < pw; x++)
                    ((guint8 *)GST_VIDEO_FRAME_PLANE_DATA(&vf, p))
                        [y * GST_VIDEO_FRAME_PLANE_STRIDE(&vf, p) + x] =
                        (guint8)(p ? 128 + (x - y) % 16 : 40 + (x * 3 + y * 2) % 160);
        }
        gst_video_frame_unmap(&vf);
        GST_BUFFER_PTS(in) = 0;
        assert_int_equal(gst_harness_push(hn, in), GST_FLOW_OK);
        outs[k] = gst_harness_pull(hn);
        assert_non_null(outs[k]);
        assert_int_equal(gst_buffer_get_n_meta(outs[k], GST_VIDEO_META_API_TYPE), 1);
        gst_harness_teardown(hn);
    }
    GstVideoInfo info;
    gst_video_info_set_format(&info, GST_VIDEO_FORMAT_I420, w, h);
    GstVideoFrame a, b;
    assert_true(gst_video_frame_map(&a, &info, outs[0], GST_MAP_READ));
    assert_true(gst_video_frame_map(&b, &info, outs[1], GST_MAP_READ));
    for (int p = 0; p < 3; p++) {
        int pw = p ? w / 2 : w, ph = p ? h / 2 : h;
        for (int y = 0; y < ph; y++)
            if (memcmp((guint8 *)GST_VIDEO_FRAME_PLANE_DATA(&a, p) +
                           y * GST_VIDEO_FRAME_PLANE_STRIDE(&a, p),
                       (guint8 *)GST_VIDEO_FRAME_PLANE_DATA(&b, p) +
                           y * GST_VIDEO_FRAME_PLANE_STRIDE(&b, p),
                       (size_t)pw))
                fail_msg("plane %d row %d: the padded input's output differs", p, y);
    }
    gst_video_frame_unmap(&a);
    gst_video_frame_unmap(&b);
    gst_buffer_unref(outs[0]);
    gst_buffer_unref(outs[1]);

    /* CUDA memory caps link to keyer in the NULL state (pipelines are linked before the
     * element has its CUDA context) when built with GStreamer's CUDA library and the device
     * is not the CPU */
    GError *e = NULL;
    GstElement *p = gst_parse_launch(
        "identity ! video/x-raw(memory:CUDAMemory),format=NV12 ! keyer ! fakesink", &e);
#ifdef KEYER_GST_CUDA
    if (e)
        fail_msg("CUDA memory caps do not link to keyer: %s", e->message);
#else
    assert_non_null(e); /* no CUDA memory in the templates */
#endif
    g_clear_error(&e);
    gst_clear_object(&p);
    p = gst_parse_launch(
        "identity ! video/x-raw(memory:CUDAMemory),format=NV12 ! keyer device=cpu ! fakesink", &e);
    assert_non_null(e);
    g_clear_error(&e);
    gst_clear_object(&p);
}

/* Throughput mode: frames may stay in the session until EOS, which pushes all of them. */
static void test_keyer_drain(void **state)
{
    GstHarness *h = gst_harness_new("keyer");
    gst_util_set_object_arg(G_OBJECT(h->element), "device", "cpu");
    gst_harness_set_src_caps_str(h, "video/x-raw,format=I420,width=64,height=48,framerate=30/1");
    for (int i = 0; i < 10; i++) {
        GstBuffer *b = gst_harness_create_buffer(h, 64 * 48 * 3 / 2);
        gst_buffer_memset(b, 0, (guint8)(16 + i), 64 * 48 * 3 / 2);
        GST_BUFFER_PTS(b) = (GstClockTime)i * GST_SECOND / 30;
        assert_int_equal(gst_harness_push(h, b), GST_FLOW_OK);
    }
    assert_true(gst_harness_push_event(h, gst_event_new_eos()));
    assert_int_equal(gst_harness_buffers_received(h), 10);
    for (int i = 0; i < 10; i++) {
        GstBuffer *b = gst_harness_pull(h);
        assert_int_equal(GST_BUFFER_PTS(b), (GstClockTime)i * GST_SECOND / 30);
        gst_buffer_unref(b);
    }
    gst_harness_teardown(h);
}

static void test_keyer_qos(void **state)
{
    GstHarness *h = gst_harness_new("keyer");
    gst_util_set_object_arg(G_OBJECT(h->element), "device", "cpu");
    gst_util_set_object_arg(G_OBJECT(h->element), "mode", "latency");
    gst_harness_set_src_caps_str(h, "video/x-raw,format=I420,width=64,height=48,framerate=30/1");
    /* downstream says: nothing before 2 s is useful any more */
    assert_true(gst_harness_push_upstream_event(
        h, gst_event_new_qos(GST_QOS_TYPE_UNDERFLOW, 1.5, GST_SECOND, GST_SECOND)));
    GstClockTime pts[] = {GST_SECOND, 3 * GST_SECOND};
    for (int i = 0; i < 2; i++) {
        GstBuffer *b = gst_harness_create_buffer(h, 64 * 48 * 3 / 2);
        gst_buffer_memset(b, 0, 100, 64 * 48 * 3 / 2);
        GST_BUFFER_PTS(b) = pts[i];
        assert_int_equal(gst_harness_push(h, b), GST_FLOW_OK);
    }
    assert_int_equal(gst_harness_buffers_received(h), 1);
    GstBuffer *b = gst_harness_pull(h);
    assert_int_equal(GST_BUFFER_PTS(b), 3 * GST_SECOND);
    gst_buffer_unref(b);
    gst_harness_teardown(h);
}

static void test_detect_caps(void **state)
{
    for (size_t f = 0; f < G_N_ELEMENTS(formats); f++) {
        GstHarness *h = gst_harness_new("keyerdetect");
        gchar *out = one_frame(h, formats[f]);
        assert_string_equal(out, formats[f]);
        g_free(out);
        gst_harness_teardown(h);
    }
    /* drawing: the overlay does not draw RGB, so it is not offered */
    GstHarness *h = gst_harness_new("keyerdetect");
    g_object_set(h->element, "draw", TRUE, NULL);
    GstCaps *c = gst_pad_query_caps(GST_BASE_TRANSFORM_SINK_PAD(h->element), NULL);
    GstCaps *rgb = gst_caps_from_string("video/x-raw,format=RGB");
    GstCaps *bgrx = gst_caps_from_string("video/x-raw,format=BGRx");
    assert_false(gst_caps_can_intersect(c, rgb));
    assert_true(gst_caps_can_intersect(c, bgrx));
    gst_caps_unref(c);
    gst_caps_unref(rgb);
    gst_caps_unref(bgrx);
    gchar *out = one_frame(h, "BGRx");
    g_free(out);
    gst_harness_teardown(h);

    /* CUDA memory (video/x-raw(memory:CUDAMemory)): in the pad templates exactly when the
     * plugin is built with GStreamer's CUDA library; then each pad offers the other pad's
     * memory, in the other pad's order (in place: the memory out is the memory in) */
    GstCaps *cuda = gst_caps_from_string("video/x-raw(memory:CUDAMemory),format=NV12");
    h = gst_harness_new("keyerdetect");
    GstCaps *templ = gst_pad_get_pad_template_caps(GST_BASE_TRANSFORM_SINK_PAD(h->element));
#ifdef KEYER_GST_CUDA
    assert_true(gst_caps_can_intersect(templ, cuda));
    const char *orders[] = {"video/x-raw(memory:CUDAMemory),format=NV12; video/x-raw,format=NV12",
                            "video/x-raw,format=NV12; video/x-raw(memory:CUDAMemory),format=NV12"};
    for (int k = 0; k < 2; k++) {
        for (int d = 0; d < 2; d++) {
            g_object_set(h->element, "draw", d == 1, NULL);
            gst_harness_set_sink_caps_str(h, orders[k]);
            c = gst_pad_peer_query_caps(h->srcpad, NULL); /* keyerdetect's sink pad */
            assert_int_equal(gst_caps_get_size(c), 2);
            gboolean first_cuda = gst_caps_features_contains(gst_caps_get_features(c, 0),
                                                             "memory:CUDAMemory");
            gboolean second_cuda = gst_caps_features_contains(gst_caps_get_features(c, 1),
                                                              "memory:CUDAMemory");
            if (first_cuda != (k == 0) || second_cuda != (k == 1)) {
                gchar *t = gst_caps_to_string(c);
                fail_msg("downstream %s (draw %d): keyerdetect's sink offers %s", orders[k], d,
                         t);
            }
            gst_caps_unref(c);
        }
    }
#else
    assert_false(gst_caps_can_intersect(templ, cuda));
#endif
    gst_caps_unref(templ);
    gst_caps_unref(cuda);
    gst_harness_teardown(h);
}

/* ---- the element against the command line --------------------------------------------------- */

static void test_keyer_equals_cli(void **state)
{
    char dir[4096], cli[4096 + 32], raw[4096 + 32], cmd[16384];
    kt_tmpdir(dir, sizeof(dir), "gst_cli");
    snprintf(cli, sizeof(cli), "%s/cli.mkv", dir);
    snprintf(raw, sizeof(raw), "%s/element.i420", dir);
    snprintf(cmd, sizeof(cmd),
             "\"%s\" \"%s\" -o \"%s\" --codec ffv1 --pix_fmt yuv420p --device cpu -y -q "
             "--no-progress",
             getenv("KEYER_BIN"), sample, cli);
    run_command(cmd);
    snprintf(cmd, sizeof(cmd),
             "filesrc location=\"%s\" ! decodebin ! videoconvert ! keyer device=cpu ! "
             "video/x-raw,format=I420 ! filesink location=\"%s\"",
             sample, raw);
    GstElement *p = parse(cmd);
    gchar *error = run_pipeline(p);
    gst_object_unref(p);
    if (error)
        fail_msg("pipeline: %s", error);

    size_t size = 0;
    uint8_t *got = kt_read_file(raw, &size);
    assert_non_null(got);
    keyer_error err = {0};
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    rp.format = KEYER_PIXEL_FORMAT_YUV420P;
    keyer_reader *r = NULL;
    keyer_frame *f = NULL;
    assert_int_equal(keyer_reader_open(cli, &rp, &r, &err), KEYER_OK);
    assert_int_equal(keyer_frame_create(&f, &err), KEYER_OK);
    GstVideoInfo info;
    gst_video_info_set_format(&info, GST_VIDEO_FORMAT_I420, 320, 240);
    size_t frames = 0;
    int worst = 0;
    while (keyer_reader_read(r, f, &err) == KEYER_OK) {
        assert_int_equal(f->width, 320);
        assert_int_equal(f->height, 240);
        assert_true((frames + 1) * GST_VIDEO_INFO_SIZE(&info) <= size);
        const uint8_t *frame = got + frames * GST_VIDEO_INFO_SIZE(&info);
        for (int pl = 0; pl < 3; pl++) {
            int w = pl ? 160 : 320, h = pl ? 120 : 240;
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) {
                    int a = f->data[pl][y * f->stride[pl] + x];
                    int b = frame[GST_VIDEO_INFO_PLANE_OFFSET(&info, pl) +
                                  (size_t)y * GST_VIDEO_INFO_PLANE_STRIDE(&info, pl) + x];
                    if (abs(a - b) > worst)
                        worst = abs(a - b);
                }
        }
        frames++;
    }
    assert_int_equal(frames, 24);
    assert_int_equal(frames * GST_VIDEO_INFO_SIZE(&info), size);
    if (worst > 1)
        fail_msg("element and keyer CLI differ by %d code values", worst);
    keyer_frame_destroy(&f);
    keyer_reader_destroy(&r);
    free(got);
}

/* ---- session groups ----------------------------------------------------------------------- */

static GstPadProbeReturn count_buffers(GstPad *pad, GstPadProbeInfo *info, gpointer data);

/* Reads the session-shared-by of the element on the probed pad at its first buffer. */
static GstPadProbeReturn shared_by(GstPad *pad, GstPadProbeInfo *info, gpointer data)
{
    (void)info;
    int *out = data;
    if (*out < 0) {
        GstElement *e = gst_pad_get_parent_element(pad);
        g_object_get(e, "session-shared-by", out, NULL);
        gst_object_unref(e);
    }
    return GST_PAD_PROBE_OK;
}

/* The largest difference between two files of the same size. */
static int file_diff(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    uint8_t *x = kt_read_file(a, &na), *y = kt_read_file(b, &nb);
    assert_non_null(x);
    assert_non_null(y);
    assert_true(na > 0);
    assert_int_equal(na, nb);
    int worst = 0;
    for (size_t i = 0; i < na; i++)
        if (abs(x[i] - y[i]) > worst)
            worst = abs(x[i] - y[i]);
    free(x);
    free(y);
    return worst;
}

static void test_session_group(void **state)
{
    (void)state;
    char dir[1024], alone[1024 + 32], one[1024 + 32], two[1024 + 32], cmd[16384];
    kt_tmpdir(dir, sizeof(dir), "gst_group");
    snprintf(alone, sizeof(alone), "%s/alone.i420", dir);
    snprintf(one, sizeof(one), "%s/one.i420", dir);
    snprintf(two, sizeof(two), "%s/two.i420", dir);
    /* batch 2: the shared session's batches hold frames of both streams */
    const char *keyer = "keyer device=cpu effect=blur batch=2";
    snprintf(cmd, sizeof(cmd),
             "filesrc location=\"%s\" ! decodebin ! videoconvert ! %s ! "
             "video/x-raw,format=I420 ! filesink location=\"%s\"",
             sample, keyer, alone);
    GstElement *p = parse(cmd);
    gchar *error = run_pipeline(p);
    gst_object_unref(p);
    if (error)
        fail_msg("pipeline alone: %s", error);

    snprintf(cmd, sizeof(cmd),
             "filesrc location=\"%s\" ! decodebin ! videoconvert ! %s session-group=g name=k1 ! "
             "video/x-raw,format=I420 ! filesink location=\"%s\" "
             "filesrc location=\"%s\" ! decodebin ! videoconvert ! %s session-group=g name=k2 ! "
             "video/x-raw,format=I420 ! filesink location=\"%s\"",
             sample, keyer, one, sample, keyer, two);
    p = parse(cmd);
    int members[2] = {-1, -1};
    for (int i = 0; i < 2; i++) {
        GstElement *k = gst_bin_get_by_name(GST_BIN(p), i ? "k2" : "k1");
        GstPad *pad = gst_element_get_static_pad(k, "src");
        gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, shared_by, &members[i], NULL);
        gst_object_unref(pad);
        gst_object_unref(k);
    }
    error = run_pipeline(p);
    if (error)
        fail_msg("pipeline with a session group: %s", error);
    assert_int_equal(members[0], 2);
    assert_int_equal(members[1], 2);
    /* stopped: the group is gone */
    GstElement *k = gst_bin_get_by_name(GST_BIN(p), "k1");
    int after = -1;
    g_object_get(k, "session-shared-by", &after, NULL);
    assert_int_equal(after, 0);
    gst_object_unref(k);
    gst_object_unref(p);
    int d1 = file_diff(alone, one), d2 = file_diff(alone, two);
    if (d1 > 1 || d2 > 1)
        fail_msg("shared session differs from the element alone by %d and %d code values", d1,
                 d2);

    /* other settings: refused with the group's name */
    snprintf(cmd, sizeof(cmd),
             "videotestsrc num-buffers=5 ! video/x-raw,format=RGBA,width=64,height=64 ! "
             "%s session-group=g2 ! fakesink "
             "videotestsrc num-buffers=5 ! video/x-raw,format=RGBA,width=64,height=64 ! "
             "%s blur-radius=3 session-group=g2 ! fakesink",
             keyer, keyer);
    p = parse(cmd);
    error = run_pipeline(p);
    gst_object_unref(p);
    assert_non_null(error);
    if (!strstr(error, "session-group g2") || !strstr(error, "settings differ"))
        fail_msg("unexpected error: %s", error);
    g_free(error);

    /* a flushing seek: each member closes its stream, drops the frames it had in flight and
     * opens a new stream in the same session; then NULL <-> PLAYING without waiting (leaks:
     * the sanitizer build) */
    snprintf(cmd, sizeof(cmd),
             "filesrc location=\"%s\" ! decodebin ! videoconvert ! keyer device=cpu "
             "session-group=g3 name=k1 ! fakesink sync=false "
             "filesrc location=\"%s\" ! decodebin ! videoconvert ! keyer device=cpu "
             "session-group=g3 name=k2 ! fakesink sync=false",
             sample, sample);
    p = parse(cmd);
    gint frames[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        GstElement *e = gst_bin_get_by_name(GST_BIN(p), i ? "k2" : "k1");
        GstPad *pad = gst_element_get_static_pad(e, "src");
        gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, count_buffers, &frames[i], NULL);
        gst_object_unref(pad);
        gst_object_unref(e);
    }
    assert_int_not_equal(gst_element_set_state(p, GST_STATE_PAUSED), GST_STATE_CHANGE_FAILURE);
    assert_int_equal(gst_element_get_state(p, NULL, NULL, 60 * GST_SECOND),
                     GST_STATE_CHANGE_SUCCESS);
    assert_true(gst_element_seek_simple(p, GST_FORMAT_TIME,
                                        GST_SEEK_FLAG_FLUSH | GST_SEEK_FLAG_ACCURATE,
                                        GST_SECOND / 2));
    error = run_pipeline(p);
    if (error)
        fail_msg("session group after the seek: %s", error);
    for (int i = 0; i < 2; i++) /* the second half of the 24 frames at least */
        if (g_atomic_int_get(&frames[i]) < 12)
            fail_msg("k%d gave %d frames after the seek", i + 1, g_atomic_int_get(&frames[i]));
    for (int i = 0; i < 2; i++) {
        assert_int_not_equal(gst_element_set_state(p, GST_STATE_PLAYING),
                             GST_STATE_CHANGE_FAILURE);
        g_usleep(50000);
        assert_int_equal(gst_element_set_state(p, GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);
    }
    gst_object_unref(p);
}

/* ---- keyerdetect against the command line's export ------------------------------------------ */

typedef struct roi_frames {
    GPtrArray *faces; /* per frame: GArray of double[6]: id, score, xmin, ymin, xmax, ymax */
    GPtrArray *poses; /* per frame: GArray of 33 * 4 doubles, or empty */
    int messages;
} roi_frames;

static GstPadProbeReturn collect(GstPad *pad, GstPadProbeInfo *info, gpointer data)
{
    roi_frames *rf = data;
    GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER(info);
    GArray *faces = g_array_new(FALSE, FALSE, sizeof(double) * 6);
    GArray *pose = g_array_new(FALSE, FALSE, sizeof(double));
    gpointer st = NULL;
    GstMeta *meta;
    while ((meta = gst_buffer_iterate_meta_filtered(buf, &st,
                                                    GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE))) {
        GstVideoRegionOfInterestMeta *m = (GstVideoRegionOfInterestMeta *)meta;
        const char *type = g_quark_to_string(m->roi_type);
        if (!strcmp(type, "face")) {
            GstStructure *s = gst_video_region_of_interest_meta_get_param(m, "keyer-face");
            assert_non_null(s);
            double v[6];
            guint id;
            assert_true(gst_structure_get_uint(s, "id", &id));
            assert_int_equal(id, (guint)m->id);
            v[0] = id;
            assert_true(gst_structure_get_double(s, "score", &v[1]));
            assert_true(gst_structure_get_double(s, "xmin", &v[2]));
            assert_true(gst_structure_get_double(s, "ymin", &v[3]));
            assert_true(gst_structure_get_double(s, "xmax", &v[4]));
            assert_true(gst_structure_get_double(s, "ymax", &v[5]));
            /* the rectangle holds the box */
            assert_true(m->x <= v[2] + 1e-3 || m->x == 0);
            assert_true(m->x + m->w >= v[4] - 1e-3 || m->x + m->w == 320);
            g_array_append_val(faces, v);
        } else if (!strcmp(type, "pose")) {
            GstStructure *s = gst_video_region_of_interest_meta_get_param(m, "keyer-pose");
            assert_non_null(s);
            const GValue *lm = gst_structure_get_value(s, "landmarks");
            assert_int_equal(gst_value_array_get_size(lm), 4 * 33);
            for (guint i = 0; i < 4 * 33; i++) {
                double d = g_value_get_double(gst_value_array_get_value(lm, i));
                g_array_append_val(pose, d);
            }
        }
    }
    g_ptr_array_add(rf->faces, faces);
    g_ptr_array_add(rf->poses, pose);
    return GST_PAD_PROBE_OK;
}

/* Parses "[a,b,...]" numbers from @p s into @p out (at most n); returns the count. */
static int numbers(const char **s, double *out, int n)
{
    int k = 0;
    const char *p = *s;
    while (*p == '[' || *p == ' ')
        p++;
    while (k < n) {
        char *end;
        double v = strtod(p, &end);
        if (end == p)
            break;
        out[k++] = v;
        p = end;
        while (*p == ',' || *p == ']' || *p == '[')
            p++;
        if (p[-1] == ']' && p[0] != '[' && p[-2] == ']')
            break;
    }
    *s = p;
    return k;
}

static void test_detect_equals_cli_export(void **state)
{
    char dir[4096], out[4096 + 32], jsonl[4096 + 32], cmd[16384];
    kt_tmpdir(dir, sizeof(dir), "gst_detect");
    snprintf(out, sizeof(out), "%s/cli.mp4", dir);
    snprintf(jsonl, sizeof(jsonl), "%s/cli.jsonl", dir);
    snprintf(cmd, sizeof(cmd),
             "\"%s\" \"%s\" -o \"%s\" --detect faces,pose --draw none --export \"%s\" "
             "--device cpu -y -q --no-progress",
             getenv("KEYER_BIN"), sample, out, jsonl);
    run_command(cmd);

    snprintf(cmd, sizeof(cmd),
             "filesrc location=\"%s\" ! decodebin ! videoconvert ! video/x-raw,format=I420 ! "
             "keyerdetect name=d pose=lite threads=1 ! fakesink",
             sample);
    GstElement *p = parse(cmd);
    GstElement *d = gst_bin_get_by_name(GST_BIN(p), "d");
    GstPad *src = gst_element_get_static_pad(d, "src");
    roi_frames rf = {g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref),
                     g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref), 0};
    gst_pad_add_probe(src, GST_PAD_PROBE_TYPE_BUFFER, collect, &rf, NULL);
    gst_object_unref(src);
    gst_object_unref(d);
    gchar *error = run_pipeline(p);
    gst_object_unref(p);
    if (error)
        fail_msg("pipeline: %s", error);

    size_t size = 0;
    char *data = kt_read_file(jsonl, &size);
    assert_non_null(data);
    /* kt_read_file does not terminate what it reads: strtok and strstr below need the NUL
     * (without it they ran on past the export into the heap and now and then found a 25th
     * "line" there) */
    char *text = realloc(data, size + 1);
    assert_non_null(text);
    text[size] = 0;
    guint frame = 0;
    int faces_seen = 0, poses_seen = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), frame++) {
        if (frame >= rf.faces->len)
            fail_msg("the export has more lines than the element gave buffers (%u)",
                     rf.faces->len);
        GArray *faces = g_ptr_array_index(rf.faces, frame);
        GArray *pose = g_ptr_array_index(rf.poses, frame);
        guint nf = 0;
        for (const char *s = strstr(line, "{\"id\":"); s; s = strstr(s + 1, "{\"id\":")) {
            unsigned id;
            float score, x0, y0, x1, y1;
            int det;
            assert_int_equal(sscanf(s, "{\"id\":%u,\"score\":%f,\"detected\":%d,\"box\":[%f,%f,%f,%f]",
                                    &id, &score, &det, &x0, &y0, &x1, &y1),
                             7);
            assert_true(nf < faces->len);
            const double *v = &g_array_index(faces, double, 6 * nf);
            if (v[0] != id || fabs(v[1] - score) > 1e-4 || fabs(v[2] - x0) > 0.01 ||
                fabs(v[3] - y0) > 0.01 || fabs(v[4] - x1) > 0.01 || fabs(v[5] - y1) > 0.01)
                fail_msg("frame %u face %u: element id %g box %.2f,%.2f,%.2f,%.2f; CLI id %u "
                         "box %.2f,%.2f,%.2f,%.2f",
                         frame, nf, v[0], v[2], v[3], v[4], v[5], id, x0, y0, x1, y1);
            nf++;
        }
        assert_int_equal(nf, faces->len);
        faces_seen += (int)nf;
        const char *ps = strstr(line, "\"pose\":{");
        if (!ps) {
            assert_int_equal(pose->len, 0);
            continue;
        }
        ps = strstr(ps, "\"landmarks\":");
        assert_non_null(ps);
        ps += strlen("\"landmarks\":");
        double lm[4 * 33];
        assert_int_equal(numbers(&ps, lm, 4 * 33), 4 * 33);
        assert_int_equal(pose->len, 4 * 33);
        for (int i = 0; i < 4 * 33; i++) {
            double tol = i % 4 == 3 ? 1e-4 : 0.01; /* printed with 4 and 2 decimals */
            if (fabs(g_array_index(pose, double, i) - lm[i]) > tol)
                fail_msg("frame %u pose value %d: element %.4f, CLI %.4f", frame, i,
                         g_array_index(pose, double, i), lm[i]);
        }
        poses_seen++;
    }
    assert_int_equal(frame, 24);
    assert_int_equal(rf.faces->len, 24);
    assert_true(faces_seen > 0); /* the clip shows a face in some frames */
    assert_true(poses_seen > 0);
    free(text);
    g_ptr_array_unref(rf.faces);
    g_ptr_array_unref(rf.poses);
}

/* The faces of the 24 frames of @p input as `keyerdetect PROPS` finds them (roi_frames of
 * collect()); the element's detector-device in @p device. */
static roi_frames detect_faces(const char *input, const char *props, char *device,
                               size_t device_size)
{
    char cmd[8192];
    snprintf(cmd, sizeof(cmd),
             "filesrc location=\"%s\" ! decodebin ! videoconvert ! video/x-raw,format=NV12 ! "
             "keyerdetect name=d %s ! fakesink",
             input, props);
    GstElement *p = parse(cmd);
    GstElement *d = gst_bin_get_by_name(GST_BIN(p), "d");
    GstPad *src = gst_element_get_static_pad(d, "src");
    roi_frames rf = {g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref),
                     g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref), 0};
    gst_pad_add_probe(src, GST_PAD_PROBE_TYPE_BUFFER, collect, &rf, NULL);
    gst_object_unref(src);
    gchar *error = run_pipeline(p);
    gchar *dev = NULL;
    g_object_get(d, "detector-device", &dev, NULL);
    snprintf(device, device_size, "%s", dev ? dev : "");
    g_free(dev);
    gst_object_unref(d);
    gst_object_unref(p);
    if (error)
        fail_msg("%s: %s", cmd, error);
    assert_int_equal(rf.faces->len, 24);
    return rf;
}

static double iou(const double *a, const double *b)
{
    double w = fmin(a[4], b[4]) - fmax(a[2], b[2]), h = fmin(a[5], b[5]) - fmax(a[3], b[3]);
    double inter = w > 0 && h > 0 ? w * h : 0;
    double u = (a[4] - a[2]) * (a[5] - a[3]) + (b[4] - b[2]) * (b[5] - b[3]) - inter;
    return u > 0 ? inter / u : 0;
}

/* Faces through a keyer session (device=cuda: the GPU where there is one, else the session on
 * the CPU, logged) against the CPU analysers (device=cpu), without the face mesh on the
 * sample and with it on a pan over grace_hopper.jpg (keyer make-sample; the sample's faces are
 * too small for the mesh): the same faces in every frame with the same ids; on the CPU the
 * same boxes (0.01 px), on a GPU boxes overlapping at IoU >= 0.9 (the library's CPU-vs-CUDA
 * detection bound, tests/common/kt_detect_session.h). */
static void test_detect_session(void **state)
{
    char dir[4096], pan[4096 + 32], photo[4096], cmd[16384];
    kt_tmpdir(dir, sizeof(dir), "gst_detect_session");
    kt_data_path(photo, sizeof(photo), "grace_hopper.jpg");
    snprintf(pan, sizeof(pan), "%s/pan.mp4", dir);
    snprintf(cmd, sizeof(cmd),
             "\"%s\" make-sample \"%s\" --image \"%s\" --size 320x240 --frames 24 --no-audio "
             "--bframes 0 >/dev/null",
             getenv("KEYER_BIN"), pan, photo);
    run_command(cmd);
    for (int lm = 0; lm < 2; lm++) {
        char dev_cpu[64], dev_session[64];
        const char *input = lm ? pan : sample;
        roi_frames a = detect_faces(input, lm ? "device=cpu landmarks=true" : "device=cpu",
                                    dev_cpu, sizeof(dev_cpu));
        roi_frames b = detect_faces(input, lm ? "device=cuda landmarks=true" : "device=cuda",
                                    dev_session, sizeof(dev_session));
        assert_string_equal(dev_cpu, "cpu");
        assert_true(dev_session[0] != 0);
        int on_cpu = !strcmp(dev_session, "cpu");
        int seen = 0;
        double worst = 1;
        for (guint f = 0; f < 24; f++) {
            GArray *fa = g_ptr_array_index(a.faces, f), *fb = g_ptr_array_index(b.faces, f);
            if (fa->len != fb->len)
                fail_msg("landmarks %d, frame %u: %u faces on the CPU, %u by the session (%s)",
                         lm, f, fa->len, fb->len, dev_session);
            for (guint i = 0; i < fa->len; i++) {
                const double *x = &g_array_index(fa, double, 6 * i);
                const double *y = &g_array_index(fb, double, 6 * i);
                double o = iou(x, y);
                worst = fmin(worst, o);
                int close = on_cpu ? fabs(x[2] - y[2]) <= 0.01 && fabs(x[3] - y[3]) <= 0.01 &&
                                         fabs(x[4] - y[4]) <= 0.01 && fabs(x[5] - y[5]) <= 0.01
                                   : o >= 0.9;
                if (x[0] != y[0] || !close)
                    fail_msg("landmarks %d, frame %u, face %u: CPU id %g box %.2f,%.2f,%.2f,%.2f; "
                             "session (%s) id %g box %.2f,%.2f,%.2f,%.2f",
                             lm, f, i, x[0], x[2], x[3], x[4], x[5], dev_session, y[0], y[2],
                             y[3], y[4], y[5]);
                seen++;
            }
        }
        assert_true(seen > 0);
        printf("  keyerdetect landmarks=%d: session on %s, %d faces as the CPU's (worst IoU "
               "%.4f)\n",
               lm, dev_session, seen, worst);
        g_ptr_array_unref(a.faces);
        g_ptr_array_unref(a.poses);
        g_ptr_array_unref(b.faces);
        g_ptr_array_unref(b.poses);
    }
}

/* Element messages: one per frame, with the faces array. */
static void test_detect_messages(void **state)
{
    char cmd[8192];
    snprintf(cmd, sizeof(cmd),
             "filesrc location=\"%s\" ! decodebin ! videoconvert ! keyerdetect draw=true ! "
             "fakesink",
             sample);
    GstElement *p = parse(cmd);
    GstBus *bus = gst_element_get_bus(p);
    gst_element_set_state(p, GST_STATE_PLAYING);
    int n = 0;
    for (;;) {
        GstMessage *m = gst_bus_timed_pop_filtered(
            bus, 60 * GST_SECOND, GST_MESSAGE_EOS | GST_MESSAGE_ERROR | GST_MESSAGE_ELEMENT);
        assert_non_null(m);
        GstMessageType t = GST_MESSAGE_TYPE(m);
        if (t == GST_MESSAGE_ELEMENT) {
            const GstStructure *s = gst_message_get_structure(m);
            if (gst_structure_has_name(s, "keyerdetect")) {
                guint64 frame;
                assert_true(gst_structure_get_uint64(s, "frame", &frame));
                assert_int_equal(frame, (guint64)n);
                assert_true(GST_VALUE_HOLDS_ARRAY(gst_structure_get_value(s, "faces")));
                n++;
            }
        }
        gst_message_unref(m);
        assert_int_not_equal(t, GST_MESSAGE_ERROR);
        if (t == GST_MESSAGE_EOS)
            break;
    }
    assert_int_equal(n, 24);
    gst_object_unref(bus);
    gst_element_set_state(p, GST_STATE_NULL);
    gst_object_unref(p);
}

/* ---- live ------------------------------------------------------------------------------------ */

static GstPadProbeReturn count_buffers(GstPad *pad, GstPadProbeInfo *info, gpointer data)
{
    g_atomic_int_inc((gint *)data);
    return GST_PAD_PROBE_OK;
}

static void test_live_latency(void **state)
{
    GstElement *p = parse("videotestsrc is-live=true pattern=ball ! "
                          "video/x-raw,format=I420,width=320,height=240,framerate=30/1 ! "
                          "keyer name=k device=cpu mode=latency ! fakesink sync=true");
    GstElement *k = gst_bin_get_by_name(GST_BIN(p), "k");
    GstPad *ksrc = gst_element_get_static_pad(k, "src");
    GstPad *ksink = gst_element_get_static_pad(k, "sink");
    /* on the heap, owned by the probe: a failed assertion below leaves the pipeline running,
     * and its streaming thread must not count into this function's dead stack frame */
    gint *frames = g_new0(gint, 1);
    gst_pad_add_probe(ksrc, GST_PAD_PROBE_TYPE_BUFFER, count_buffers, frames, g_free);
    assert_int_not_equal(gst_element_set_state(p, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
    for (int i = 0; i < 200 && g_atomic_int_get(frames) < 20; i++)
        g_usleep(50000);
    assert_true(g_atomic_int_get(frames) >= 20);
    GstQuery *q = gst_query_new_latency();
    assert_true(gst_pad_peer_query(ksink, q));
    gboolean live;
    GstClockTime up_min, up_max, min, max;
    gst_query_parse_latency(q, &live, &up_min, &up_max);
    gst_query_unref(q);
    q = gst_query_new_latency();
    assert_true(gst_pad_query(ksrc, q));
    gst_query_parse_latency(q, &live, &min, &max);
    gst_query_unref(q);
    assert_true(live);
    /* keyer adds its measured latency (the first frames' included): positive, and below a second
     * on a 320x240 stream; five under AddressSanitizer, where the first frames' set-up alone
     * measured over a second on the 2-core CI machine */
#if defined(__SANITIZE_ADDRESS__)
    const GstClockTime bound = 5 * GST_SECOND;
#else
    const GstClockTime bound = GST_SECOND;
#endif
    assert_true(min > up_min);
    assert_true(min - up_min < bound);
    q = gst_query_new_latency();
    assert_true(gst_element_query(p, q));
    GstClockTime pmin;
    gst_query_parse_latency(q, &live, &pmin, NULL);
    gst_query_unref(q);
    assert_true(live);
    assert_true(pmin >= min);
    gst_object_unref(ksrc);
    gst_object_unref(ksink);
    gst_object_unref(k);
    assert_int_equal(gst_element_set_state(p, GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);
    gst_object_unref(p);
}

/* ---- errors ---------------------------------------------------------------------------------- */

static void expect_error(const char *desc, const char *needle)
{
    GstElement *p = parse(desc);
    gchar *error = run_pipeline(p);
    gst_object_unref(p);
    if (!error || !strstr(error, needle))
        fail_msg("%s: error '%s' does not say '%s'", desc, error ? error : "(none)", needle);
    g_free(error);
}

static void test_errors(void **state)
{
    expect_error("videotestsrc num-buffers=3 ! keyer model=nosuch ! fakesink",
                 "unknown model 'nosuch'");
    expect_error("videotestsrc num-buffers=3 ! keyer model=/nonexistent/seg.tflite ! fakesink",
                 "/nonexistent/seg.tflite");
    expect_error("videotestsrc num-buffers=3 ! keyer threshold-low=0.9 threshold-high=0.2 ! "
                 "fakesink",
                 "threshold_low");
    expect_error("videotestsrc num-buffers=3 ! keyer effect=image ! fakesink", "background");
    expect_error("videotestsrc num-buffers=3 ! keyer effect=image "
                 "background=/nonexistent/beach.jpg ! fakesink",
                 "/nonexistent/beach.jpg");
    expect_error("videotestsrc num-buffers=3 ! keyerdetect faces=false ! fakesink",
                 "nothing to detect");
    /* a missing model file: models looked up in an empty directory */
    char dir[4096];
    kt_tmpdir(dir, sizeof(dir), "gst_nomodels");
    const char *old = getenv("KEYER_MODELS_DIR");
    gchar *saved = g_strdup(old);
    setenv("KEYER_MODELS_DIR", dir, 1);
    expect_error("videotestsrc num-buffers=3 ! keyer model=selfie ! fakesink", "selfie");
    expect_error("videotestsrc num-buffers=3 ! keyerdetect ! fakesink", "face");
    if (saved)
        setenv("KEYER_MODELS_DIR", saved, 1);
    else
        unsetenv("KEYER_MODELS_DIR");
    g_free(saved);
}

/* ---- state changes ---------------------------------------------------------------------------- */

static void test_state_cycles(void **state)
{
    GstElement *p = parse("videotestsrc num-buffers=6 ! "
                          "video/x-raw,format=NV12,width=160,height=120,framerate=30/1 ! "
                          "keyerdetect ! keyer device=cpu ! fakesink");
    for (int i = 0; i < 3; i++) {
        gchar *error = run_pipeline(p); /* PLAYING to EOS, then NULL */
        if (error)
            fail_msg("cycle %d: %s", i, error);
    }
    /* NULL -> PLAYING -> NULL without waiting for the end */
    for (int i = 0; i < 3; i++) {
        assert_int_not_equal(gst_element_set_state(p, GST_STATE_PLAYING),
                             GST_STATE_CHANGE_FAILURE);
        g_usleep(20000);
        assert_int_equal(gst_element_set_state(p, GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);
    }
    gst_object_unref(p);

    /* a flushing seek in the middle of the clip (throughput mode: frames in flight dropped) */
    char desc[8192];
    snprintf(desc, sizeof(desc),
             "filesrc location=\"%s\" ! decodebin ! videoconvert ! keyer name=k device=cpu ! "
             "fakesink sync=false",
             sample);
    p = parse(desc);
    GstElement *k = gst_bin_get_by_name(GST_BIN(p), "k");
    GstPad *ksrc = gst_element_get_static_pad(k, "src");
    gint frames = 0;
    gst_pad_add_probe(ksrc, GST_PAD_PROBE_TYPE_BUFFER, count_buffers, &frames, NULL);
    assert_int_not_equal(gst_element_set_state(p, GST_STATE_PAUSED), GST_STATE_CHANGE_FAILURE);
    assert_int_equal(gst_element_get_state(p, NULL, NULL, 60 * GST_SECOND),
                     GST_STATE_CHANGE_SUCCESS);
    assert_true(gst_element_seek_simple(p, GST_FORMAT_TIME,
                                        GST_SEEK_FLAG_FLUSH | GST_SEEK_FLAG_ACCURATE,
                                        GST_SECOND / 2));
    gchar *error = run_pipeline(p);
    if (error)
        fail_msg("after the seek: %s", error);
    /* the second half of the 24 frames, plus the ones before the seek */
    assert_true(g_atomic_int_get(&frames) >= 12);
    gst_object_unref(ksrc);
    gst_object_unref(k);
    gst_object_unref(p);
}

int main(void)
{
    gst_init(NULL, NULL);
    GST_PLUGIN_STATIC_REGISTER(keyer);
    kt_data_path(sample, sizeof(sample), "sample_hevc.mp4");
    const char *needed[] = {"videotestsrc", "videoconvert", "decodebin", "qtdemux", "avdec_h265",
                            "matroskademux", "filesink", "fakesink"};
    for (size_t i = 0; i < G_N_ELEMENTS(needed); i++) {
        GstElementFactory *f = gst_element_factory_find(needed[i]);
        if (!f) {
            printf("skipped: GStreamer element %s is missing (Debian: gstreamer1.0-plugins-base, "
                   "-good, gstreamer1.0-libav; scripts/setup.sh installs them)\n",
                   needed[i]);
            gst_deinit();
            return 77;
        }
        gst_object_unref(f);
    }
    if (!getenv("KEYER_BIN")) {
        printf("skipped: KEYER_BIN (the keyer command) is not set\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keyer_properties),
        cmocka_unit_test(test_detect_properties),
        cmocka_unit_test(test_keyer_caps),
        cmocka_unit_test(test_keyer_output_buffers),
        cmocka_unit_test(test_keyer_drain),
        cmocka_unit_test(test_keyer_qos),
        cmocka_unit_test(test_detect_caps),
        cmocka_unit_test(test_keyer_equals_cli),
        cmocka_unit_test(test_detect_equals_cli_export),
        cmocka_unit_test(test_detect_session),
        cmocka_unit_test(test_detect_messages),
        cmocka_unit_test(test_live_latency),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_state_cycles),
        cmocka_unit_test(test_session_group),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    gst_deinit();
    return rc;
}
