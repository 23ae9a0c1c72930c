/*
 * keyer batch MANIFEST -o OUTDIR [options]: the main job over a manifest of inputs, one share
 * of it per task (a Slurm array task, or any scheduler's), resumable.
 *
 * The manifest: one input path per line, leading and trailing white space removed; blank
 * lines and lines whose first non-blank character is '#' are skipped (a '#' elsewhere is
 * part of the path). Relative paths are relative to the current directory, as on the main
 * job's command line. Entry i (0-based, counting entries only) belongs to shard i mod N.
 *
 * The shard: --shard K/N (0 <= K < N); without it, from a Slurm job array when
 * SLURM_ARRAY_TASK_ID is set: K = (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) /
 * SLURM_ARRAY_TASK_STEP (step 1 when unset) and N = SLURM_ARRAY_TASK_COUNT, refused unless
 * the array is evenly spaced (MIN + (COUNT - 1) * STEP = MAX); else 0/1 (everything).
 *
 * Outputs: each input's output in OUTDIR is named as `keyer INPUT... -o OUTDIR/` names it
 * (run_output_in_dir: the input's base name and extension, .mov with --alpha); two entries
 * that would write the same output are refused before anything runs, as are names starting
 * with '.', which are kept for temporary files. Each input runs in a session of its own
 * (the same session as `keyer INPUT -o OUTPUT`), into OUTDIR/.STEM.partial.EXT, which is
 * flushed to disk and renamed to OUTDIR/STEM.EXT when the run succeeded. An output that
 * exists is complete and is skipped (-y: done again), so a task stopped by preemption
 * resumes where it stopped; the temporary file of a run that was killed is never taken for
 * an output, and is replaced when its input runs again.
 *
 * The summary (--summary, default OUTDIR/keyer-batch-K-of-N.json), written at the end (also
 * after an interruption, also through a temporary name): the shard, its inputs, the outputs
 * done with their frames and seconds, the skipped outputs, the failed inputs with the
 * reason, the inputs not started, the total frames and seconds. See docs/cluster.md.
 *
 * Exit status: 0 when every input of the shard is done or skipped, 1 when one failed (the
 * others still run), 2 for a usage error, 130 when interrupted (SIGINT, SIGTERM: the input
 * in progress is abandoned and its temporary file removed).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "run.h"

#define PATH_BYTES 4096

/* ---- options ------------------------------------------------------------------------------------ */

typedef struct batch_opts {
    const char *shard;   /* "K/N"; NULL: from the environment */
    const char *summary; /* NULL: OUTDIR/keyer-batch-K-of-N.json */
} batch_opts;

#define OFF(f) offsetof(batch_opts, f)
static const keyer_option batch_options[] = {
    {"shard", "this task's share of the manifest: entries i with i mod N = K (0-based; default "
              "from SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT, else 0/1)",
     OFF(shard), KEYER_OPTION_STRING, 0, 0, 0, NULL, NULL, NULL, "K/N", 0, 0u},
    {"summary", "the task's JSON summary (default OUTDIR/keyer-batch-K-of-N.json)", OFF(summary),
     KEYER_OPTION_STRING, 0, 0, 0, NULL, NULL, NULL, "FILE.json", 0, 0u},
    KEYER_OPTION_END,
};
#undef OFF

static const char usage_text[] =
    "usage: keyer batch MANIFEST -o OUTDIR [--shard K/N] [--summary FILE.json] [options]\n\n"
    "Runs the main job on this task's share of the inputs listed in MANIFEST (one path per\n"
    "line; blank lines and '#' comments skipped). Each output is written under a temporary\n"
    "name in OUTDIR and renamed when complete; outputs that exist are skipped (resume).\n"
    "Every option of the main job applies to each input.\n\n"
    "Options:\n";

static const char usage_footer[] =
    "\nExamples:\n"
    "  keyer batch archive.txt -o out/ --shard 0/4 --blur 16 --device cuda\n"
    "  sbatch --array=0-3 scripts/slurm/keyer-array.sbatch archive.txt out/\n"
    "See docs/cluster.md.\n";

static int batch_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

static int batch_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "keyer batch: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

/* ---- the shard ------------------------------------------------------------------------------------ */

/* A non-negative decimal integer filling all of @p s; -1 if not one. */
static long parse_count(const char *s)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno || *end || v > 1000000000L ? -1 : v;
}

/* --shard K/N. Returns 0, or 2 after printing why not. */
static int parse_shard(const char *s, long *k, long *n)
{
    const char *slash = strchr(s, '/');
    char kbuf[32];
    if (!slash || (size_t)(slash - s) >= sizeof(kbuf))
        return batch_error("--shard %s: expected K/N (0 <= K < N)", s);
    memcpy(kbuf, s, (size_t)(slash - s));
    kbuf[slash - s] = 0;
    *k = parse_count(kbuf);
    *n = parse_count(slash + 1);
    if (*k < 0 || *n < 1 || *k >= *n)
        return batch_error("--shard %s: expected K/N with 0 <= K < N", s);
    return 0;
}

/* The shard of a Slurm array task (see the file comment). Returns 0 (set, or *n = 0 when not
 * in an array), or 2 after printing why not. */
static int shard_from_slurm(long *k, long *n)
{
    *k = 0;
    *n = 0;
    const char *id_s = getenv("SLURM_ARRAY_TASK_ID");
    if (!id_s)
        return 0;
    const char *step_s = getenv("SLURM_ARRAY_TASK_STEP");
    long id = parse_count(id_s), count = parse_count(getenv("SLURM_ARRAY_TASK_COUNT"));
    long min = parse_count(getenv("SLURM_ARRAY_TASK_MIN"));
    long max = parse_count(getenv("SLURM_ARRAY_TASK_MAX"));
    long step = step_s ? parse_count(step_s) : 1;
    if (id < 0 || count < 1 || min < 0 || max < min || step < 1)
        return batch_error("SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT, _MIN, _MAX "
                           "or _STEP is missing or not a number: give --shard K/N");
    if (id < min || (id - min) % step || min + (count - 1) * step != max)
        return batch_error("the Slurm array (task %ld of %ld, %ld-%ld step %ld) is not evenly "
                           "spaced: give --shard K/N",
                           id, count, min, max, step);
    *k = (id - min) / step;
    *n = count;
    return 0;
}

/* ---- the manifest ------------------------------------------------------------------------------- */

typedef enum item_state { ITEM_NOT_STARTED, ITEM_DONE, ITEM_SKIPPED, ITEM_FAILED } item_state;

typedef struct item {
    char *input;
    char *output;
    int line;
    item_state state;
    long long frames;
    double seconds;
    char *reason;
} item;

typedef struct manifest {
    item *items;
    size_t n, cap;
} manifest;

static void manifest_free(manifest *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->items[i].input);
        free(m->items[i].output);
        free(m->items[i].reason);
    }
    free(m->items);
    memset(m, 0, sizeof(*m));
}

static char *dup_text(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* Reads @p path (format in the file comment). Returns 0, or 1 after printing why not. */
static int manifest_read(const char *path, manifest *m)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "keyer batch: %s: %s\n", path, strerror(errno));
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0, rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        char *s = line, *e = line + len;
        while (s < e && (*s == ' ' || *s == '\t'))
            s++;
        while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
            e--;
        *e = 0;
        if (!*s || *s == '#')
            continue;
        if (strlen(s) >= PATH_BYTES) {
            fprintf(stderr, "keyer batch: %s:%d: path too long\n", path, lineno);
            rc = 1;
            break;
        }
        if (m->n == m->cap) {
            size_t nc = m->cap ? 2 * m->cap : 64;
            item *ni = realloc(m->items, nc * sizeof(*ni));
            if (!ni) {
                rc = 1;
                fprintf(stderr, "keyer batch: %s: out of memory\n", path);
                break;
            }
            m->items = ni;
            m->cap = nc;
        }
        item *it = &m->items[m->n];
        memset(it, 0, sizeof(*it));
        it->line = lineno;
        if (!(it->input = dup_text(s))) {
            rc = 1;
            fprintf(stderr, "keyer batch: %s: out of memory\n", path);
            break;
        }
        m->n++;
    }
    if (!rc && ferror(f)) {
        fprintf(stderr, "keyer batch: %s: read error\n", path);
        rc = 1;
    }
    free(line);
    fclose(f);
    if (!rc && m->n == 0) {
        fprintf(stderr, "keyer batch: %s: no inputs listed\n", path);
        rc = 1;
    }
    return rc;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int by_output(const void *a, const void *b)
{
    const item *x = *(const item *const *)a, *y = *(const item *const *)b;
    int c = strcmp(x->output, y->output);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* Names every entry's output (all of them, so that every task refuses the same manifest)
 * and refuses names kept for temporary files and outputs written twice. Returns 0, or 1
 * after printing why not. */
static int plan_outputs(const run_opts *r, const char *mpath, manifest *m, const char *summary)
{
    char buf[PATH_BYTES];
    for (size_t i = 0; i < m->n; i++) {
        item *it = &m->items[i];
        const char *in = it->input;
        if (!strcmp(in, "-") || strchr(base_name(in), '%') || strstr(in, "://")) {
            fprintf(stderr, "keyer batch: %s:%d: %s: batch inputs are files (not \"-\", URLs "
                            "or numbered pictures)\n", mpath, it->line, in);
            return 1;
        }
        if (run_output_in_dir(r, r->output, in, buf, sizeof(buf)) ||
            strlen(buf) + 16 >= sizeof(buf)) {
            fprintf(stderr, "keyer batch: %s:%d: output path too long for %s\n", mpath, it->line,
                    in);
            return 1;
        }
        if (base_name(buf)[0] == '.' || !base_name(buf)[0]) {
            fprintf(stderr, "keyer batch: %s:%d: %s: outputs named with a leading '.' are "
                            "kept for temporary files\n", mpath, it->line, in);
            return 1;
        }
        if (!strcmp(buf, in) || !strcmp(buf, summary)) {
            fprintf(stderr, "keyer batch: %s:%d: %s: its output %s would overwrite %s\n", mpath,
                    it->line, in, buf, !strcmp(buf, in) ? "the input" : "the summary");
            return 1;
        }
        if (!(it->output = dup_text(buf))) {
            fprintf(stderr, "keyer batch: out of memory\n");
            return 1;
        }
    }
    const item **order = malloc(m->n * sizeof(*order));
    if (!order) {
        fprintf(stderr, "keyer batch: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < m->n; i++)
        order[i] = &m->items[i];
    qsort(order, m->n, sizeof(*order), by_output);
    int rc = 0;
    for (size_t i = 1; i < m->n && !rc; i++) {
        const item *a = order[i - 1], *b = order[i];
        if (!strcmp(a->output, b->output)) {
            fprintf(stderr, "keyer batch: %s: lines %d (%s) and %d (%s) would both write %s\n",
                    mpath, a->line, a->input, b->line, b->input, a->output);
            rc = 1;
        }
    }
    free(order);
    return rc;
}

/* ---- one input ---------------------------------------------------------------------------------- */

/* OUTDIR/.STEM.partial.EXT for OUTDIR/STEM.EXT. */
static void temp_name(const char *out, char *tmp, size_t n)
{
    const char *b = base_name(out);
    const char *dot = strrchr(b, '.');
    int stem = dot ? (int)(dot - b) : (int)strlen(b);
    snprintf(tmp, n, "%.*s.%.*s.partial%s", (int)(b - out), out, stem, b, dot ? dot : "");
}

static int file_exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* Flushes @p path (a file, or with @p dir a directory) to disk; 0 or -1 with errno set. */
static int sync_path(const char *path, int dir)
{
    int fd = open(path, dir ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void set_reason(item *it, const char *why)
{
    free(it->reason);
    it->reason = dup_text(why);
}

/* Runs @p it into its temporary file and renames it. Returns run_execute's status. */
static int run_item(run_opts *r, const kc_analytics_opts *ao, item *it)
{
    char tmp[PATH_BYTES];
    temp_name(it->output, tmp, sizeof(tmp));
    if (unlink(tmp) && errno != ENOENT) {
        char why[PATH_BYTES + 128];
        snprintf(why, sizeof(why), "cannot remove the old temporary file %s: %s", tmp,
                 strerror(errno));
        set_reason(it, why);
        it->state = ITEM_FAILED;
        return 1;
    }
    r->inputs[0] = it->input;
    r->ninputs = 1;
    const char *outs[1] = {tmp};
    run_result res;
    double t0 = now_seconds();
    int rc = run_execute(r, ao, outs, &res);
    it->seconds = now_seconds() - t0;
    it->frames = res.frames;
    if (rc == 0 && (sync_path(tmp, 0) || rename(tmp, it->output))) {
        char why[PATH_BYTES + 128];
        snprintf(why, sizeof(why), "cannot move %s to its name: %s", tmp, strerror(errno));
        set_reason(it, why);
        rc = 1;
    } else if (rc) {
        set_reason(it, res.reason[0] ? res.reason : "failed");
    }
    if (rc) {
        unlink(tmp);
        it->state = ITEM_FAILED;
        return rc;
    }
    /* the rename itself reaches the disk with the directory */
    char dir[PATH_BYTES];
    const char *b = base_name(it->output);
    snprintf(dir, sizeof(dir), "%.*s", b > it->output ? (int)(b - it->output) : 1,
             b > it->output ? it->output : ".");
    sync_path(dir, 1);
    it->state = ITEM_DONE;
    return 0;
}

/* ---- the summary ------------------------------------------------------------------------------ */

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* The items of the shard in state @p st as a JSON array named @p name. */
static void json_items(FILE *f, const char *name, const manifest *m, long k, long n,
                       item_state st)
{
    fprintf(f, "  \"%s\": [", name);
    int first = 1;
    for (size_t i = (size_t)k; i < m->n; i += (size_t)n) {
        const item *it = &m->items[i];
        if (it->state != st)
            continue;
        fprintf(f, "%s\n    {\"input\": ", first ? "" : ",");
        first = 0;
        json_string(f, it->input);
        if (st == ITEM_NOT_STARTED) {
            fputc('}', f);
            continue;
        }
        fputs(", \"output\": ", f);
        json_string(f, it->output);
        if (st == ITEM_DONE || st == ITEM_FAILED)
            fprintf(f, ", \"frames\": %lld, \"seconds\": %.3f", it->frames, it->seconds);
        if (st == ITEM_FAILED) {
            fputs(", \"reason\": ", f);
            json_string(f, it->reason ? it->reason : "failed");
        }
        fputc('}', f);
    }
    fprintf(f, "%s]", first ? "" : "\n  ");
}

/* Writes the summary through a temporary name. Returns 0, or 1 after printing why not. */
static int write_summary(const char *path, const char *mpath, const run_opts *r,
                         const manifest *m, long k, long n, double seconds, int interrupted)
{
    char tmp[PATH_BYTES];
    temp_name(path, tmp, sizeof(tmp));
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "keyer batch: %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    long long frames = 0;
    fputs("{\n  \"manifest\": ", f);
    json_string(f, mpath);
    fputs(",\n  \"output_dir\": ", f);
    json_string(f, r->output);
    fprintf(f, ",\n  \"shard\": %ld,\n  \"shards\": %ld,\n", k, n);
    const char *job = getenv("SLURM_JOB_ID");
    if (job) {
        fputs("  \"slurm_job_id\": ", f);
        json_string(f, job);
        fputs(",\n", f);
    }
    fputs("  \"inputs\": [", f);
    for (size_t i = (size_t)k; i < m->n; i += (size_t)n) {
        fputs(i == (size_t)k ? "\n    " : ",\n    ", f);
        json_string(f, m->items[i].input);
        frames += m->items[i].state == ITEM_DONE ? m->items[i].frames : 0;
    }
    fputs((size_t)k < m->n ? "\n  ],\n" : "],\n", f);
    json_items(f, "outputs", m, k, n, ITEM_DONE);
    fputs(",\n", f);
    json_items(f, "skipped", m, k, n, ITEM_SKIPPED);
    fputs(",\n", f);
    json_items(f, "failed", m, k, n, ITEM_FAILED);
    fputs(",\n", f);
    json_items(f, "not_started", m, k, n, ITEM_NOT_STARTED);
    fprintf(f, ",\n  \"interrupted\": %s,\n  \"frames\": %lld,\n  \"seconds\": %.3f\n}\n",
            interrupted ? "true" : "false", frames, seconds);
    int bad = ferror(f);
    if (fclose(f) || bad || rename(tmp, path)) {
        fprintf(stderr, "keyer batch: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return 1;
    }
    return 0;
}

/* ---- the command ---------------------------------------------------------------------------------- */

/* Checks what batch mode cannot do and settles the options. Returns 0 or 2 (printed). */
static int settle(run_opts *r, kc_analytics_opts *ao)
{
    if (r->ninputs != 1)
        return batch_error(r->ninputs ? "give one manifest (the inputs are listed in it)"
                                      : "no manifest given (see keyer batch --help)");
    if (!r->output)
        return batch_error("no output directory given (-o OUTDIR)");
    if (r->stats || r->trace || r->export_path)
        return batch_error("--stats, --trace and --export would be written over by every input: "
                           "not available in batch mode");
    return run_settle(r, ao);
}

int keyer_cmd_batch(int argc, char **argv)
{
    run_opts r;
    kc_analytics_opts ao;
    batch_opts b = {NULL, NULL};
    manifest m = {NULL, 0, 0};
    run_opts_init(&r);
    run_command cmd = {"keyer batch", batch_options, &b, usage_text, usage_footer};
    int rc = run_parse_command(&r, &cmd, argc, argv);
    if (rc == 1) {
        rc = 0; /* help printed */
        goto done;
    }
    if (rc || (rc = settle(&r, &ao)))
        goto done;
    const char *mpath = r.inputs[0];
    long k = 0, n = 1;
    if ((rc = b.shard ? parse_shard(b.shard, &k, &n) : shard_from_slurm(&k, &n)))
        goto done;
    if (n == 0)
        n = 1;
    char summary[PATH_BYTES];
    size_t dl = strlen(r.output);
    snprintf(summary, sizeof(summary), "%s%skeyer-batch-%ld-of-%ld.json", r.output,
             dl && r.output[dl - 1] == '/' ? "" : "/", k, n);
    if (b.summary)
        snprintf(summary, sizeof(summary), "%s", b.summary);
    rc = 1;
    if (manifest_read(mpath, &m) || plan_outputs(&r, mpath, &m, summary))
        goto done;
    if (run_make_dir(r.output)) {
        fprintf(stderr, "keyer batch: cannot create the output directory %s: %s\n", r.output,
                strerror(errno));
        goto done;
    }
    size_t mine = m.n > (size_t)k ? (m.n - (size_t)k + (size_t)n - 1) / (size_t)n : 0;
    if (r.verbosity >= 0)
        fprintf(stderr, "keyer batch: shard %ld/%ld: %zu of the %zu inputs of %s\n", k, n, mine,
                m.n, mpath);
    double t0 = now_seconds();
    int failed = 0, interrupted = 0;
    size_t pos = 0;
    for (size_t i = (size_t)k; i < m.n && !interrupted; i += (size_t)n) {
        item *it = &m.items[i];
        pos++;
        if (r.overwrite != 1 && file_exists(it->output)) {
            it->state = ITEM_SKIPPED;
            if (r.verbosity >= 0)
                fprintf(stderr, "keyer batch: [%zu/%zu] %s: done before, skipped\n", pos, mine,
                        it->output);
            continue;
        }
        if (r.verbosity >= 0)
            fprintf(stderr, "keyer batch: [%zu/%zu] %s -> %s\n", pos, mine, it->input,
                    it->output);
        int st = run_item(&r, &ao, it);
        if (st == 130)
            interrupted = 1;
        else if (st) {
            failed++;
            fprintf(stderr, "keyer batch: %s: failed: %s\n", it->input, it->reason);
        }
    }
    rc = write_summary(summary, mpath, &r, &m, k, n, now_seconds() - t0, interrupted);
    if (interrupted)
        rc = 130;
    else if (failed)
        rc = 1;
    if (r.verbosity >= 0 && !interrupted)
        fprintf(stderr, "keyer batch: shard %ld/%ld finished, %d failed; summary in %s\n", k, n,
                failed, summary);
done:
    manifest_free(&m);
    run_opts_free(&r);
    return rc;
}
