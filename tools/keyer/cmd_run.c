/*
 * keyer INPUT... -o OUTPUT [options]: the main job. Reads each input, keys the person out
 * (blur, replace, alpha, mask, green screen) through a keyer_session and writes each output
 * with the input's audio. The options (run_options.c) come from option tables: the
 * command's own, then the session's, refinement's and compositing's (any of their fields is
 * a --long-option); a YAML configuration file (--config) uses the same names as keys and the
 * command line wins. Reports: run_report.c. Built only on the public API.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analytics.h"
#include "commands.h"
#include "run.h"

/* ---- outputs ------------------------------------------------------------------------------------- */

static int file_exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

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

int run_output_in_dir(const run_opts *r, const char *dir, const char *in, char *out, size_t n)
{
    const char *b = base_name(in);
    const char *dot = strrchr(b, '.');
    int stem = dot && dot != b ? (int)(dot - b) : (int)strlen(b);
    const char *ext = dot && dot != b ? dot : ".mp4";
    keyer_composite_mode mode = r->sp.composite.mode;
    if (mode == KEYER_COMPOSITE_ALPHA || mode == KEYER_COMPOSITE_ALPHA_PREMULTIPLIED)
        ext = ".mov";
    else if (strstr(in, "://") || !strcmp(in, "-") || strchr(b, '%') || !strncmp(in, "/dev/", 5))
        ext = ".mp4";
    size_t dl = strlen(dir);
    int k = snprintf(out, n, "%s%s%.*s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", stem,
                     b[0] ? b : "stream", ext);
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

int run_make_dir(const char *p)
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

#define PATH_BYTES 4096

/* Chooses each input's output path (@p paths holds those made in a directory) and checks
 * that no output overwrites an input, another output or, without -y, an existing file.
 * Returns 0, or 1 after printing why not. */
static int plan_outputs(const run_opts *r, const char **outs, char (*paths)[PATH_BYTES])
{
    int dir_out = r->output && (r->ninputs > 1 || is_dir(r->output) ||
                                r->output[strlen(r->output) - 1] == '/');
    if (dir_out && run_make_dir(r->output)) {
        fprintf(stderr, "keyer: cannot create the output directory %s: %s\n", r->output,
                strerror(errno));
        return 1;
    }
    for (int i = 0; i < r->ninputs; i++) {
        outs[i] = NULL;
        if (!r->output)
            continue;
        if (dir_out) {
            if (run_output_in_dir(r, r->output, r->inputs[i], paths[i], PATH_BYTES)) {
                fprintf(stderr, "keyer: output path too long for %s\n", r->inputs[i]);
                return 1;
            }
            outs[i] = paths[i];
        } else {
            outs[i] = r->output;
        }
        for (int k = 0; k < i; k++) {
            if (outs[k] && !strcmp(outs[k], outs[i])) {
                fprintf(stderr, "keyer: inputs %s and %s would both write %s\n", r->inputs[k],
                        r->inputs[i], outs[i]);
                return 1;
            }
        }
        if (!strcmp(outs[i], r->inputs[i])) {
            fprintf(stderr, "keyer: %s: the output would overwrite its input\n", outs[i]);
            return 1;
        }
        if (strcmp(outs[i], "-") && !strchr(outs[i], '%') && file_exists(outs[i]) &&
            r->overwrite != 1) {
            fprintf(stderr, "keyer: %s exists (use -y to overwrite%s)\n", outs[i],
                    r->overwrite == 0 ? "; -n was given" : "");
            return 1;
        }
    }
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

/* ---- the session ------------------------------------------------------------------------------------ */

/* Creates the analysers of --detect and hooks them into the session's parameters. */
static keyer_status attach_analytics(run_opts *r, const kc_analytics_opts *ao,
                                     kc_analytics **an, keyer_error *err)
{
    keyer_status st = kc_analytics_create(ao, r->ninputs, r->inputs, an, err);
    if (st)
        return st;
    if (ao->session_pose) {
        r->sp.detect = KEYER_SESSION_DETECT_FACES_FULL; /* the trackers' seeding */
        r->sp.pose = 1;
        r->sp.pose_model = (keyer_pose_model)ao->pose_model;
        r->sp.pose_fn = kc_analytics_pose;
        r->sp.pose_opaque = *an;
    } else if (ao->session_detect) {
        r->sp.detect = ao->full_range ? KEYER_SESSION_DETECT_FACES_FULL : KEYER_SESSION_DETECT_FACES;
        if (ao->session_mesh) {
            r->sp.mesh = 1;
            r->sp.mesh_max_faces = KC_MESH_MAX_FACES;
            r->sp.mesh_detect_interval = KC_MESH_DETECT_INTERVAL;
            r->sp.faces_fn = kc_analytics_faces;
            r->sp.faces_opaque = *an;
        } else {
            r->sp.detect_fn = kc_analytics_detections;
            r->sp.detect_opaque = *an;
        }
    } else {
        r->sp.frame_fn = kc_analytics_frame;
        r->sp.frame_opaque = *an;
    }
    return KEYER_OK;
}

/* Adds every input with its output and the encoder settings. */
static keyer_status add_files(keyer_session *s, const run_opts *r, const char *const *outs,
                              keyer_error *err)
{
    for (int i = 0; i < r->ninputs; i++) {
        keyer_file_stream_params fp = keyer_file_stream_params_defaults();
        fp.input = r->inputs[i];
        fp.output = outs[i];
        fp.copy_streams = !r->no_audio;
        fp.writer.codec = r->codec;
        fp.writer.preset = r->preset;
        fp.writer.quality = r->crf;
        fp.writer.pixel_format = r->pix_fmt;
        fp.writer.format = r->format;
        fp.writer.codec_options = r->codec_options;
        fp.fail_alone = r->ninputs > 1; /* one input that cannot be opened stops no other */
        keyer_status st = keyer_session_add_file(s, &fp, NULL, err);
        if (st)
            return st;
    }
    return KEYER_OK;
}

/* After the run: the exit status of @p st, the summary and the --stats and --trace files. */
static int finish(keyer_session *s, const run_opts *r, const kc_analytics *an, keyer_status st,
                  keyer_error *err, run_result *res)
{
    int rc = 0;
    if (st == KEYER_STATUS_INTERRUPTED) {
        fprintf(stderr, "keyer: interrupted: the outputs hold every frame read before the stop\n");
        rc = 130;
        snprintf(res->reason, sizeof(res->reason), "interrupted");
    } else if (st) {
        fprintf(stderr, "keyer: %s\n", err->message);
        rc = 1;
        snprintf(res->reason, sizeof(res->reason), "%s", err->message);
    }
    keyer_session_report rep;
    keyer_session_get_report(s, &rep);
    res->frames = rep.frames_written;
    /* several inputs: the summary names each failed stream, even when nothing was written */
    if (r->verbosity >= 0 && (st == KEYER_OK || rep.frames_written > 0 || r->ninputs > 1))
        run_summary(s, r, stderr);
    if (an && r->verbosity >= 0)
        kc_analytics_summary(an, stderr);
    if (r->stats && keyer_session_write_stats(s, r->stats, err)) {
        fprintf(stderr, "keyer: %s\n", err->message);
        if (!rc)
            snprintf(res->reason, sizeof(res->reason), "%s", err->message);
        rc = rc ? rc : 1;
    }
    if (r->trace && keyer_session_write_trace(s, r->trace, err)) {
        fprintf(stderr, "keyer: %s\n", err->message);
        if (!rc)
            snprintf(res->reason, sizeof(res->reason), "%s", err->message);
        rc = rc ? rc : 1;
    }
    return rc;
}

int run_execute(run_opts *r, const kc_analytics_opts *ao, const char *const *outs,
                run_result *res)
{
    run_result own;
    if (!res)
        res = &own;
    memset(res, 0, sizeof(*res));
    int rc = 1;
    keyer_error err = {0};
    keyer_session *s = NULL;
    kc_analytics *an = NULL;
    run_progress ps = {0, 0};
    ps.enabled = r->verbosity >= 0 && (r->progress == 1 || (r->progress == -1 && isatty(2)));
    keyer_logger lg = run_logger(&ps, r->verbosity);
    r->sp.logger = &lg;
    r->sp.progress = run_on_progress;
    r->sp.progress_opaque = &ps;
    if (r->trace && r->sp.trace_events == 0)
        r->sp.trace_events = 1 << 20;
    if (r->sp.expected_files == 0) /* decode_segments -1 decides by it */
        r->sp.expected_files = r->ninputs;
    if ((r->detect && attach_analytics(r, ao, &an, &err)) ||
        keyer_session_create(&r->sp, &s, &err)) {
        fprintf(stderr, "keyer: %s\n", err.message);
        snprintf(res->reason, sizeof(res->reason), "%s", err.message);
        goto done;
    }
    g_session = s;
    install_signals();
    if (add_files(s, r, outs, &err)) {
        fprintf(stderr, "keyer: %s\n", err.message);
        snprintf(res->reason, sizeof(res->reason), "%s", err.message);
        goto done;
    }
    keyer_status st = keyer_session_run(s, &err);
    if (ps.drawn)
        fputc('\n', stderr);
    ps.enabled = 0;
    rc = finish(s, r, an, st, &err, res);
done:
    restore_signals();
    g_session = NULL;
    keyer_session_destroy(&s); /* its threads call the analytics: destroyed after it */
    if (kc_analytics_destroy(&an) && rc == 0) {
        rc = 1;
        snprintf(res->reason, sizeof(res->reason), "the --export file was not written completely");
    }
    return rc;
}

int keyer_cmd_run(int argc, char **argv)
{
    run_opts r;
    kc_analytics_opts ao;
    run_opts_init(&r);
    int rc = run_parse(&r, argc, argv);
    if (rc == 0)
        rc = run_settle(&r, &ao);
    if (rc == 0) {
        static char paths[RUN_MAX_INPUTS][PATH_BYTES];
        const char *outs[RUN_MAX_INPUTS];
        rc = plan_outputs(&r, outs, paths) ? 1 : run_execute(&r, &ao, outs, NULL);
    } else if (rc == 1) {
        rc = 0; /* help printed */
    }
    run_opts_free(&r);
    return rc;
}
