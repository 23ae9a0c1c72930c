/*
 * The main job's options (see run.h): one table over run_opts, then the session's,
 * refinement's and compositing's tables (any of their fields is a --long-option and a
 * configuration key); the configuration file (--config) read before the command line, which
 * wins; and what the options imply for the session.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "run.h"

/* ---- setters of the options that do more than store a value --------------------------------- */

static keyer_status set_blur(const keyer_option *o, void *obj, const char *value,
                             keyer_error *err)
{
    run_opts *r = obj;
    if (value && keyer_option_set(keyer_composite_options(), &r->sp.composite, "blur_radius",
                                  value, err))
        return KEYER_STATUS_INVALID_ARGUMENT;
    r->effect_set = 1;
    r->sp.composite.mode = KEYER_COMPOSITE_BLUR;
    return KEYER_OK;
}

static int file_exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* --replace: a file (picture or video) when one exists, else a colour. */
static keyer_status set_replace(const keyer_option *o, void *obj, const char *value,
                                keyer_error *err)
{
    run_opts *r = obj;
    if (file_exists(value)) {
        r->sp.composite.mode = KEYER_COMPOSITE_IMAGE;
        r->sp.background = value;
    } else if (keyer_option_set(keyer_composite_options(), &r->sp.composite, "color", value,
                                NULL) == KEYER_OK) {
        r->sp.composite.mode = KEYER_COMPOSITE_COLOR;
        r->sp.background = NULL;
    } else {
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "option %s: %s: no such file, and not a colour (#rrggbb, black, "
                               "white, red, green, blue, gray)", o->name, value);
    }
    r->effect_set = 1;
    return KEYER_OK;
}

static keyer_status set_green(const keyer_option *o, void *obj, const char *value,
                              keyer_error *err)
{
    run_opts *r = obj;
    if (value && keyer_option_set(keyer_composite_options(), &r->sp.composite, "key_color", value,
                                  err))
        return KEYER_STATUS_INVALID_ARGUMENT;
    r->effect_set = 1;
    r->sp.composite.mode = KEYER_COMPOSITE_GREEN_SCREEN;
    return KEYER_OK;
}

/* --alpha, --premultiply, --mask: switches that pick the output (false: nothing changes). */
static keyer_status set_output_kind(const keyer_option *o, void *obj, const char *value,
                                    keyer_error *err)
{
    run_opts *r = obj;
    if (!kc_switch_value(value))
        return KEYER_OK;
    r->effect_set = 1;
    keyer_composite_mode *mode = &r->sp.composite.mode;
    if (!strcmp(o->name, "mask"))
        *mode = KEYER_COMPOSITE_MASK;
    else if (!strcmp(o->name, "premultiply") || *mode == KEYER_COMPOSITE_ALPHA_PREMULTIPLIED)
        *mode = KEYER_COMPOSITE_ALPHA_PREMULTIPLIED;
    else
        *mode = KEYER_COMPOSITE_ALPHA;
    return KEYER_OK;
}

static keyer_status set_device(const keyer_option *o, void *obj, const char *value,
                               keyer_error *err)
{
    run_opts *r = obj;
    keyer_device_kind kind;
    int ordinal;
    uint64_t devices;
    keyer_status st = keyer_device_parse_list(value, &kind, &ordinal, &devices, err);
    if (st)
        return st;
    r->sp.device = kind;
    r->sp.cuda_device = ordinal;
    r->sp.cuda_devices = devices;
    return KEYER_OK;
}

/* --feather, --dilate: the refinement table's option of the same name. */
static keyer_status set_in_refine(const keyer_option *o, void *obj, const char *value,
                                  keyer_error *err)
{
    run_opts *r = obj;
    return keyer_option_set(keyer_refine_options(), &r->sp.refine, o->name, value, err);
}

/* --mode, --batch, --threads: the session table's option of the same name. */
static keyer_status set_in_session(const keyer_option *o, void *obj, const char *value,
                                   keyer_error *err)
{
    run_opts *r = obj;
    return keyer_option_set(keyer_session_options(), &r->sp, o->name, value, err);
}

/* --refine K=V,... and --composite K=V,...: lists for those tables. */
static keyer_status set_list(const keyer_option *o, void *obj, const char *value,
                             keyer_error *err)
{
    run_opts *r = obj;
    if (!strcmp(o->name, "refine"))
        return keyer_options_parse(keyer_refine_options(), &r->sp.refine, value, err);
    return keyer_options_parse(keyer_composite_options(), &r->sp.composite, value, err);
}

/* --model-options K=V,...: kept in order, applied by run_settle on the model's description. */
static keyer_status set_model_options(const keyer_option *o, void *obj, const char *value,
                                      keyer_error *err)
{
    run_opts *r = obj;
    int max = (int)(sizeof(r->model_options) / sizeof(r->model_options[0]));
    if (r->nmodel_options >= max)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "option %s: more than %d",
                               o->name, max);
    keyer_model_desc probe = keyer_model_desc_defaults(); /* reports a bad list now */
    keyer_status st = keyer_options_parse(keyer_model_desc_options(), &probe, value, err);
    if (st)
        return st;
    r->model_options[r->nmodel_options++] = value;
    return KEYER_OK;
}

/* The switches that set a three-way or counting field. */
static keyer_status set_switch(const keyer_option *o, void *obj, const char *value,
                               keyer_error *err)
{
    run_opts *r = obj;
    int on = kc_switch_value(value);
    if (!strcmp(o->name, "live"))
        r->sp.live = on ? 1 : -1;
    else if (!strcmp(o->name, "progress"))
        r->progress = on ? 1 : 0;
    else if (!strcmp(o->name, "no_progress"))
        r->progress = on ? 0 : -1;
    else if (!strcmp(o->name, "yes"))
        r->overwrite = on ? 1 : -1;
    else if (!strcmp(o->name, "no"))
        r->overwrite = on ? 0 : -1;
    else if (!strcmp(o->name, "quiet"))
        r->verbosity = on ? -1 : 0;
    else if (!strcmp(o->name, "verbose"))
        r->verbosity = on ? (r->verbosity > 0 ? r->verbosity + 1 : 1) : 0;
    else
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "option %s: not a switch", o->name);
    return KEYER_OK;
}

/* ---- the table --------------------------------------------------------------------------------- */

#define OFF(f) offsetof(run_opts, f)
#define OPT KEYER_OPTION_FLAG_VALUE_OPTIONAL
/* A string field, a setter taking any text, a switch. */
#define TEXT(name, field, meta, help)                                                              \
    {name, help, OFF(field), KEYER_OPTION_STRING, 0, 0, 0, NULL, NULL, NULL, meta, 0, 0u}
#define CUSTOM(name, fn, meta, help)                                                               \
    {name, help, 0, KEYER_OPTION_CUSTOM, 0, 0, 0, NULL, fn, NULL, meta, 0, 0u}
#define SWITCH(name, short_name, fn, help)                                                         \
    {name, help, 0, KEYER_OPTION_BOOL, 0, 0, 1, NULL, fn, NULL, NULL, short_name, OPT}

static const keyer_option run_options[] = {
    {"output", "output file, or a directory for several inputs", OFF(output),
     KEYER_OPTION_STRING, 0, 0, 0, NULL, NULL, NULL, "PATH", 'o', 0u},
    {"blur", "blur the background (default; Gaussian sigma in pixels, default 12)", 0,
     KEYER_OPTION_FLOAT, 12, 2, 256, NULL, set_blur, NULL, "SIGMA", 0, OPT},
    CUSTOM("replace", set_replace, "IMAGE|VIDEO|COLOR",
           "replace the background by a picture, a video or a colour (#rrggbb or a name)"),
    {"green", "replace the background by chroma-key green (for keying elsewhere)", 0,
     KEYER_OPTION_COLOR, 0x00B140, 0, 0, NULL, set_green, NULL, "COLOR", 0, OPT},
    SWITCH("alpha", 0, set_output_kind,
           "transparent background: ProRes 4444 (.mov), VP9 (.webm) or PNG"),
    SWITCH("premultiply", 0, set_output_kind, "with --alpha: premultiplied colour"),
    SWITCH("mask", 0, set_output_kind, "write the matte only (white = person)"),
    TEXT("model", sp.model, "NAME|FILE",
         "segmentation model: a name (see 'keyer models') or a .onnx/.tflite file; default by "
         "aspect ratio"),
    TEXT("model_config", model_config, "FILE.yaml",
         "how to feed --model FILE and read its mask (see 'keyer models --help')"),
    CUSTOM("model_options", set_model_options, "K=V,...",
           "the same as options: output=NAME,output_kind=logits,... (after --model-config)"),
    {"threshold", "mask level that counts as the person, 0..1 (default 0.5)", OFF(threshold),
     KEYER_OPTION_FLOAT, 0.5, 0, 1, NULL, NULL, NULL, "T", 0, 0u},
    {"softness", "width of the soft edge around the threshold, 0..1 (default 0.5)",
     OFF(softness), KEYER_OPTION_FLOAT, 0.5, 0, 1, NULL, NULL, NULL, "S", 0, 0u},
    CUSTOM("feather", set_in_refine, "PIXELS", "blur the matte's edge by this radius (default 1)"),
    CUSTOM("dilate", set_in_refine, "PIXELS", "grow (> 0) or shrink (< 0) the matte"),
    {"smooth", "temporal smoothing of the matte, 0 (off) .. 0.99 (default 0.8)", OFF(smooth),
     KEYER_OPTION_FLOAT, 0.8, 0, 0.99, NULL, NULL, NULL, "S", 0, 0u},
    TEXT("detect", detect, "faces|pose[,...]",
         "detect and track faces (faces:full for the far range) and/or a body pose (pose:full, "
         "pose:heavy)"),
    TEXT("draw", draw, "LIST",
         "with --detect: boxes, ids, keypoints, mesh, skeleton, graph[:k=K], all, none (default "
         "boxes,ids,skeleton)"),
    TEXT("export", export_path, "FILE.jsonl",
         "with --detect: one JSON object per frame (docs/cli.md)"),
    CUSTOM("device", set_device, "auto|cpu|cuda[:N]|cuda:all|cuda:N,M",
           "where to compute (default auto); several GPUs: streams placed by load"),
    {"split_gpus", "with several GPUs and one input: split it at keyframes over the GPUs "
     "(video only, written back in order)", OFF(sp.split_gpus), KEYER_OPTION_BOOL, 0, 0, 1, NULL,
     NULL, NULL, NULL, 0, OPT},
    CUSTOM("mode", set_in_session, "throughput|latency",
           "large batches for files, or batch 1 for live use"),
    CUSTOM("batch", set_in_session, "N", "frames per inference (default: 1 on the CPU, 16 on CUDA)"),
    CUSTOM("precision", set_in_session, "auto|f32|f16",
           "of the networks on CUDA (default auto: f16 for the models that meet keyer's "
           "half-precision bounds, f32 for the others; the CPU computes in float32)"),
    CUSTOM("threads", set_in_session, "N", "CPU threads of the pixel stages (default: all cores)"),
    TEXT("codec", codec, "NAME", "video encoder: h264/hevc (NVENC where it opens, else x264/x265), libx264, prores_ks, ..."),
    TEXT("preset", preset, "NAME", "encoder preset (medium, fast, p4, ...)"),
    {"crf", "constant quality (x264/x265/VP9 CRF, NVENC CQ)", OFF(crf), KEYER_OPTION_INT, -1, 0,
     63, NULL, NULL, NULL, "N", 0, 0u},
    TEXT("pix_fmt", pix_fmt, "NAME",
         "encoded pixel format (yuv420p, yuv444p, yuva444p10le, ...)"),
    TEXT("format", format, "NAME",
         "container (mp4, mov, matroska, webm, image2, ...); default by name"),
    TEXT("codec_options", codec_options, "K=V:...", "extra encoder options"),
    {"no_audio", "do not copy audio, subtitles and metadata", OFF(no_audio), KEYER_OPTION_BOOL, 0,
     0, 1, NULL, NULL, NULL, NULL, 0, OPT},
    SWITCH("live", 0, set_switch, "treat the inputs as live: drop the oldest frames when behind"),
    {"realtime", "read files at their frame rate, as a camera delivers frames", OFF(sp.realtime),
     KEYER_OPTION_BOOL, 0, 0, 1, NULL, NULL, NULL, NULL, 0, OPT},
    CUSTOM("reconnect", set_in_session, "auto|on|off",
           "reopen network inputs that break off (default auto: live URLs)"),
    CUSTOM("reconnect_max", set_in_session, "SECONDS",
           "how long a broken network input tries to reconnect (default 30)"),
    CUSTOM("input_timeout", set_in_session, "SECONDS",
           "network open/read timeout without data (default 10; 0: none)"),
    CUSTOM("refine", set_list, "K=V,...", "refinement options (see --help-options)"),
    CUSTOM("composite", set_list, "K=V,...", "compositing options (see --help-options)"),
    TEXT("config", config, "FILE.yaml", "read options from a YAML file (keys = long options)"),
    TEXT("stats", stats, "FILE.json", "write per-stage statistics"),
    TEXT("trace", trace, "FILE.json", "write a Chrome/Perfetto trace of the stages"),
    SWITCH("progress", 0, set_switch,
           "show the progress bar even when stderr is not a terminal"),
    SWITCH("no_progress", 0, set_switch, "never show the progress bar"),
    SWITCH("yes", 'y', set_switch, "overwrite existing outputs"),
    SWITCH("no", 'n', set_switch, "never overwrite (exit with an error)"),
    SWITCH("quiet", 'q', set_switch, "print errors only"),
    SWITCH("verbose", 'v', set_switch, "print more (twice: debug)"),
    KC_OPTION_HELP,
    SWITCH("help_options", 0, kc_option_only_on_command_line,
           "every refinement, compositing and session option"),
    KEYER_OPTION_END,
};
#undef OFF
#undef OPT
#undef TEXT
#undef CUSTOM
#undef SWITCH

static const char usage_text[] =
    "usage: keyer INPUT... -o OUTPUT [options]\n\n"
    "Keys the person out of each input video and writes the result with the input's audio:\n"
    "the background blurred (default), replaced, made transparent, or the matte alone.\n\n"
    "Options:\n";

static const char usage_footer[] =
    "\nAny field of the session, refinement or compositing options is also a long option\n"
    "(--guided-radius 3, --temporal mediapipe, --key-color blue, ...): see --help-options.\n"
    "Examples:\n"
    "  keyer talk.mp4 -o talk-blur.mp4 --blur 16\n"
    "  keyer talk.mp4 -o talk.mov --alpha\n"
    "  keyer a.mp4 b.mov -o out/ --replace beach.jpg --device cuda\n"
    "See docs/cli.md.\n";

/* The command's tables: @p cmd's own when given, then the main job's, then the library's
 * (searched in this order). */
static void run_args(run_opts *r, const run_command *cmd, kc_table tables[5], kc_args *a)
{
    int n = 0;
    if (cmd)
        tables[n++] = (kc_table){cmd->options, cmd->obj};
    tables[n++] = (kc_table){run_options, r};
    tables[n++] = (kc_table){keyer_session_options(), &r->sp};
    tables[n++] = (kc_table){keyer_refine_options(), &r->sp.refine};
    tables[n++] = (kc_table){keyer_composite_options(), &r->sp.composite};
    memset(a, 0, sizeof(*a));
    a->prog = cmd ? cmd->prog : "keyer";
    a->tables = tables;
    a->ntables = n;
    a->help_tables = cmd ? 2 : 1;
    a->usage = cmd ? cmd->usage : usage_text;
    a->footer = cmd ? cmd->footer : usage_footer;
}

int run_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "keyer: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see keyer --help)\n");
    va_end(ap);
    return 2;
}

void run_opts_init(run_opts *r)
{
    memset(r, 0, sizeof(*r));
    r->sp = keyer_session_params_defaults();
    r->overwrite = -1;
    r->progress = -1;
    r->crf = -1;
    r->threshold = -1;
    r->softness = -1;
    r->smooth = -1;
}

void run_opts_free(run_opts *r)
{
    for (int i = 0; i < r->nowned; i++)
        free(r->owned[i]);
    r->nowned = 0;
}

static void help_options(void)
{
    struct {
        const char *title;
        const keyer_option *table;
    } tables[] = {{"session", keyer_session_options()},
                  {"refinement (also --refine K=V,...)", keyer_refine_options()},
                  {"compositing (also --composite K=V,...)", keyer_composite_options()}};
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
        size_t n = keyer_options_help(tables[i].table, NULL, 0) + 1;
        char *buf = malloc(n);
        if (!buf)
            return;
        keyer_options_help(tables[i].table, buf, n);
        printf("%s options (as --name VALUE, '_' may be written '-'):\n%s\n", tables[i].title, buf);
        free(buf);
    }
}

/* ---- the command line: read twice, first for --config, then for everything ---------------------- */

static int add_input(run_opts *r, const char *path)
{
    if (r->ninputs >= RUN_MAX_INPUTS)
        return run_usage_error("more than %d inputs", RUN_MAX_INPUTS);
    r->inputs[r->ninputs++] = path;
    return 0;
}

/* First pass: the syntax is checked, --help printed, and --config noted. */
static int visit_first(void *opaque, const kc_args *a, const keyer_option *o,
                       const kc_table *table, const char *value)
{
    (void)opaque;
    if (o && !strcmp(o->name, "help_options")) {
        help_options();
        return 1;
    }
    if (o && !strcmp(o->name, "config"))
        return kc_args_apply(a, o, table, value, "command line");
    return 0;
}

/* Second pass, after the configuration file: every option and input, in order. */
static int visit_second(void *opaque, const kc_args *a, const keyer_option *o,
                        const kc_table *table, const char *value)
{
    run_opts *r = opaque;
    if (!o)
        return add_input(r, value);
    if (!strcmp(o->name, "config"))
        return 0; /* read before the command line */
    return kc_args_apply(a, o, table, value, "command line");
}

/* ---- the configuration file ------------------------------------------------------------------- */

typedef struct config_ctx {
    run_opts *r;
    const kc_args *a;
    const char *path;
    int rc; /* a usage error already printed */
} config_ctx;

static const char *keep(run_opts *r, const char *s)
{
    if (r->nowned >= (int)(sizeof(r->owned) / sizeof(r->owned[0])))
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    r->owned[r->nowned++] = d;
    return d;
}

static keyer_status config_setting(void *opaque, const char *key, const char *value, int line,
                                   keyer_error *err)
{
    config_ctx *c = opaque;
    run_opts *r = c->r;
    char from[512];
    snprintf(from, sizeof(from), "%s:%d", c->path, line);
    const char *v = keep(r, value);
    if (!v)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: too many settings", from);
    if (!strcmp(key, "input") || !strcmp(key, "inputs")) {
        if (r->ninputs >= RUN_MAX_INPUTS)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: more than %d inputs",
                                   from, RUN_MAX_INPUTS);
        r->inputs[r->ninputs++] = v;
        return KEYER_OK;
    }
    if (!strcmp(key, "config"))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: a configuration file cannot name another", from);
    /* "refine.feather", "composite.blur_radius", "session.batch": the prefix is dropped and
     * the rest read as the long option */
    const char *name = key;
    if (!strncmp(key, "refine.", 7) || !strncmp(key, "composite.", 10) ||
        !strncmp(key, "session.", 8))
        name = strchr(key, '.') + 1;
    c->rc = kc_args_apply_setting(c->a, name, v, from);
    if (c->rc)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: invalid setting", from);
    return KEYER_OK;
}

int run_parse(run_opts *r, int argc, char **argv)
{
    return run_parse_command(r, NULL, argc, argv);
}

int run_parse_command(run_opts *r, const run_command *cmd, int argc, char **argv)
{
    kc_table tables[5];
    kc_args a;
    run_args(r, cmd, tables, &a);
    int rc = kc_args_walk(&a, argc, argv, visit_first, r);
    if (rc)
        return rc;
    if (r->config) {
        keyer_error err = {0};
        config_ctx c = {r, &a, r->config, 0};
        if (keyer_config_read(r->config, config_setting, &c, &err)) {
            if (!c.rc)
                fprintf(stderr, "keyer: %s\n", err.message);
            return 2;
        }
    }
    return kc_args_walk(&a, argc, argv, visit_second, r);
}

/* ---- what the options imply ------------------------------------------------------------------ */

/* --threshold and --softness become the refinement's smoothstep edges. */
static int settle_matte(run_opts *r)
{
    keyer_refine_params *rp = &r->sp.refine;
    if (r->threshold >= 0 || r->softness >= 0) {
        float t = r->threshold >= 0 ? r->threshold : 0.5f * (rp->threshold_low + rp->threshold_high);
        float w = r->softness >= 0 ? r->softness : rp->threshold_high - rp->threshold_low;
        if (w < 0.01f)
            w = 0.01f;
        float lo = t - 0.5f * w, hi = t + 0.5f * w;
        if (lo < 0)
            lo = 0;
        if (hi > 1)
            hi = 1;
        if (hi <= lo)
            return run_usage_error("--threshold %.2f with --softness %.2f leaves no edge", t, w);
        rp->threshold = 1;
        rp->threshold_low = lo;
        rp->threshold_high = hi;
    }
    if (r->smooth >= 0) {
        rp->temporal_strength = r->smooth;
        if (r->smooth == 0)
            rp->temporal = KEYER_TEMPORAL_OFF;
        else if (rp->temporal == KEYER_TEMPORAL_OFF)
            rp->temporal = KEYER_TEMPORAL_ADAPTIVE;
    }
    return 0;
}

/* --detect, --draw, --export: with --detect and no effect option, the frames are drawn on as
 * they are. */
static int settle_analytics(run_opts *r, kc_analytics_opts *ao)
{
    memset(ao, 0, sizeof(*ao));
    if (!r->detect && (r->draw || r->export_path))
        return run_usage_error("--draw and --export need --detect");
    if (!r->detect)
        return 0;
    int rc;
    if ((rc = kc_parse_detect(r->detect, ao)) ||
        (rc = kc_parse_draw(r->draw ? r->draw : "boxes,ids,skeleton", ao)))
        return rc;
    ao->export_path = r->export_path;
    ao->backend = KEYER_BACKEND_CPU;
    /* one thread per stream (--threads to change): beside the pipeline's stages, a pool
     * over all 16 cores of the GPU machine took 230 ms per 1080p frame (faces), one
     * thread per stream 12-16 ms with 8 streams */
    ao->threads = r->sp.threads > 0 ? r->sp.threads : 1;
    if (ao->draw && r->sp.composite.mode == KEYER_COMPOSITE_MASK)
        return run_usage_error("--draw needs a colour output; --mask writes the matte (use "
                               "--draw none to only detect and export)");
    if (!r->effect_set)
        r->sp.passthrough = 1;
    /* faces alone: detected by the session, batched across streams on its device */
    ao->session_detect = kc_analytics_session_can_detect(ao);
    /* with the mesh: the session's face-mesh stage, batched across faces and streams; with
     * --device cpu the per-stream analysers instead, one per writer thread side by side (the
     * same results; the stage would run the streams' faces on one thread) */
    /* pose alone: the session's pose stage, batched across streams; with --device cpu the
     * per-stream trackers (the same results, side by side on the writer threads) */
    ao->session_pose = kc_analytics_session_can_pose(ao) && r->sp.device != KEYER_DEVICE_CPU;
    if (ao->session_detect && (ao->draw & KC_DRAW_MESH)) {
        if (r->sp.device == KEYER_DEVICE_CPU)
            ao->session_detect = 0;
        else
            ao->session_mesh = 1;
    }
    return 0;
}

/* --model-config and --model-options: the registry's description of a shipped model (or the
 * defaults for a file), then the file, then the options in order. */
static int settle_model(run_opts *r)
{
    if (!r->model_config && !r->nmodel_options)
        return 0;
    if (!r->sp.model)
        return run_usage_error("--model-config and --model-options describe --model FILE; no "
                               "--model given");
    keyer_error err = {0};
    r->model_desc = keyer_model_desc_from_entry(keyer_registry_find(r->sp.model));
    if (r->model_config && keyer_model_desc_read(r->model_config, &r->model_desc, &err)) {
        fprintf(stderr, "keyer: --model-config: %s\n", err.message);
        return 2;
    }
    for (int i = 0; i < r->nmodel_options; i++)
        if (keyer_options_parse(keyer_model_desc_options(), &r->model_desc, r->model_options[i],
                                &err) ||
            keyer_model_desc_validate(&r->model_desc, &err))
            return run_usage_error("--model-options: %s", err.message);
    r->sp.model_desc = &r->model_desc;
    return 0;
}

int run_settle(run_opts *r, kc_analytics_opts *ao)
{
    if (r->ninputs == 0)
        return run_usage_error("no input given");
    if (!r->output && !r->stats)
        return run_usage_error("no output given (-o OUTPUT)");
    int rc = settle_matte(r);
    if (!rc)
        rc = settle_model(r);
    return rc ? rc : settle_analytics(r, ao);
}
