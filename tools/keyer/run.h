/*
 * The main job (keyer INPUT... -o OUTPUT [options]), in three files:
 *   run_options.c  its options: one table over run_opts followed by the library's session,
 *                  refinement and compositing tables, the configuration file, and what the
 *                  options imply (matte edges, analytics);
 *   run_report.c   the progress bar, the log lines and the summary;
 *   cmd_run.c      the command: outputs, signals, the session.
 */
#ifndef KEYER_TOOLS_RUN_H
#define KEYER_TOOLS_RUN_H

#include <stdio.h>

#include "analytics.h"
#include "keyer/keyer.h"

#define RUN_MAX_INPUTS 64

/* What the command line and the configuration file set. */
typedef struct run_opts {
    const char *inputs[RUN_MAX_INPUTS];
    int ninputs;
    const char *output;
    const char *config;
    const char *stats;
    const char *trace;
    const char *codec, *preset, *pix_fmt, *format, *codec_options;
    int crf;         /* -1: the encoder's default */
    int overwrite;   /* 1: -y, 0: -n, -1: ask nothing, refuse (default) */
    int verbosity;   /* -1 quiet, 0 normal, 1 verbose, 2 debug */
    int progress;    /* -1 auto (a terminal), 0 off, 1 on */
    int no_audio;
    float threshold; /* < 0: keep the refine defaults */
    float softness;  /* < 0: keep */
    float smooth;    /* < 0: keep */
    keyer_session_params sp;
    int effect_set;  /* an effect option was given (else --detect alone draws on the input) */
    const char *detect, *draw, *export_path;
    /* the model's description (--model-config, --model-options), made by run_settle */
    const char *model_config;
    const char *model_options[16];
    int nmodel_options;
    keyer_model_desc model_desc;
    /* strings from the configuration file live here until the run ends */
    char *owned[256];
    int nowned;
} run_opts;

/* Starts @p r with the defaults (the session's, and "not given" for the rest). */
void run_opts_init(run_opts *r);

/* Frees the strings kept from the configuration file. */
void run_opts_free(run_opts *r);

/* Reads the command line and the configuration file it names (--config; the command line
 * wins). Returns 0, 1 when help was printed, 2 after printing a usage error. */
int run_parse(run_opts *r, int argc, char **argv);

/* A command built on the main job's options (keyer batch): its own option table, searched
 * before the main job's, and its usage text. */
typedef struct run_command {
    const char *prog;            /* "keyer batch": starts messages of the option parser */
    const keyer_option *options; /* the command's own options, written into obj */
    void *obj;
    const char *usage, *footer;  /* --help: before and after the option list */
} run_command;

/* run_parse for command @p cmd (NULL: the main job): cmd's options, then the main job's,
 * the configuration file as run_parse reads it; positional arguments go to r->inputs.
 * --help lists cmd's options and the main job's. Returns 0, 1 (help printed) or 2 (usage
 * error printed). */
int run_parse_command(run_opts *r, const run_command *cmd, int argc, char **argv);

/* Applies what the options imply: the matte's edges (--threshold, --softness), temporal
 * smoothing (--smooth), the model's description (--model-config, --model-options) and the
 * analytics (--detect, --draw, --export) into @p ao.
 * Returns 0, or 2 after printing a usage error. */
int run_settle(run_opts *r, kc_analytics_opts *ao);

/* Prints a usage error of the main job and returns 2. */
int run_usage_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* ---- running (cmd_run.c) ---------------------------------------------------------------- */

/* The output path of input @p in when -o names the directory @p dir: the input's base name
 * with its extension (.mov for --alpha/--premultiply; .mp4 for URLs, devices, "-" and
 * numbered pictures; .mp4 when it has none). Returns 0, or -1 when it does not fit in @p n. */
int run_output_in_dir(const run_opts *r, const char *dir, const char *in, char *out, size_t n);

/* Creates directory @p p and its parents (existing ones are fine). Returns 0, or -1 with
 * errno set. */
int run_make_dir(const char *p);

/* What one run did, for callers that keep a record (keyer batch). */
typedef struct run_result {
    long long frames;  /* frames written */
    char reason[512];  /* why it failed ("" when it did not) */
} run_result;

/* Runs one session over r's inputs (settled by run_settle), writing input i to outs[i]
 * (NULL: no file), with the progress bar, the summary and --stats/--trace as the main job
 * prints and writes them; SIGINT and SIGTERM stop it cleanly while it runs. @p res (may be
 * NULL) receives the frames written and the failure. Returns the exit status: 0, 1 (failed),
 * 130 (interrupted). */
int run_execute(run_opts *r, const kc_analytics_opts *ao, const char *const *outs,
                run_result *res);

/* ---- reports (run_report.c) ----------------------------------------------------------- */

/* The progress bar on stderr, drawn by the session's progress callback. */
typedef struct run_progress {
    int enabled;
    int drawn;
} run_progress;

/* A keyer_progress_fn (opaque: a run_progress). */
void run_on_progress(void *opaque, const keyer_session_progress *p);

/* A logger printing each message on its own line below the progress bar. */
keyer_logger run_logger(run_progress *progress, int verbosity);

/* The summary after a run: frames, speed, device and model, each stream; with -v the stages. */
void run_summary(keyer_session *s, const run_opts *r, FILE *f);

#endif
