/* The encoder keyer chooses for an output whose codec is left to it (src/io/encoder_probe.c)
 * and NVENC's default setup (src/io/encoder.c), without NVENC hardware: the choice from given
 * probe answers, the preset mapping, the options NVENC is opened with (keys and values, the
 * caller's codec options replacing them, and every one accepted by libavcodec's own option
 * table of h264_nvenc / hevc_nvenc), and the probe itself on this machine (asked once per
 * encoder, its answer and reason remembered, a writer's choice and log line agreeing with it).
 * Where NVENC does open (a GPU with an NVENC engine), the probe tests check the other branch of
 * the same assertions. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/opt.h>

#include "io/encoder.h"
#include "io/encoder_probe.h"
#include "io/io_internal.h"
#include "keyer/io.h"
#include "kt_io.h"

/* libx265 3.5 leaks its frame filters when an encoder closes (inside the library, not keyer):
 * keep LeakSanitizer from reporting it. Read by ASan builds only. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libx265.so\n"; }

static void test_family(void **state)
{
    (void)state;
    /* the container's default encoder when none is named */
    assert_int_equal(kr_encoder_family_of(NULL, "libx264"), KR_ENCODER_H264);
    assert_int_equal(kr_encoder_family_of(NULL, "libx265"), KR_ENCODER_HEVC);
    assert_int_equal(kr_encoder_family_of(NULL, "h264_nvenc"), KR_ENCODER_H264);
    assert_int_equal(kr_encoder_family_of(NULL, "libvpx-vp9"), KR_ENCODER_NAMED);
    assert_int_equal(kr_encoder_family_of(NULL, "prores_ks"), KR_ENCODER_NAMED);
    assert_int_equal(kr_encoder_family_of(NULL, "png"), KR_ENCODER_NAMED);
    assert_int_equal(kr_encoder_family_of(NULL, NULL), KR_ENCODER_NAMED);
    /* codec names leave the encoder to keyer */
    assert_int_equal(kr_encoder_family_of("h264", "libvpx-vp9"), KR_ENCODER_H264);
    assert_int_equal(kr_encoder_family_of("AVC", NULL), KR_ENCODER_H264);
    assert_int_equal(kr_encoder_family_of("hevc", "libx264"), KR_ENCODER_HEVC);
    assert_int_equal(kr_encoder_family_of("H265", NULL), KR_ENCODER_HEVC);
    /* an encoder the caller names is opened as named */
    assert_int_equal(kr_encoder_family_of("libx264", "libx264"), KR_ENCODER_NAMED);
    assert_int_equal(kr_encoder_family_of("libx265", NULL), KR_ENCODER_NAMED);
    assert_int_equal(kr_encoder_family_of("h264_nvenc", "libx264"), KR_ENCODER_NAMED);
    assert_int_equal(kr_encoder_family_of("hevc_nvenc", NULL), KR_ENCODER_NAMED);
    assert_int_equal(kr_encoder_family_of("prores_ks", "libx264"), KR_ENCODER_NAMED);
}

static void test_pick(void **state)
{
    (void)state;
    assert_string_equal(kr_encoder_pick(KR_ENCODER_H264, 1), "h264_nvenc");
    assert_string_equal(kr_encoder_pick(KR_ENCODER_H264, 0), "libx264");
    assert_string_equal(kr_encoder_pick(KR_ENCODER_HEVC, 1), "hevc_nvenc");
    assert_string_equal(kr_encoder_pick(KR_ENCODER_HEVC, 0), "libx265");
    assert_null(kr_encoder_pick(KR_ENCODER_NAMED, 1));
    assert_null(kr_encoder_pick(KR_ENCODER_NAMED, 0));
    assert_string_equal(kr_encoder_nvenc_name(KR_ENCODER_H264), "h264_nvenc");
    assert_string_equal(kr_encoder_nvenc_name(KR_ENCODER_HEVC), "hevc_nvenc");
    assert_null(kr_encoder_nvenc_name(KR_ENCODER_NAMED));
}

static void test_preset_map(void **state)
{
    (void)state;
    static const char *const map[][2] = {
        {"ultrafast", "p1"}, {"superfast", "p2"}, {"veryfast", "p3"}, {"faster", "p3"},
        {"fast", "p4"},      {"medium", "p5"},    {"slow", "p6"},     {"slower", "p7"},
        {"veryslow", "p7"},  {"placebo", "p7"},   {"p1", "p1"},       {"p7", "p7"},
        {"hq", "hq"},        {"ll", "ll"}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        assert_string_equal(kr_nvenc_preset(map[i][0]), map[i][1]);
    assert_string_equal(kr_nvenc_preset(NULL), "p5");
}

static const char *get(AVDictionary *d, const char *key)
{
    const AVDictionaryEntry *e = av_dict_get(d, key, NULL, AV_DICT_MATCH_CASE);
    return e ? e->value : NULL;
}

/* The options of encoder @p name for @p wp and @p bframes, as the writer opens it; checks that
 * libavcodec's own option tables of that encoder take every one of them. */
static AVDictionary *nvenc_options(const char *name, const keyer_writer_params *wp,
                                   kr_nvenc_bframes bframes)
{
    const AVCodec *c = avcodec_find_encoder_by_name(name);
    assert_non_null(c);
    assert_true(kr_encoder_is_nvenc(c));
    AVCodecContext *e = avcodec_alloc_context3(c);
    assert_non_null(e);
    e->pix_fmt = AV_PIX_FMT_YUV420P;
    e->bit_rate = 200000;
    kr_encoder_config cfg = {.path = "out.mp4", .cuda_device = 2, .nvenc_bframes = bframes};
    AVDictionary *opts = NULL;
    keyer_error err = {0};
    assert_int_equal(kr_encoder_options(e, c, &cfg, wp, 1, &opts, &err), KEYER_OK);
    assert_int_equal(e->bit_rate, 0); /* constant quality, no bit-rate target */
    /* a copy applied to the context: every key is one of the encoder's options, every value
     * parses (av_opt_set_dict2 leaves unknown keys in the dictionary, fails on bad values) */
    AVDictionary *left = NULL;
    assert_true(av_dict_copy(&left, opts, 0) >= 0);
    assert_true(av_opt_set_dict2(e, &left, AV_OPT_SEARCH_CHILDREN) >= 0);
    if (av_dict_count(left)) {
        const AVDictionaryEntry *t = av_dict_get(left, "", NULL, AV_DICT_IGNORE_SUFFIX);
        fail_msg("%s does not take option %s=%s", name, t->key, t->value);
    }
    av_dict_free(&left);
    avcodec_free_context(&e);
    return opts;
}

static void test_nvenc_defaults(void **state)
{
    (void)state;
    const char *names[] = {"h264_nvenc", "hevc_nvenc"};
    for (int i = 0; i < 2; i++) {
        if (!avcodec_find_encoder_by_name(names[i])) {
            print_message("    libavcodec has no %s: its options are not checked\n", names[i]);
            continue;
        }
        keyer_writer_params wp = keyer_writer_params_defaults();
        AVDictionary *o = nvenc_options(names[i], &wp, KR_NVENC_BFRAMES_MIDDLE_REF);
        assert_string_equal(get(o, "preset"), "p5");
        assert_string_equal(get(o, "tune"), "hq");
        assert_string_equal(get(o, "rc"), "vbr");
        assert_string_equal(get(o, "cq"), "23");
        assert_string_equal(get(o, "rc-lookahead"), "20");
        assert_string_equal(get(o, "spatial-aq"), "1");
        assert_string_equal(get(o, "bf"), "3");
        assert_string_equal(get(o, "b_ref_mode"), "middle");
        if (kr_hwdec_built())
            assert_null(get(o, "gpu")); /* the CUDA frames' device decides */
        else
            assert_string_equal(get(o, "gpu"), "2");
        assert_int_equal(av_dict_count(o), kr_hwdec_built() ? 8 : 9);
        av_dict_free(&o);

        /* GPUs without B-frames as references, or without B-frames */
        o = nvenc_options(names[i], &wp, KR_NVENC_BFRAMES_NO_REF);
        assert_string_equal(get(o, "bf"), "3");
        assert_string_equal(get(o, "b_ref_mode"), "disabled");
        av_dict_free(&o);
        o = nvenc_options(names[i], &wp, KR_NVENC_BFRAMES_NONE);
        assert_string_equal(get(o, "bf"), "0");
        assert_null(get(o, "b_ref_mode"));
        av_dict_free(&o);

        /* the user's quality, preset (x264 names mapped) and codec options */
        wp.quality = 30;
        wp.preset = "veryfast";
        wp.codec_options = "rc-lookahead=8:multipass=qres:tune=ll:bf=1";
        o = nvenc_options(names[i], &wp, KR_NVENC_BFRAMES_MIDDLE_REF);
        assert_string_equal(get(o, "cq"), "30");
        assert_string_equal(get(o, "preset"), "p3");
        assert_string_equal(get(o, "rc-lookahead"), "8");
        assert_string_equal(get(o, "multipass"), "qres");
        assert_string_equal(get(o, "tune"), "ll");
        assert_string_equal(get(o, "bf"), "1");
        assert_string_equal(get(o, "rc"), "vbr"); /* not overridden: kept */
        av_dict_free(&o);
        wp.codec_options = "preset=p7";
        wp.preset = "p2";
        o = nvenc_options(names[i], &wp, KR_NVENC_BFRAMES_MIDDLE_REF);
        assert_string_equal(get(o, "preset"), "p7");
        av_dict_free(&o);
    }
}

/* x264 keeps its own mapping: no NVENC keys, CRF from quality. */
static void test_x264_options_unchanged(void **state)
{
    (void)state;
    const AVCodec *c = avcodec_find_encoder_by_name("libx264");
    if (!c) {
        print_message("    libavcodec has no libx264\n");
        return;
    }
    AVCodecContext *e = avcodec_alloc_context3(c);
    assert_non_null(e);
    e->pix_fmt = AV_PIX_FMT_YUV420P;
    keyer_writer_params wp = keyer_writer_params_defaults();
    wp.quality = 20;
    wp.preset = "veryfast";
    kr_encoder_config cfg = {.path = "out.mp4"};
    AVDictionary *o = NULL;
    keyer_error err = {0};
    assert_int_equal(kr_encoder_options(e, c, &cfg, &wp, 1, &o, &err), KEYER_OK);
    assert_string_equal(get(o, "crf"), "20");
    assert_string_equal(get(o, "preset"), "veryfast");
    assert_null(get(o, "rc-lookahead"));
    assert_null(get(o, "tune"));
    assert_int_equal(av_dict_count(o), 2);
    av_dict_free(&o);
    wp.codec_options = "bad";
    assert_int_equal(kr_encoder_options(e, c, &cfg, &wp, 1, &o, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "out.mp4"));
    av_dict_free(&o);
    avcodec_free_context(&e);
}

static void test_probe(void **state)
{
    (void)state;
    keyer_encoder_probe *p = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_encoder_probe_create(-1, &p, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_null(p);
    assert_int_equal(keyer_encoder_probe_create(0, &p, &err), KEYER_OK);
    assert_int_equal(keyer_encoder_probe_device(p), 0);
    assert_int_equal(keyer_encoder_probe_device(NULL), -1);
    assert_int_equal(kr_encoder_probe_opens(p), 0); /* nothing opened before the question */
    char why[256];
    assert_int_equal(keyer_encoder_probe_nvenc(p, "libx264", why, sizeof(why)), 0);
    assert_non_null(strstr(why, "libx264"));
    assert_int_equal(kr_encoder_probe_opens(p), 0);
    const char *names[] = {"h264_nvenc", "hevc_nvenc"};
    for (int i = 0; i < 2; i++) {
        if (!avcodec_find_encoder_by_name(names[i])) {
            assert_int_equal(keyer_encoder_probe_nvenc(p, names[i], why, sizeof(why)), 0);
            assert_non_null(strstr(why, "no"));
            continue;
        }
        int before = kr_encoder_probe_opens(p);
        int ok = keyer_encoder_probe_nvenc(p, names[i], why, sizeof(why));
        int opened = kr_encoder_probe_opens(p) - before;
        assert_true(opened >= 1 && opened <= KR_NVENC_BFRAMES_COUNT);
        if (ok) {
            assert_string_equal(why, "");
            print_message("    %s opens on cuda:0 (B-frame setup %d)\n", names[i],
                          (int)kr_encoder_probe_bframes(p, names[i]));
        } else {
            assert_true(strlen(why) > 0); /* a reason is given */
            print_message("    %s does not open: %s\n", names[i], why);
        }
        /* asked again: the same answer and reason, nothing opened */
        char again[256];
        assert_int_equal(keyer_encoder_probe_nvenc(p, names[i], again, sizeof(again)), ok);
        assert_string_equal(again, why);
        assert_int_equal(kr_encoder_probe_opens(p) - before, opened);
        /* a short buffer is cut, never overrun */
        char tiny[4] = {'x', 'x', 'x', 'x'};
        keyer_encoder_probe_nvenc(p, names[i], tiny, sizeof(tiny));
        assert_true(strlen(tiny) < sizeof(tiny));
    }
    keyer_encoder_probe_destroy(&p);
    assert_null(p);
    keyer_encoder_probe_destroy(&p);
    keyer_encoder_probe_destroy(NULL);
}

static char choice_line[2048];
static int choice_lines, error_lines;
static void capture(void *opaque, keyer_log_level level, const char *msg)
{
    (void)opaque;
    if (strstr(msg, ": encoder: ")) {
        choice_lines++;
        snprintf(choice_line, sizeof(choice_line), "%s", msg);
    }
    if (level <= KEYER_LOG_WARNING)
        error_lines++;
}

/* Writers whose codec is left to keyer share one probe: one test encoder per NVENC encoder in
 * all, the choice agrees with the probe's answer, one info line names it, nothing at warning or
 * error level is logged, and the file holds the codec asked for. */
static void test_writer_choice(void **state)
{
    (void)state;
    char dir[512], path[1024];
    kt_tmpdir(dir, sizeof(dir), "io-encoder-choice");
    keyer_encoder_probe *p = NULL;
    keyer_error err = {0};
    assert_int_equal(keyer_encoder_probe_create(0, &p, &err), KEYER_OK);
    keyer_logger lg = {KEYER_LOG_INFO, capture, NULL};
    struct {
        const char *codec, *file, *nvenc, *sw;
        enum AVCodecID id;
    } cases[] = {
        {NULL, "a.mp4", "h264_nvenc", "libx264", AV_CODEC_ID_H264},
        {NULL, "b.mkv", "h264_nvenc", "libx264", AV_CODEC_ID_H264},
        {"hevc", "c.mp4", "hevc_nvenc", "libx265", AV_CODEC_ID_HEVC},
        {"h264", "d.mov", "h264_nvenc", "libx264", AV_CODEC_ID_H264},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (!avcodec_find_encoder_by_name(cases[i].sw))
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, cases[i].file);
        keyer_writer_params wp = keyer_writer_params_defaults();
        wp.width = 160;
        wp.height = 96;
        wp.frame_rate = (keyer_rational){24, 1};
        wp.codec = cases[i].codec;
        wp.preset = "ultrafast"; /* p1 if NVENC is chosen */
        wp.logger = &lg;
        wp.encoder_probe = p;
        choice_lines = error_lines = 0;
        keyer_writer *w = NULL;
        if (keyer_writer_open(path, &wp, &w, &err))
            fail_msg("%s", err.message);
        char why[256];
        int nv = keyer_encoder_probe_nvenc(p, cases[i].nvenc, why, sizeof(why));
        assert_string_equal(keyer_writer_codec(w), nv ? cases[i].nvenc : cases[i].sw);
        assert_int_equal(choice_lines, 1);
        char want[2048];
        if (nv)
            snprintf(want, sizeof(want), "%s: encoder: %s on cuda:0", path, cases[i].nvenc);
        else
            snprintf(want, sizeof(want), "%s: encoder: %s (NVENC unavailable: %s)", path,
                     cases[i].sw, why);
        assert_string_equal(choice_line, want);
        assert_int_equal(error_lines, 0);
        keyer_frame *f = NULL;
        assert_int_equal(keyer_frame_create(&f, NULL), KEYER_OK);
        assert_int_equal(keyer_frame_alloc(f, KEYER_PIXEL_FORMAT_YUV420P, 160, 96, NULL, &err),
                         KEYER_OK);
        for (int k = 0; k < 3; k++) {
            memset(f->data[0], 16 + 40 * k, (size_t)f->stride[0] * 96);
            memset(f->data[1], 128, (size_t)f->stride[1] * 48);
            memset(f->data[2], 128, (size_t)f->stride[2] * 48);
            f->pts = k;
            assert_int_equal(keyer_writer_write(w, f, &err), KEYER_OK);
        }
        assert_int_equal(keyer_writer_close(w, &err), KEYER_OK);
        keyer_writer_destroy(&w);
        keyer_frame_destroy(&f);
        kt_stream *s = kt_read_stream(path, NULL, 0);
        assert_int_equal(s->n, 3);
        kt_stream_free(&s);
        AVFormatContext *fc = NULL;
        assert_int_equal(avformat_open_input(&fc, path, NULL, NULL), 0);
        assert_true(avformat_find_stream_info(fc, NULL) >= 0);
        assert_int_equal(fc->streams[0]->codecpar->codec_id, cases[i].id);
        avformat_close_input(&fc);
        unlink(path);
    }
    /* one test encoder per NVENC encoder (more only when B-frames were refused) */
    int opens = kr_encoder_probe_opens(p);
    assert_true(opens >= 1 && opens <= 2 * KR_NVENC_BFRAMES_COUNT);
    keyer_encoder_probe_destroy(&p);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_family),
        cmocka_unit_test(test_pick),
        cmocka_unit_test(test_preset_map),
        cmocka_unit_test(test_nvenc_defaults),
        cmocka_unit_test(test_x264_options_unchanged),
        cmocka_unit_test(test_probe),
        cmocka_unit_test(test_writer_choice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
