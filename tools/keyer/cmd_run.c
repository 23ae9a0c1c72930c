/*
 * keyer INPUT... -o OUTPUT [options]: the main job. Reads each input, keys the person out
 * (blur, replace, alpha, mask, green screen) through a keyer_session and writes each output
 * with the input's audio. Options come from one table below plus the option tables of the
 * session, refinement and compositing (any of their fields is a --long-option); a YAML
 * configuration file (--config) uses the same names as keys and the command line wins.
 * Built only on the public API.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "analytics.h"
#include "commands.h"
#include "keyer/effects.h"
#include "keyer/io.h"
#include "keyer/keyer.h"
#include "keyer/options.h"
#include "keyer/pipeline.h"

#define MAX_INPUTS 64

/* ---- what the command line and the configuration file set ------------------------------------ */

typedef struct run_opts {
    const char *inputs[MAX_INPUTS];
    int ninputs;
    const char *output;
    const char *config;
    const char *stats;
    const char *trace;
    const char *replace;
    const char *codec, *preset, *pix_fmt, *format, *codec_options;
    int crf;
    int overwrite;   /* 1: -y, 0: -n, -1: ask nothing, refuse (default) */
    int verbosity;   /* -1 quiet, 0 normal, 1 verbose, 2 debug */
    int progress;    /* -1 auto (a terminal), 0 off, 1 on */
    int no_audio;
    float threshold; /* < 0: keep the refine defaults */
    float softness;
    float smooth;    /* < 0: keep */
    keyer_session_params sp;
    int device_set;
    int effect_set;  /* an effect option was given (else --detect alone draws on the input) */
    const char *detect, *draw, *export_path;
    /* strings from the configuration file live here until the run ends */
    char *owned[256];
    int nowned;
} run_opts;

/* Options of the command itself. arg: 0 flag, 1 value, 2 optional number. */
typedef struct cli_option {
    const char *name;
    char short_name;
    int arg;
    const char *metavar;
    const char *help;
} cli_option;

static const cli_option cli_options[] = {
    {"output", 'o', 1, "PATH", "output file, or a directory for several inputs"},
    {"blur", 0, 2, "SIGMA", "blur the background (default; Gaussian sigma in pixels, default 12)"},
    {"replace", 0, 1, "IMAGE|VIDEO|COLOR", "replace the background by a picture, a video or a "
                                           "colour (#rrggbb or a name)"},
    {"green", 0, 2, "", "replace the background by chroma-key green (for keying elsewhere)"},
    {"alpha", 0, 0, NULL, "transparent background: ProRes 4444 (.mov), VP9 (.webm) or PNG"},
    {"premultiply", 0, 0, NULL, "with --alpha: premultiplied colour"},
    {"mask", 0, 0, NULL, "write the matte only (white = person)"},
    {"model", 0, 1, "NAME|FILE", "segmentation model (see 'keyer models'); default by aspect ratio"},
    {"threshold", 0, 1, "T", "mask level that counts as the person, 0..1 (default 0.5)"},
    {"softness", 0, 1, "S", "width of the soft edge around the threshold, 0..1 (default 0.5)"},
    {"feather", 0, 1, "PIXELS", "blur the matte's edge by this radius (default 1)"},
    {"dilate", 0, 1, "PIXELS", "grow (> 0) or shrink (< 0) the matte"},
    {"smooth", 0, 1, "S", "temporal smoothing of the matte, 0 (off) .. 0.99 (default 0.8)"},
    {"detect", 0, 1, "faces|pose[,...]", "detect and track faces (faces:full for the far "
                                         "range) and/or a body pose (pose:full, pose:heavy)"},
    {"draw", 0, 1, "LIST", "with --detect: boxes, ids, keypoints, mesh, skeleton, graph[:k=K], "
                           "all, none (default boxes,ids,skeleton)"},
    {"export", 0, 1, "FILE.jsonl", "with --detect: one JSON object per frame (docs/cli.md)"},
    {"device", 0, 1, "auto|cpu|cuda[:N]", "where to compute (default auto)"},
    {"mode", 0, 1, "throughput|latency", "large batches for files, or batch 1 for live use"},
    {"batch", 0, 1, "N", "frames per inference (default: 1 on the CPU, 16 on CUDA)"},
    {"threads", 0, 1, "N", "CPU threads of the pixel stages (default: all cores)"},
    {"codec", 0, 1, "NAME", "video encoder (libx264, libx265, h264_nvenc, prores_ks, ...)"},
    {"preset", 0, 1, "NAME", "encoder preset (medium, fast, p4, ...)"},
    {"crf", 0, 1, "N", "constant quality (x264/x265/VP9 CRF, NVENC CQ)"},
    {"pix-fmt", 0, 1, "NAME", "encoded pixel format (yuv420p, yuv444p, yuva444p10le, ...)"},
    {"format", 0, 1, "NAME", "container (mp4, mov, matroska, webm, image2, ...); default by name"},
    {"codec-options", 0, 1, "K=V:...", "extra encoder options"},
    {"no-audio", 0, 0, NULL, "do not copy audio, subtitles and metadata"},
    {"live", 0, 0, NULL, "treat the inputs as live: drop the oldest frames when behind"},
    {"realtime", 0, 0, NULL, "read files at their frame rate, as a camera delivers frames"},
    {"refine", 0, 1, "K=V,...", "refinement options (see --help-options)"},
    {"composite", 0, 1, "K=V,...", "compositing options (see --help-options)"},
    {"config", 0, 1, "FILE.yaml", "read options from a YAML file (keys = long options)"},
    {"stats", 0, 1, "FILE.json", "write per-stage statistics"},
    {"trace", 0, 1, "FILE.json", "write a Chrome/Perfetto trace of the stages"},
    {"progress", 0, 0, NULL, "show the progress bar even when stderr is not a terminal"},
    {"no-progress", 0, 0, NULL, "never show the progress bar"},
    {"yes", 'y', 0, NULL, "overwrite existing outputs"},
    {"no", 'n', 0, NULL, "never overwrite (exit with an error)"},
    {"quiet", 'q', 0, NULL, "print errors only"},
    {"verbose", 'v', 0, NULL, "print more (twice: debug)"},
    {"help", 'h', 0, NULL, "this help"},
    {"help-options", 0, 0, NULL, "every refinement, compositing and session option"},
    {NULL, 0, 0, NULL, NULL},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: keyer INPUT... -o OUTPUT [options]\n\n"
               "Keys the person out of each input video and writes the result with the input's "
               "audio:\nthe background blurred (default), replaced, made transparent, or the "
               "matte alone.\n\nOptions:\n");
    for (const cli_option *o = cli_options; o->name; o++) {
        char left[64];
        if (o->short_name)
            snprintf(left, sizeof(left), "-%c, --%s%s%s%s", o->short_name, o->name,
                     o->arg ? " " : "", o->arg == 2 ? "[" : "", o->metavar ? o->metavar : "");
        else
            snprintf(left, sizeof(left), "    --%s%s%s%s%s", o->name, o->arg ? " " : "",
                     o->arg == 2 ? "[" : "", o->metavar ? o->metavar : "", o->arg == 2 ? "]" : "");
        if (strlen(left) > 30)
            fprintf(f, "  %s\n  %-30s %s\n", left, "", o->help);
        else
            fprintf(f, "  %-30s %s\n", left, o->help);
    }
    fprintf(f, "\nAny field of the session, refinement or compositing options is also a long "
               "option\n(--guided-radius 3, --temporal mediapipe, --key-color blue, ...): see "
               "--help-options.\nExamples:\n"
               "  keyer talk.mp4 -o talk-blur.mp4 --blur 16\n"
               "  keyer talk.mp4 -o talk.mov --alpha\n"
               "  keyer a.mp4 b.mov -o out/ --replace beach.jpg --device cuda\n"
               "See docs/cli.md.\n");
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

/* ---- applying one option ----------------------------------------------------------------------- */

static int fail_usage(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

static int fail_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "keyer: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see keyer --help)\n");
    va_end(ap);
    return 2;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !end || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_float(const char *s, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || !end || end == s || *end || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    if (!s || !strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on") || !strcmp(s, "1")) {
        *out = 1;
        return 0;
    }
    if (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off") || !strcmp(s, "0")) {
        *out = 0;
        return 0;
    }
    return -1;
}

/* "guided-radius" -> "guided_radius" */
static void underscore(const char *in, char *out, size_t n)
{
    size_t i = 0;
    for (; in[i] && i + 1 < n; i++)
        out[i] = in[i] == '-' ? '_' : in[i];
    out[i] = 0;
}

static const cli_option *find_cli(const char *name)
{
    for (const cli_option *o = cli_options; o->name; o++)
        if (!strcmp(o->name, name))
            return o;
    char u[64];
    underscore(name, u, sizeof(u));
    for (const cli_option *o = cli_options; o->name; o++) {
        char v[64];
        underscore(o->name, v, sizeof(v));
        if (!strcmp(u, v))
            return o;
    }
    return NULL;
}

/* A table option by name (session, then refine, then composite); sets *obj to its struct. */
static const keyer_option *find_table(run_opts *r, const char *name, void **obj)
{
    char u[64];
    underscore(name, u, sizeof(u));
    const keyer_option *o;
    if ((o = keyer_option_find(keyer_session_options(), u))) {
        *obj = &r->sp;
        return o;
    }
    if ((o = keyer_option_find(keyer_refine_options(), u))) {
        *obj = &r->sp.refine;
        return o;
    }
    if ((o = keyer_option_find(keyer_composite_options(), u))) {
        *obj = &r->sp.composite;
        return o;
    }
    return NULL;
}

static int is_color_text(const char *s)
{
    keyer_composite_params tmp = keyer_composite_params_defaults();
    return keyer_option_set(keyer_composite_options(), &tmp, "color", s, NULL) == KEYER_OK;
}

static int file_exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

/*
 * Applies option @p name with @p value (NULL for a flag without value). @p from names the
 * source for messages ("command line" or "FILE:LINE"). Returns 0, or 2 for a usage error.
 */
static int apply(run_opts *r, const char *name, const char *value, const char *from)
{
    const cli_option *o = find_cli(name);
    if (!o) {
        void *obj = NULL;
        const keyer_option *t = find_table(r, name, &obj);
        if (!t)
            return fail_usage("%s: unknown option '%s'", from, name);
        keyer_error e = {0};
        char u[64];
        underscore(name, u, sizeof(u));
        if (!value)
            return fail_usage("%s: option '%s' needs a value", from, name);
        if (keyer_option_set(obj == &r->sp ? keyer_session_options()
                             : obj == &r->sp.refine ? keyer_refine_options()
                                                    : keyer_composite_options(),
                             obj, u, value, &e))
            return fail_usage("%s: %s", from, e.message);
        if (!strcmp(u, "device"))
            r->device_set = 1;
        return 0;
    }
    const char *n = o->name;
    if (o->arg == 1 && !value)
        return fail_usage("%s: option --%s needs a value", from, n);
    long iv;
    double fv;
    int bv = 1;
    if (o->arg == 0 && value && parse_bool(value, &bv))
        return fail_usage("%s: option --%s takes true or false, not '%s'", from, n, value);
    keyer_error e = {0};
    if (!strcmp(n, "output")) {
        r->output = value;
    } else if (!strcmp(n, "blur")) {
        r->effect_set = 1;
        r->sp.composite.mode = KEYER_COMPOSITE_BLUR;
        if (value) {
            if (parse_float(value, 2, 256, &fv))
                return fail_usage("%s: --blur takes a sigma in 2..256, not '%s'", from, value);
            r->sp.composite.blur_radius = (float)fv;
        }
    } else if (!strcmp(n, "replace")) {
        r->effect_set = 1;
        r->replace = value;
        if (!file_exists(value) && is_color_text(value)) {
            r->sp.composite.mode = KEYER_COMPOSITE_COLOR;
            keyer_option_set(keyer_composite_options(), &r->sp.composite, "color", value, NULL);
            r->sp.background = NULL;
        } else if (!file_exists(value)) {
            fprintf(stderr, "keyer: %s: --replace %s: no such file, and not a colour (#rrggbb, "
                            "black, white, red, green, blue, gray)\n", from, value);
            return 2;
        } else {
            r->sp.composite.mode = KEYER_COMPOSITE_IMAGE;
            r->sp.background = value;
        }
    } else if (!strcmp(n, "green")) {
        r->effect_set = 1;
        r->sp.composite.mode = KEYER_COMPOSITE_GREEN_SCREEN;
        if (value && keyer_option_set(keyer_composite_options(), &r->sp.composite, "key_color",
                                      value, &e))
            return fail_usage("%s: --green: %s", from, e.message);
    } else if (!strcmp(n, "alpha")) {
        r->effect_set |= bv;
        if (bv)
            r->sp.composite.mode = r->sp.composite.mode == KEYER_COMPOSITE_ALPHA_PREMULTIPLIED
                                       ? KEYER_COMPOSITE_ALPHA_PREMULTIPLIED
                                       : KEYER_COMPOSITE_ALPHA;
    } else if (!strcmp(n, "premultiply")) {
        r->effect_set |= bv;
        if (bv)
            r->sp.composite.mode = KEYER_COMPOSITE_ALPHA_PREMULTIPLIED;
    } else if (!strcmp(n, "mask")) {
        r->effect_set |= bv;
        if (bv)
            r->sp.composite.mode = KEYER_COMPOSITE_MASK;
    } else if (!strcmp(n, "detect")) {
        r->detect = value;
    } else if (!strcmp(n, "draw")) {
        r->draw = value;
    } else if (!strcmp(n, "export")) {
        r->export_path = value;
    } else if (!strcmp(n, "model")) {
        r->sp.model = value;
    } else if (!strcmp(n, "threshold")) {
        if (parse_float(value, 0, 1, &fv))
            return fail_usage("%s: --threshold takes a number in 0..1, not '%s'", from, value);
        r->threshold = (float)fv;
    } else if (!strcmp(n, "softness")) {
        if (parse_float(value, 0, 1, &fv))
            return fail_usage("%s: --softness takes a number in 0..1, not '%s'", from, value);
        r->softness = (float)fv;
    } else if (!strcmp(n, "smooth")) {
        if (parse_float(value, 0, 0.99, &fv))
            return fail_usage("%s: --smooth takes a number in 0..0.99, not '%s'", from, value);
        r->smooth = (float)fv;
    } else if (!strcmp(n, "feather") || !strcmp(n, "dilate")) {
        if (keyer_option_set(keyer_refine_options(), &r->sp.refine, n, value, &e))
            return fail_usage("%s: --%s: %s", from, n, e.message);
    } else if (!strcmp(n, "device")) {
        keyer_device_kind kind;
        int ordinal;
        if (keyer_device_parse(value, &kind, &ordinal, &e))
            return fail_usage("%s: --device: %s", from, e.message);
        r->sp.device = kind;
        r->sp.cuda_device = ordinal;
        r->device_set = 1;
    } else if (!strcmp(n, "mode") || !strcmp(n, "batch") || !strcmp(n, "threads")) {
        if (keyer_option_set(keyer_session_options(), &r->sp, n, value, &e))
            return fail_usage("%s: --%s: %s", from, n, e.message);
    } else if (!strcmp(n, "codec")) {
        r->codec = value;
    } else if (!strcmp(n, "preset")) {
        r->preset = value;
    } else if (!strcmp(n, "crf")) {
        if (parse_int(value, 0, 63, &iv))
            return fail_usage("%s: --crf takes 0..63, not '%s'", from, value);
        r->crf = (int)iv;
    } else if (!strcmp(n, "pix-fmt")) {
        r->pix_fmt = value;
    } else if (!strcmp(n, "format")) {
        r->format = value;
    } else if (!strcmp(n, "codec-options")) {
        r->codec_options = value;
    } else if (!strcmp(n, "no-audio")) {
        r->no_audio = bv;
    } else if (!strcmp(n, "live")) {
        r->sp.live = bv ? 1 : -1;
    } else if (!strcmp(n, "realtime")) {
        r->sp.realtime = bv;
    } else if (!strcmp(n, "refine") || !strcmp(n, "composite")) {
        int refine = n[0] == 'r';
        if (keyer_options_parse(refine ? keyer_refine_options() : keyer_composite_options(),
                                refine ? (void *)&r->sp.refine : (void *)&r->sp.composite, value,
                                &e))
            return fail_usage("%s: --%s: %s", from, n, e.message);
    } else if (!strcmp(n, "config")) {
        r->config = value;
    } else if (!strcmp(n, "stats")) {
        r->stats = value;
    } else if (!strcmp(n, "trace")) {
        r->trace = value;
    } else if (!strcmp(n, "progress")) {
        r->progress = bv ? 1 : 0;
    } else if (!strcmp(n, "no-progress")) {
        r->progress = bv ? 0 : -1;
    } else if (!strcmp(n, "yes")) {
        r->overwrite = bv ? 1 : -1;
    } else if (!strcmp(n, "no")) {
        r->overwrite = bv ? 0 : -1;
    } else if (!strcmp(n, "quiet")) {
        r->verbosity = bv ? -1 : 0;
    } else if (!strcmp(n, "verbose")) {
        r->verbosity = bv ? (r->verbosity > 0 ? r->verbosity + 1 : 1) : 0;
    } else {
        return fail_usage("%s: option --%s cannot be used here", from, n);
    }
    return 0;
}

/* ---- configuration file --------------------------------------------------------------------------- */

typedef struct config_ctx {
    run_opts *r;
    const char *path;
    int rc;
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
        if (r->ninputs >= MAX_INPUTS)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: more than %d inputs",
                                   from, MAX_INPUTS);
        r->inputs[r->ninputs++] = v;
        return KEYER_OK;
    }
    if (!strcmp(key, "config"))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: a configuration file cannot name another", from);
    /* "refine.feather" and "composite.blur_radius" address the tables directly */
    const char *name = key;
    if (!strncmp(key, "refine.", 7) || !strncmp(key, "composite.", 10) ||
        !strncmp(key, "session.", 8))
        name = strchr(key, '.') + 1;
    const cli_option *o = find_cli(name);
    const char *val = v;
    if (o && o->arg != 1) {
        /* flags: true/false; optional values: a value, or true for the flag alone */
        int b;
        if (!parse_bool(v, &b)) {
            if (!b) {
                if (o->arg == 0) {
                    c->rc = apply(r, name, "false", from);
                    return c->rc ? KEYER_STATUS_INVALID_ARGUMENT : KEYER_OK;
                }
                return KEYER_OK; /* "blur: false": nothing to do */
            }
            val = o->arg == 0 ? "true" : NULL;
        }
    }
    c->rc = apply(r, name, val, from);
    if (c->rc)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: invalid setting", from);
    return KEYER_OK;
}

/* ---- argument parsing --------------------------------------------------------------------------- */

static int looks_numeric(const char *s)
{
    double d;
    return s && parse_float(s, -1e9, 1e9, &d) == 0;
}

/* Parses argv; @p pass 0 only finds --config, pass 1 applies everything. */
static int parse_args(run_opts *r, int argc, char **argv, int pass)
{
    int only_inputs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_inputs || a[0] != '-' || !strcmp(a, "-")) {
            if (pass == 1) {
                if (r->ninputs >= MAX_INPUTS)
                    return fail_usage("more than %d inputs", MAX_INPUTS);
                r->inputs[r->ninputs++] = a;
            }
            continue;
        }
        if (!strcmp(a, "--")) {
            only_inputs = 1;
            continue;
        }
        char name[64];
        const char *value = NULL;
        const cli_option *o = NULL;
        if (a[1] != '-') {
            /* short options, possibly grouped (-yv, -vv) */
            for (const char *p = a + 1; *p; p++) {
                o = NULL;
                for (const cli_option *q = cli_options; q->name; q++)
                    if (q->short_name == *p)
                        o = q;
                if (!o)
                    return fail_usage("unknown option '-%c'", *p);
                if (o->arg == 1) {
                    value = p[1] ? p + 1 : (i + 1 < argc ? argv[++i] : NULL);
                    if (!value)
                        return fail_usage("option -%c needs a value", *p);
                    if (pass == 1 && apply(r, o->name, value, "command line"))
                        return 2;
                    break;
                }
                if (!strcmp(o->name, "help")) {
                    usage(stdout);
                    return 1;
                }
                if (pass == 1 && apply(r, o->name, NULL, "command line"))
                    return 2;
            }
            continue;
        }
        const char *eq = strchr(a + 2, '=');
        size_t len = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
        if (len >= sizeof(name))
            return fail_usage("unknown option '%s'", a);
        memcpy(name, a + 2, len);
        name[len] = 0;
        if (eq)
            value = eq + 1;
        if (!strcmp(name, "help")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(name, "help-options")) {
            help_options();
            return 1;
        }
        o = find_cli(name);
        void *obj;
        int takes = o ? o->arg : (find_table(r, name, &obj) ? 1 : -1);
        if (takes < 0)
            return fail_usage("unknown option '--%s'", name);
        if (takes == 1 && !value) {
            if (i + 1 >= argc)
                return fail_usage("option --%s needs a value", name);
            value = argv[++i];
        }
        if (takes == 2 && !value && i + 1 < argc && looks_numeric(argv[i + 1]))
            value = argv[++i];
        if (takes == 2 && !value && o && !strcmp(o->name, "green") && i + 1 < argc &&
            argv[i + 1][0] == '#')
            value = argv[++i];
        if (takes == 0 && value && pass == 1) {
            int b;
            if (parse_bool(value, &b))
                return fail_usage("option --%s takes no value", name);
        }
        if (pass == 0) {
            if (!strcmp(name, "config"))
                r->config = value;
            continue;
        }
        if (!strcmp(name, "config"))
            continue; /* read before the command line */
        if (apply(r, name, value, "command line"))
            return 2;
    }
    return 0;
}

/* ---- outputs ------------------------------------------------------------------------------------- */

static int is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* The output path of input @p in when -o names a directory. */
static int output_in_dir(const run_opts *r, const char *dir, const char *in, char *out, size_t n)
{
    const char *b = base_name(in);
    const char *dot = strrchr(b, '.');
    int stem = dot && dot != b ? (int)(dot - b) : (int)strlen(b);
    const char *ext = dot && dot != b ? dot : ".mp4";
    int mode = r->sp.composite.mode;
    if (mode == KEYER_COMPOSITE_ALPHA || mode == KEYER_COMPOSITE_ALPHA_PREMULTIPLIED)
        ext = ".mov";
    else if (strstr(in, "://") || !strcmp(in, "-") || strchr(b, '%') || !strncmp(in, "/dev/", 5))
        ext = ".mp4";
    size_t dl = strlen(dir);
    int k = snprintf(out, n, "%s%s%.*s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", stem,
                     b[0] ? b : "stream", ext);
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

static int make_dir(const char *p)
{
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", p);
    for (char *s = buf + 1; *s; s++) {
        if (*s == '/') {
            *s = 0;
            if (mkdir(buf, 0777) && errno != EEXIST)
                return -1;
            *s = '/';
        }
    }
    if (mkdir(buf, 0777) && errno != EEXIST)
        return -1;
    return 0;
}

/* ---- signals ------------------------------------------------------------------------------------- */

/* The CLI's one global: the session a signal handler stops. The library has none. */
static keyer_session *volatile g_session;
static volatile sig_atomic_t g_signals;

static void on_signal(int sig)
{
    if (g_signals++ > 0) {
        /* a second Ctrl-C: stop at once */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    static const char msg[] = "\nkeyer: stopping: finishing the frames read so far "
                              "(Ctrl-C again to abort)\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    (void)w;
    keyer_session_cancel(g_session);
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void restore_signals(void)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
}

/* ---- progress --------------------------------------------------------------------------------------- */

typedef struct progress_state {
    int enabled;
    int drawn;
} progress_state;

static void fmt_time(double s, char *buf, size_t n)
{
    if (s < 0 || s > 359999) {
        snprintf(buf, n, "--:--");
        return;
    }
    int t = (int)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, n, "%d:%02d", t / 60, t % 60);
}

static void on_progress(void *opaque, const keyer_session_progress *p)
{
    progress_state *ps = opaque;
    if (!ps->enabled)
        return;
    char el[16], left[16], bar[32];
    fmt_time(p->elapsed, el, sizeof(el));
    fmt_time(p->remaining, left, sizeof(left));
    const int width = 24;
    double frac = p->frames_total > 0 ? (double)p->frames_done / (double)p->frames_total : 0.0;
    if (frac > 1)
        frac = 1;
    int fill = (int)(frac * width + 0.5);
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    if (p->frames_total > 0)
        fprintf(stderr, "\r[%s] %3d%%  %lld/%lld frames  %.1f fps  %s elapsed  %s left   ", bar,
                (int)(frac * 100), (long long)p->frames_done, (long long)p->frames_total, p->fps,
                el, left);
    else
        fprintf(stderr, "\r%lld frames  %.1f fps  %s elapsed   ", (long long)p->frames_done,
                p->fps, el);
    fflush(stderr);
    ps->drawn = 1;
}

/* ---- the logger: errors and warnings, each on its own line after the progress bar -------------- */

typedef struct log_state {
    progress_state *progress;
} log_state;

static void on_log(void *opaque, keyer_log_level level, const char *message)
{
    log_state *ls = opaque;
    if (ls->progress->drawn) {
        fputc('\n', stderr);
        ls->progress->drawn = 0;
    }
    fprintf(stderr, "keyer: %s: %s\n", keyer_log_level_name(level), message);
}

/* ---- summary --------------------------------------------------------------------------------------- */

static void summary(keyer_session *s, const run_opts *r, FILE *f)
{
    keyer_session_report rep;
    keyer_session_get_report(s, &rep);
    fprintf(f, "keyer: %lld frame%s in %.2f s (%.1f fps) on %s, model %s, batch %d%s%s\n",
            (long long)rep.frames_written, rep.frames_written == 1 ? "" : "s", rep.seconds, rep.fps,
            rep.device, rep.model, rep.batch, rep.detector[0] ? ", detector " : "",
            rep.detector);
    int n = keyer_session_stream_count(s);
    for (int i = 0; i < n; i++) {
        keyer_stream_report sr;
        if (keyer_session_get_stream_report(s, i, &sr, NULL))
            continue;
        fprintf(f, "  %s -> %s: %lld frames, %dx%d, %s decode, %s%s\n", sr.input,
                sr.output[0] ? sr.output : "(discarded)", (long long)sr.frames_written, sr.width,
                sr.height, sr.hw_decode ? "NVDEC" : "CPU", sr.encoder[0] ? sr.encoder : "no encoder",
                sr.has_audio ? (r->no_audio ? ", audio not copied" : ", audio copied") : "");
    }
    if (rep.frames_dropped || rep.frames_damaged || rep.frames_lost)
        fprintf(f, "  warning: %lld frame%s dropped (live input behind), %lld damaged in the "
                   "input, %lld lost\n",
                (long long)rep.frames_dropped, rep.frames_dropped == 1 ? "" : "s",
                (long long)rep.frames_damaged, (long long)rep.frames_lost);
    if (rep.frames_on_cuda && rep.frames_on_cpu)
        fprintf(f, "  %lld frames inferred on CUDA, %lld on the CPU\n",
                (long long)rep.frames_on_cuda, (long long)rep.frames_on_cpu);
    if (rep.fell_back)
        fprintf(f, "  warning: the GPU was not used for everything (see the warnings above)\n");
    if (rep.warnings)
        fprintf(f, "  %d warning%s\n", rep.warnings, rep.warnings == 1 ? "" : "s");
    if (r->verbosity > 0) {
        fprintf(f, "  %-10s %7s %8s %8s %8s %8s %6s %8s\n", "stage", "workers", "mean ms", "p50",
                "p95", "p99", "busy", "queue");
        for (int i = 0; i < rep.stage_count; i++) {
            const keyer_stage_report *g = &rep.stages[i];
            fprintf(f, "  %-10s %7d %8.2f %8.2f %8.2f %8.2f %5.0f%% %4.1f/%-3d%s\n", g->name,
                    g->workers, g->latency.mean, g->latency.p50, g->latency.p95, g->latency.p99,
                    g->utilization * 100, g->queue_mean, g->queue_capacity,
                    i == rep.bottleneck ? "  <- bottleneck" : "");
        }
        fprintf(f, "  latency per frame: mean %.1f ms, p99 %.1f ms; %lld batches of %.2f frames\n",
                rep.latency.mean, rep.latency.p99, (long long)rep.batches, rep.batch_mean);
    }
}

/* ---- the command ------------------------------------------------------------------------------------ */

static void free_owned(run_opts *r)
{
    for (int i = 0; i < r->nowned; i++)
        free(r->owned[i]);
    r->nowned = 0;
}

int keyer_cmd_run(int argc, char **argv)
{
    run_opts r;
    memset(&r, 0, sizeof(r));
    r.sp = keyer_session_params_defaults();
    r.overwrite = -1;
    r.progress = -1;
    r.crf = -1;
    r.threshold = -1;
    r.softness = -1;
    r.smooth = -1;
    int rc = parse_args(&r, argc, argv, 0);
    if (rc)
        return rc == 1 ? 0 : rc;
    keyer_error err = {0};
    if (r.config) {
        config_ctx c = {&r, r.config, 0};
        if (keyer_config_read(r.config, config_setting, &c, &err)) {
            if (!c.rc)
                fprintf(stderr, "keyer: %s\n", err.message);
            free_owned(&r);
            return 2;
        }
    }
    if ((rc = parse_args(&r, argc, argv, 1))) {
        free_owned(&r);
        return rc == 1 ? 0 : rc;
    }
    rc = 1;
    keyer_session *s = NULL;
    kc_analytics *an = NULL;
    if (r.ninputs == 0) {
        rc = fail_usage("no input given");
        goto done;
    }
    if (!r.output && !r.stats) {
        rc = fail_usage("no output given (-o OUTPUT)");
        goto done;
    }
    /* threshold and softness become the smoothstep edges */
    if (r.threshold >= 0 || r.softness >= 0) {
        float t = r.threshold >= 0 ? r.threshold : 0.5f *
                  (r.sp.refine.threshold_low + r.sp.refine.threshold_high);
        float w = r.softness >= 0 ? r.softness
                                  : r.sp.refine.threshold_high - r.sp.refine.threshold_low;
        if (w < 0.01f)
            w = 0.01f;
        float lo = t - 0.5f * w, hi = t + 0.5f * w;
        if (lo < 0)
            lo = 0;
        if (hi > 1)
            hi = 1;
        if (hi <= lo) {
            rc = fail_usage("--threshold %.2f with --softness %.2f leaves no edge", t, w);
            goto done;
        }
        r.sp.refine.threshold = 1;
        r.sp.refine.threshold_low = lo;
        r.sp.refine.threshold_high = hi;
    }
    if (r.smooth >= 0) {
        r.sp.refine.temporal_strength = r.smooth;
        if (r.smooth == 0)
            r.sp.refine.temporal = KEYER_TEMPORAL_OFF;
        else if (r.sp.refine.temporal == KEYER_TEMPORAL_OFF)
            r.sp.refine.temporal = KEYER_TEMPORAL_ADAPTIVE;
    }
    /* analytics: with --detect and no effect option, the frames are drawn on as they are */
    kc_analytics_opts ao;
    memset(&ao, 0, sizeof(ao));
    if (!r.detect && (r.draw || r.export_path)) {
        rc = fail_usage("--draw and --export need --detect");
        goto done;
    }
    if (r.detect) {
        if ((rc = kc_parse_detect(r.detect, &ao)) ||
            (rc = kc_parse_draw(r.draw ? r.draw : "boxes,ids,skeleton", &ao)))
            goto done;
        rc = 1;
        ao.export_path = r.export_path;
        ao.backend = KEYER_BACKEND_CPU;
        /* one thread per stream (--threads to change): beside the pipeline's stages, a pool
         * over all 16 cores of the GPU machine took 230 ms per 1080p frame (faces), one
         * thread per stream 12-16 ms with 8 streams */
        ao.threads = r.sp.threads > 0 ? r.sp.threads : 1;
        if (ao.draw && r.sp.composite.mode == KEYER_COMPOSITE_MASK) {
            rc = fail_usage("--draw needs a colour output; --mask writes the matte (use "
                            "--draw none to only detect and export)");
            goto done;
        }
        if (!r.effect_set)
            r.sp.passthrough = 1;
        /* faces alone: detected by the session, batched across streams on its device */
        ao.session_detect = kc_analytics_session_can_detect(&ao);
    }
    /* outputs */
    static char paths[MAX_INPUTS][4096];
    const char *outs[MAX_INPUTS];
    int dir_out = r.output && (r.ninputs > 1 || is_dir(r.output) ||
                               r.output[strlen(r.output) - 1] == '/');
    if (dir_out && make_dir(r.output)) {
        fprintf(stderr, "keyer: cannot create the output directory %s: %s\n", r.output,
                strerror(errno));
        goto done;
    }
    for (int i = 0; i < r.ninputs; i++) {
        outs[i] = NULL;
        if (!r.output)
            continue;
        if (dir_out) {
            if (output_in_dir(&r, r.output, r.inputs[i], paths[i], sizeof(paths[i]))) {
                fprintf(stderr, "keyer: output path too long for %s\n", r.inputs[i]);
                goto done;
            }
            outs[i] = paths[i];
        } else {
            outs[i] = r.output;
        }
        for (int k = 0; k < i; k++) {
            if (outs[k] && !strcmp(outs[k], outs[i])) {
                fprintf(stderr, "keyer: inputs %s and %s would both write %s\n", r.inputs[k],
                        r.inputs[i], outs[i]);
                goto done;
            }
        }
        if (!strcmp(outs[i], r.inputs[i])) {
            fprintf(stderr, "keyer: %s: the output would overwrite its input\n", outs[i]);
            goto done;
        }
        if (strcmp(outs[i], "-") && !strchr(outs[i], '%') && file_exists(outs[i]) &&
            r.overwrite != 1) {
            fprintf(stderr, "keyer: %s exists (use -y to overwrite%s)\n", outs[i],
                    r.overwrite == 0 ? "; -n was given" : "");
            goto done;
        }
    }
    /* logging, progress, session */
    progress_state ps = {0, 0};
    ps.enabled = r.verbosity >= 0 && (r.progress == 1 || (r.progress == -1 && isatty(2)));
    log_state ls = {&ps};
    keyer_logger lg = keyer_logger_default();
    lg.level = r.verbosity < 0 ? KEYER_LOG_ERROR : r.verbosity == 0 ? KEYER_LOG_WARNING
               : r.verbosity == 1                                ? KEYER_LOG_INFO
                                                                 : KEYER_LOG_DEBUG;
    lg.callback = on_log;
    lg.opaque = &ls;
    r.sp.logger = &lg;
    r.sp.progress = on_progress;
    r.sp.progress_opaque = &ps;
    if (r.trace && r.sp.trace_events == 0)
        r.sp.trace_events = 1 << 20;
    if (r.detect) {
        if (kc_analytics_create(&ao, r.ninputs, r.inputs, &an, &err)) {
            fprintf(stderr, "keyer: %s\n", err.message);
            goto done;
        }
        if (ao.session_detect) {
            r.sp.detect = ao.full_range ? KEYER_SESSION_DETECT_FACES_FULL
                                        : KEYER_SESSION_DETECT_FACES;
            r.sp.detect_fn = kc_analytics_detections;
            r.sp.detect_opaque = an;
        } else {
            r.sp.frame_fn = kc_analytics_frame;
            r.sp.frame_opaque = an;
        }
    }
    if (keyer_session_create(&r.sp, &s, &err)) {
        fprintf(stderr, "keyer: %s\n", err.message);
        goto done;
    }
    g_session = s;
    install_signals();
    for (int i = 0; i < r.ninputs; i++) {
        keyer_file_stream_params fp = keyer_file_stream_params_defaults();
        fp.input = r.inputs[i];
        fp.output = outs[i];
        fp.copy_streams = !r.no_audio;
        fp.writer.codec = r.codec;
        fp.writer.preset = r.preset;
        fp.writer.quality = r.crf;
        fp.writer.pixel_format = r.pix_fmt;
        fp.writer.format = r.format;
        fp.writer.codec_options = r.codec_options;
        if (keyer_session_add_file(s, &fp, NULL, &err)) {
            fprintf(stderr, "keyer: %s\n", err.message);
            goto done;
        }
    }
    keyer_status st = keyer_session_run(s, &err);
    if (ps.drawn)
        fputc('\n', stderr);
    ps.enabled = 0;
    if (st == KEYER_STATUS_INTERRUPTED) {
        fprintf(stderr, "keyer: interrupted: the outputs hold every frame read before the stop\n");
        rc = 130;
    } else if (st) {
        fprintf(stderr, "keyer: %s\n", err.message);
        rc = 1;
    } else {
        rc = 0;
    }
    keyer_session_report rep;
    keyer_session_get_report(s, &rep);
    if (r.verbosity >= 0 && (st == KEYER_OK || rep.frames_written > 0))
        summary(s, &r, stderr);
    if (an && r.verbosity >= 0)
        kc_analytics_summary(an, stderr);
    if (r.stats && keyer_session_write_stats(s, r.stats, &err)) {
        fprintf(stderr, "keyer: %s\n", err.message);
        rc = rc ? rc : 1;
    }
    if (r.trace && keyer_session_write_trace(s, r.trace, &err)) {
        fprintf(stderr, "keyer: %s\n", err.message);
        rc = rc ? rc : 1;
    }
done:
    restore_signals();
    g_session = NULL;
    keyer_session_destroy(&s); /* its threads call the analytics: destroyed after it */
    if (kc_analytics_destroy(&an) && rc == 0)
        rc = 1;
    free_owned(&r);
    return rc;
}
