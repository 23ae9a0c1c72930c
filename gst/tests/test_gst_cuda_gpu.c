/*
 * The keyer element with GStreamer's CUDA memory (ctest label gpu; built when the plugin has
 * CUDA memory support, KEYER_GST_CUDA; exits 77 when there is no CUDA device or GStreamer's
 * CUDA library cannot load the driver):
 *  - GstHarness: the NV12 frames of tests/data/sample_hevc.mp4 (decoded by keyer's reader on
 *    the CPU), pushed in CUDA memory of the element's CUDA context (the one its context query
 *    answers with) into `keyer device=cuda effect=blur`, come out in CUDA memory of that
 *    context (negotiation picked CUDA memory on both sides), and equal the same frames through
 *    `keyer device=cpu effect=blur` in system memory within the tolerance of the CPU-vs-CUDA
 *    session tests (tests/unit/test_pipeline_gpu.c): PSNR >= 30 dB on every frame;
 *  - when GStreamer's nvcodec plugin has nvh265dec (it needs the driver's NVDEC library):
 *    filesrc ! qtdemux ! h265parse ! nvh265dec ! keyer device=cuda ! cudadownload gives, with
 *    CUDA memory on both sides of keyer and no warning about a foreign context, the frames of
 *    ... nvh265dec ! cudadownload ! keyer device=cpu (same decoded frames) within the same
 *    tolerance; skipped with a message when nvh265dec is missing;
 *  - keyerdetect: the same frames in CUDA memory of its context through
 *    `keyerdetect device=cuda draw=true` (faces found by a keyer session on the GPU from the
 *    device frame, drawn there) come out in the same CUDA memory, with the faces of
 *    `keyerdetect device=cpu draw=true` on system memory (same count and ids in every frame,
 *    boxes at IoU >= 0.9, the library's CPU-vs-CUDA detection bound) and its drawn frames
 *    within PSNR >= 30 dB; and nvh265dec ! keyerdetect device=cuda draw=true ! cudadownload
 *    (CUDA memory on both sides, no foreign context) against the CPU element after
 *    cudadownload within the same tolerance.
 * The plugin is registered statically; nvcodec comes from GStreamer's plugin path
 * (scripts/gst-device-env.sh on the GPU machine).
 */
#define _POSIX_C_SOURCE 200809L
#define GST_USE_UNSTABLE_API
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <gst/check/gstharness.h>
#include <gst/cuda/gstcudabufferpool.h>
#include <gst/cuda/gstcudacontext.h>
#include <gst/cuda/gstcudaloader.h>
#include <gst/cuda/gstcudamemory.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include "keyer/io.h"
#include "testutil.h"

GST_PLUGIN_STATIC_DECLARE(keyer);

enum { W = 320, H = 240, N = 24 };
#define CAPS_NV12 "format=NV12,width=320,height=240,framerate=24/1"

static char sample[4096];
static guint8 *frames[N]; /* the sample's frames, NV12, tightly packed */

/* PSNR of two NV12 frames (all planes). */
static double psnr(const GstVideoFrame *a, const guint8 *b)
{
    double se = 0;
    size_t n = 0;
    for (int p = 0; p < 2; p++) {
        const guint8 *pa = GST_VIDEO_FRAME_PLANE_DATA(a, p);
        gint sa = GST_VIDEO_FRAME_PLANE_STRIDE(a, p);
        const guint8 *pb = b + (p ? (size_t)W * H : 0);
        int rows = p ? H / 2 : H;
        for (int y = 0; y < rows; y++)
            for (int x = 0; x < W; x++, n++) {
                double d = (double)pa[(size_t)y * sa + x] - (double)pb[(size_t)y * W + x];
                se += d * d;
            }
    }
    double mse = se / (double)n;
    return mse > 0 ? 10 * log10(255.0 * 255.0 / mse) : 99;
}

/* Copies tightly packed NV12 @p src into the mapped frame @p dst. */
static void fill(GstVideoFrame *dst, const guint8 *src)
{
    for (int p = 0; p < 2; p++) {
        guint8 *d = GST_VIDEO_FRAME_PLANE_DATA(dst, p);
        gint ds = GST_VIDEO_FRAME_PLANE_STRIDE(dst, p);
        int rows = p ? H / 2 : H;
        for (int y = 0; y < rows; y++)
            memcpy(d + (size_t)y * ds, src + (p ? (size_t)W * H : 0) + (size_t)y * W, W);
    }
}

/* Packs the mapped NV12 frame @p f into a new tight buffer (g_free). */
static guint8 *pack(const GstVideoFrame *f)
{
    guint8 *out = g_malloc((size_t)W * H * 3 / 2);
    for (int p = 0; p < 2; p++) {
        const guint8 *s = GST_VIDEO_FRAME_PLANE_DATA(f, p);
        gint ss = GST_VIDEO_FRAME_PLANE_STRIDE(f, p);
        int rows = p ? H / 2 : H;
        for (int y = 0; y < rows; y++)
            memcpy(out + (p ? (size_t)W * H : 0) + (size_t)y * W, s + (size_t)y * ss, W);
    }
    return out;
}

static void read_sample(void)
{
    keyer_error err = {0};
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    rp.format = KEYER_PIXEL_FORMAT_NV12;
    keyer_reader *r = NULL;
    keyer_frame *f = NULL;
    assert_int_equal(keyer_reader_open(sample, &rp, &r, &err), KEYER_OK);
    assert_int_equal(keyer_frame_create(&f, &err), KEYER_OK);
    int n = 0;
    while (n < N && keyer_reader_read(r, f, &err) == KEYER_OK) {
        assert_int_equal(f->width, W);
        assert_int_equal(f->height, H);
        frames[n] = g_malloc((size_t)W * H * 3 / 2);
        for (int y = 0; y < H; y++)
            memcpy(frames[n] + (size_t)y * W, f->data[0] + (size_t)y * f->stride[0], W);
        for (int y = 0; y < H / 2; y++)
            memcpy(frames[n] + (size_t)W * H + (size_t)y * W,
                   f->data[1] + (size_t)y * f->stride[1], W);
        n++;
    }
    assert_int_equal(n, N);
    keyer_frame_destroy(&f);
    keyer_reader_destroy(&r);
}

/* The CUDA context the element in @p h answers its context query with (a reference). */
static GstCudaContext *element_context(GstHarness *h)
{
    GstQuery *q = gst_query_new_context(GST_CUDA_CONTEXT_TYPE);
    assert_true(gst_pad_peer_query(h->srcpad, q));
    GstContext *ctx = NULL;
    gst_query_parse_context(q, &ctx);
    assert_non_null(ctx);
    const GstStructure *s = gst_context_get_structure(ctx);
    GstCudaContext *cuda = NULL;
    for (int i = 0; i < gst_structure_n_fields(s) && !cuda; i++) {
        const GValue *v = gst_structure_get_value(s, gst_structure_nth_field_name(s, i));
        if (G_VALUE_HOLDS(v, GST_TYPE_CUDA_CONTEXT))
            cuda = g_value_dup_object(v);
    }
    gst_query_unref(q);
    assert_non_null(cuda);
    return cuda;
}

/* The keyed frames of the sample through the element @p desc: in CUDA memory of the
 * element's context when @p cuda, else in system memory. Returns them packed (g_free). */
static void run_harness(const char *desc, gboolean cuda, guint8 **out)
{
    GstHarness *h = gst_harness_new_parse(desc);
    gst_harness_set_src_caps_str(h, cuda ? "video/x-raw(memory:CUDAMemory)," CAPS_NV12
                                         : "video/x-raw," CAPS_NV12);
    GstVideoInfo info;
    GstCaps *caps = gst_caps_from_string("video/x-raw," CAPS_NV12);
    assert_true(gst_video_info_from_caps(&info, caps));
    GstCudaContext *ctx = NULL;
    GstBufferPool *pool = NULL;
    if (cuda) {
        ctx = element_context(h);
        pool = gst_cuda_buffer_pool_new(ctx);
        GstCaps *cc = gst_caps_from_string("video/x-raw(memory:CUDAMemory)," CAPS_NV12);
        GstStructure *config = gst_buffer_pool_get_config(pool);
        gst_buffer_pool_config_set_params(config, cc, (guint)GST_VIDEO_INFO_SIZE(&info), 2, 0);
        gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_VIDEO_META);
        if (!gst_buffer_pool_set_config(pool, config))
            assert_true(gst_buffer_pool_set_config(pool, gst_buffer_pool_get_config(pool)));
        gst_caps_unref(cc);
        assert_true(gst_buffer_pool_set_active(pool, TRUE));
    }
    gst_caps_unref(caps);
    for (int i = 0; i < N; i++) {
        GstBuffer *in = NULL;
        if (cuda)
            assert_int_equal(gst_buffer_pool_acquire_buffer(pool, &in, NULL), GST_FLOW_OK);
        else
            in = gst_harness_create_buffer(h, GST_VIDEO_INFO_SIZE(&info));
        GstVideoFrame vf;
        assert_true(gst_video_frame_map(&vf, &info, in, GST_MAP_WRITE)); /* uploaded later */
        fill(&vf, frames[i]);
        gst_video_frame_unmap(&vf);
        GST_BUFFER_PTS(in) = gst_util_uint64_scale_int(i, GST_SECOND, 24);
        GST_BUFFER_DURATION(in) = GST_SECOND / 24;
        assert_int_equal(gst_harness_push(h, in), GST_FLOW_OK);
        GstBuffer *o = gst_harness_pull(h);
        assert_non_null(o);
        GstMemory *m = gst_buffer_peek_memory(o, 0);
        if (cuda) {
            /* CUDA memory out, of the element's (keyer's) context: no copy through the host */
            if (!gst_is_cuda_memory(m))
                fail_msg("frame %d: the output is not in CUDA memory", i);
            assert_ptr_equal(gst_cuda_context_get_handle(GST_CUDA_MEMORY_CAST(m)->context),
                             gst_cuda_context_get_handle(ctx));
        } else {
            assert_false(gst_is_cuda_memory(m));
        }
        GstCaps *oc = gst_pad_get_current_caps(h->sinkpad);
        GstVideoInfo oi;
        assert_true(gst_video_info_from_caps(&oi, oc));
        assert_int_equal(gst_caps_features_contains(gst_caps_get_features(oc, 0),
                                                    GST_CAPS_FEATURE_MEMORY_CUDA_MEMORY),
                         cuda);
        gst_caps_unref(oc);
        assert_true(gst_video_frame_map(&vf, &oi, o, GST_MAP_READ)); /* downloaded */
        out[i] = pack(&vf);
        gst_video_frame_unmap(&vf);
        gst_buffer_unref(o);
    }
    gst_harness_teardown(h);
    if (pool) {
        gst_buffer_pool_set_active(pool, FALSE);
        gst_object_unref(pool);
    }
    gst_clear_object(&ctx);
}

static void compare(const char *what, guint8 *const *got, guint8 *const *want)
{
    GstVideoInfo info;
    gst_video_info_set_format(&info, GST_VIDEO_FORMAT_NV12, W, H);
    double worst = 99;
    for (int i = 0; i < N; i++) {
        GstVideoFrame vf;
        GstBuffer *b = gst_buffer_new_wrapped_full(GST_MEMORY_FLAG_READONLY, got[i],
                                                   (gsize)W * H * 3 / 2, 0,
                                                   (gsize)W * H * 3 / 2, NULL, NULL);
        gst_video_info_set_format(&info, GST_VIDEO_FORMAT_NV12, W, H);
        assert_true(gst_video_frame_map(&vf, &info, b, GST_MAP_READ));
        double p = psnr(&vf, want[i]);
        gst_video_frame_unmap(&vf);
        gst_buffer_unref(b);
        if (p < worst)
            worst = p;
        if (p < 30.0)
            fail_msg("%s: frame %d differs from the CPU element's: PSNR %.2f dB < 30", what, i,
                     p);
    }
    printf("  %s: every frame within PSNR >= 30 dB of the CPU element (worst %.2f dB)\n", what,
           worst);
}

static void test_harness_cuda_memory(void **state)
{
    (void)state;
    guint8 *cpu[N], *gpu[N];
    run_harness("keyer device=cpu effect=blur mode=latency", FALSE, cpu);
    run_harness("keyer device=cuda effect=blur mode=latency", TRUE, gpu);
    compare("CUDA memory in and out", gpu, cpu);
    for (int i = 0; i < N; i++) {
        g_free(cpu[i]);
        g_free(gpu[i]);
    }
}

/* ---- keyerdetect ---------------------------------------------------------------------------- */

/* The face ROI metas of @p buf: per face id, xmin, ymin, xmax, ymax (keyer-face params). */
static GArray *faces_of(GstBuffer *buf)
{
    GArray *faces = g_array_new(FALSE, FALSE, sizeof(double) * 5);
    gpointer st = NULL;
    GstMeta *meta;
    while ((meta = gst_buffer_iterate_meta_filtered(buf, &st,
                                                    GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE))) {
        GstVideoRegionOfInterestMeta *m = (GstVideoRegionOfInterestMeta *)meta;
        if (strcmp(g_quark_to_string(m->roi_type), "face"))
            continue;
        GstStructure *s = gst_video_region_of_interest_meta_get_param(m, "keyer-face");
        assert_non_null(s);
        double v[5];
        guint id;
        assert_true(gst_structure_get_uint(s, "id", &id));
        v[0] = id;
        assert_true(gst_structure_get_double(s, "xmin", &v[1]));
        assert_true(gst_structure_get_double(s, "ymin", &v[2]));
        assert_true(gst_structure_get_double(s, "xmax", &v[3]));
        assert_true(gst_structure_get_double(s, "ymax", &v[4]));
        g_array_append_val(faces, v);
    }
    return faces;
}

static double iou(const double *a, const double *b)
{
    double w = fmin(a[3], b[3]) - fmax(a[1], b[1]), h = fmin(a[4], b[4]) - fmax(a[2], b[2]);
    double inter = w > 0 && h > 0 ? w * h : 0;
    double u = (a[3] - a[1]) * (a[4] - a[2]) + (b[3] - b[1]) * (b[4] - b[2]) - inter;
    return u > 0 ? inter / u : 0;
}

/* The sample's frames through keyerdetect @p desc in CUDA memory of its context (@p cuda) or
 * in system memory: the drawn frames packed in @p out (g_free), the faces in @p faces
 * (g_array_unref), the element's detector-device in @p device. */
static void run_detect_harness(const char *desc, gboolean cuda, guint8 **out, GArray **faces,
                               char *device, size_t device_size)
{
    GstHarness *h = gst_harness_new_parse(desc);
    gst_harness_set_src_caps_str(h, cuda ? "video/x-raw(memory:CUDAMemory)," CAPS_NV12
                                         : "video/x-raw," CAPS_NV12);
    GstVideoInfo info;
    GstCaps *caps = gst_caps_from_string("video/x-raw," CAPS_NV12);
    assert_true(gst_video_info_from_caps(&info, caps));
    gst_caps_unref(caps);
    GstCudaContext *ctx = NULL;
    GstBufferPool *pool = NULL;
    if (cuda) {
        ctx = element_context(h);
        pool = gst_cuda_buffer_pool_new(ctx);
        GstCaps *cc = gst_caps_from_string("video/x-raw(memory:CUDAMemory)," CAPS_NV12);
        GstStructure *config = gst_buffer_pool_get_config(pool);
        gst_buffer_pool_config_set_params(config, cc, (guint)GST_VIDEO_INFO_SIZE(&info), 2, 0);
        gst_buffer_pool_config_add_option(config, GST_BUFFER_POOL_OPTION_VIDEO_META);
        if (!gst_buffer_pool_set_config(pool, config))
            assert_true(gst_buffer_pool_set_config(pool, gst_buffer_pool_get_config(pool)));
        gst_caps_unref(cc);
        assert_true(gst_buffer_pool_set_active(pool, TRUE));
    }
    for (int i = 0; i < N; i++) {
        GstBuffer *in = NULL;
        if (cuda)
            assert_int_equal(gst_buffer_pool_acquire_buffer(pool, &in, NULL), GST_FLOW_OK);
        else
            in = gst_harness_create_buffer(h, GST_VIDEO_INFO_SIZE(&info));
        GstVideoFrame vf;
        assert_true(gst_video_frame_map(&vf, &info, in, GST_MAP_WRITE)); /* uploaded later */
        fill(&vf, frames[i]);
        gst_video_frame_unmap(&vf);
        GST_BUFFER_PTS(in) = gst_util_uint64_scale_int(i, GST_SECOND, 24);
        GST_BUFFER_DURATION(in) = GST_SECOND / 24;
        GstMemory *in_mem = gst_buffer_peek_memory(in, 0);
        assert_int_equal(gst_harness_push(h, in), GST_FLOW_OK);
        GstBuffer *o = gst_harness_pull(h);
        assert_non_null(o);
        GstMemory *m = gst_buffer_peek_memory(o, 0);
        if (cuda) {
            /* in place: the same CUDA memory of the element's context */
            if (!gst_is_cuda_memory(m))
                fail_msg("frame %d: the output is not in CUDA memory", i);
            assert_ptr_equal(m, in_mem);
            assert_ptr_equal(gst_cuda_context_get_handle(GST_CUDA_MEMORY_CAST(m)->context),
                             gst_cuda_context_get_handle(ctx));
        } else {
            assert_false(gst_is_cuda_memory(m));
        }
        faces[i] = faces_of(o);
        assert_true(gst_video_frame_map(&vf, &info, o, GST_MAP_READ)); /* downloaded */
        out[i] = pack(&vf);
        gst_video_frame_unmap(&vf);
        gst_buffer_unref(o);
    }
    gchar *dev = NULL;
    GstElement *d = gst_harness_find_element(h, "keyerdetect"); /* h->element: the parsed bin */
    assert_non_null(d);
    g_object_get(d, "detector-device", &dev, NULL);
    gst_object_unref(d);
    snprintf(device, device_size, "%s", dev ? dev : "");
    g_free(dev);
    gst_harness_teardown(h);
    if (pool) {
        gst_buffer_pool_set_active(pool, FALSE);
        gst_object_unref(pool);
    }
    gst_clear_object(&ctx);
}

static void test_detect_cuda_memory(void **state)
{
    (void)state;
    guint8 *cpu[N], *gpu[N];
    GArray *fc[N], *fg[N];
    char dev_cpu[64], dev_gpu[64];
    run_detect_harness("keyerdetect device=cpu draw=true", FALSE, cpu, fc, dev_cpu,
                       sizeof(dev_cpu));
    run_detect_harness("keyerdetect device=cuda draw=true", TRUE, gpu, fg, dev_gpu,
                       sizeof(dev_gpu));
    assert_string_equal(dev_cpu, "cpu");
    if (strncmp(dev_gpu, "cuda", 4))
        fail_msg("keyerdetect device=cuda detected on \"%s\", not a GPU", dev_gpu);
    int seen = 0;
    double worst = 1;
    for (int i = 0; i < N; i++) {
        if (fc[i]->len != fg[i]->len)
            fail_msg("frame %d: %u faces on the CPU, %u on %s", i, fc[i]->len, fg[i]->len,
                     dev_gpu);
        for (guint k = 0; k < fc[i]->len; k++) {
            const double *a = &g_array_index(fc[i], double, 5 * k);
            const double *b = &g_array_index(fg[i], double, 5 * k);
            double o = iou(a, b);
            worst = fmin(worst, o);
            if (a[0] != b[0] || o < 0.9)
                fail_msg("frame %d face %u: CPU id %g box %.2f,%.2f,%.2f,%.2f; %s id %g box "
                         "%.2f,%.2f,%.2f,%.2f (IoU %.3f)",
                         i, k, a[0], a[1], a[2], a[3], a[4], dev_gpu, b[0], b[1], b[2], b[3],
                         b[4], o);
            seen++;
        }
    }
    assert_true(seen > 0); /* the sample shows a face in some frames */
    printf("  keyerdetect on %s from CUDA memory: %d faces as the CPU's (worst IoU %.4f)\n",
           dev_gpu, seen, worst);
    compare("keyerdetect draw=true, CUDA memory", gpu, cpu);
    for (int i = 0; i < N; i++) {
        g_free(cpu[i]);
        g_free(gpu[i]);
        g_array_unref(fc[i]);
        g_array_unref(fg[i]);
    }
}

/* Runs @p desc to EOS; fails on an error, or a warning of keyer's (a foreign CUDA context). */
static void run_pipeline(const char *desc)
{
    GError *e = NULL;
    GstElement *p = gst_parse_launch(desc, &e);
    if (e)
        fail_msg("gst_parse_launch(%s): %s", desc, e->message);
    gst_element_set_state(p, GST_STATE_PLAYING);
    GstBus *bus = gst_element_get_bus(p);
    GstMessage *m = NULL;
    for (;;) {
        m = gst_bus_timed_pop_filtered(bus, 120 * GST_SECOND,
                                       GST_MESSAGE_EOS | GST_MESSAGE_ERROR |
                                           GST_MESSAGE_WARNING);
        if (!m || GST_MESSAGE_TYPE(m) == GST_MESSAGE_EOS)
            break;
        GError *ge = NULL;
        if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR)
            gst_message_parse_error(m, &ge, NULL);
        else
            gst_message_parse_warning(m, &ge, NULL);
        if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING &&
            !g_str_has_prefix(GST_OBJECT_NAME(GST_MESSAGE_SRC(m)), "keyer")) {
            /* another element's warning: printed, not keyer's concern */
            printf("  warning from %s: %s\n", GST_OBJECT_NAME(GST_MESSAGE_SRC(m)), ge->message);
            g_error_free(ge);
            gst_message_unref(m);
            continue;
        }
        fail_msg("%s from %s: %s (pipeline %s)", GST_MESSAGE_TYPE_NAME(m),
                 GST_OBJECT_NAME(GST_MESSAGE_SRC(m)), ge->message, desc);
    }
    if (!m)
        fail_msg("timed out: %s", desc);
    gst_message_unref(m);
    gst_object_unref(bus);
    gst_element_set_state(p, GST_STATE_NULL);
    gst_object_unref(p);
}

/* Reads @p path (N tightly packed NV12 frames) into @p out. */
static void read_frames(const char *path, guint8 **out)
{
    size_t size = 0;
    uint8_t *all = kt_read_file(path, &size);
    assert_non_null(all);
    assert_int_equal(size, (size_t)N * W * H * 3 / 2);
    for (int i = 0; i < N; i++)
        out[i] = g_memdup2(all + (size_t)i * W * H * 3 / 2, (gsize)W * H * 3 / 2);
    free(all);
}

/* filesrc ! ... nvh265dec ! @p gpu ! cudadownload (CUDA memory on both sides of @p gpu)
 * against ... nvh265dec ! cudadownload ! @p cpu: every frame within PSNR >= 30 dB. */
static void nvdec_pipeline(const char *gpu_element, const char *cpu_element)
{
    GstElementFactory *f = gst_element_factory_find("nvh265dec");
    if (!f) {
        printf("  skipped: GStreamer's nvh265dec is missing (nvcodec plugin without NVDEC)\n");
        skip();
    }
    gst_object_unref(f);
    char dir[1024], a[1100], b[1100], desc[8192];
    kt_tmpdir(dir, sizeof(dir), "gst_cuda");
    snprintf(a, sizeof(a), "%s/gpu.nv12", dir);
    snprintf(b, sizeof(b), "%s/cpu.nv12", dir);
    const char *decode = "qtdemux ! h265parse ! nvh265dec";
    /* keyer between CUDA memory on both sides (the caps filters insist on it) */
    snprintf(desc, sizeof(desc),
             "filesrc location=\"%s\" ! %s ! video/x-raw(memory:CUDAMemory) ! "
             "%s ! video/x-raw(memory:CUDAMemory) ! cudadownload ! "
             "video/x-raw,format=NV12 ! filesink location=\"%s\"",
             sample, decode, gpu_element, a);
    run_pipeline(desc);
    snprintf(desc, sizeof(desc),
             "filesrc location=\"%s\" ! %s ! cudadownload ! video/x-raw,format=NV12 ! "
             "%s ! video/x-raw,format=NV12 ! filesink location=\"%s\"",
             sample, decode, cpu_element, b);
    run_pipeline(desc);
    guint8 *gpu[N], *cpu[N];
    read_frames(a, gpu);
    read_frames(b, cpu);
    char what[256];
    snprintf(what, sizeof(what), "nvh265dec ! %s ! cudadownload", gpu_element);
    compare(what, gpu, cpu);
    for (int i = 0; i < N; i++) {
        g_free(cpu[i]);
        g_free(gpu[i]);
    }
}

static void test_nvdec_pipeline(void **state)
{
    (void)state;
    nvdec_pipeline("keyer device=cuda effect=blur", "keyer device=cpu effect=blur");
}

static void test_nvdec_detect_pipeline(void **state)
{
    (void)state;
    nvdec_pipeline("keyerdetect device=cuda draw=true", "keyerdetect device=cpu draw=true");
}

int main(void)
{
    gst_init(NULL, NULL);
    GST_PLUGIN_STATIC_REGISTER(keyer);
    if (!gst_cuda_load_library()) {
        printf("skipped: GStreamer's CUDA library cannot load the CUDA driver\n");
        return 77;
    }
    GstCudaContext *probe = gst_cuda_context_new(0);
    if (!probe) {
        printf("skipped: no CUDA device 0\n");
        return 77;
    }
    gst_object_unref(probe);
    kt_data_path(sample, sizeof(sample), "sample_hevc.mp4");
    read_sample();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_harness_cuda_memory),
        cmocka_unit_test(test_nvdec_pipeline),
        cmocka_unit_test(test_detect_cuda_memory),
        cmocka_unit_test(test_nvdec_detect_pipeline),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    for (int i = 0; i < N; i++)
        g_free(frames[i]);
    gst_deinit();
    return rc;
}
