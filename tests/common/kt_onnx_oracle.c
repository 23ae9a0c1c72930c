/*
 * ONNX models against ONNX Runtime's outputs: see kt_onnx_oracle.h.
 */
#include "kt_onnx_oracle.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define MAX_RANK 8
#define MAX_TENSORS 8
#define U2_SIZE 320
#define U2_SUB_START 3
#define U2_SUB_STEP 8

/* One NAME=FILE:DIMS[:TYPE] entry of the manifest. */
typedef struct tensor_spec {
    const char *name;
    const char *file; /* relative to the onnx data folder */
    int rank;
    int dims[MAX_RANK];
    size_t count;
} tensor_spec;

/* Parses "NAME=FILE:D0xD1x..[:TYPE]" in place. Returns 0 on success. */
static int parse_spec(char *tok, tensor_spec *t)
{
    char *eq = strchr(tok, '=');
    if (!eq)
        return -1;
    *eq = 0;
    t->name = tok;
    t->file = eq + 1;
    char *colon = strchr(eq + 1, ':');
    if (!colon)
        return -1;
    *colon = 0;
    char *dims = colon + 1;
    char *type = strchr(dims, ':');
    if (type)
        *type = 0;
    t->rank = 0;
    t->count = 1;
    if (strcmp(dims, "scalar") == 0)
        return 0;
    for (char *p = dims; *p;) {
        char *end = NULL;
        long d = strtol(p, &end, 10);
        if (end == p || d < 0 || d > 1 << 20 || t->rank == MAX_RANK)
            return -1;
        t->dims[t->rank++] = (int)d;
        t->count *= (size_t)d;
        p = *end == 'x' ? end + 1 : end;
        if (*end && *end != 'x')
            return -1;
    }
    return 0;
}

/* The next @p sep-separated token of *@p at (NUL-terminated in place; empty tokens skipped),
 * advancing *@p at; NULL at the end. */
static char *next_token(char **at, char sep)
{
    char *p = *at;
    while (*p == sep)
        p++;
    if (!*p)
        return NULL;
    char *end = strchr(p, sep);
    if (end) {
        *end = 0;
        *at = end + 1;
    } else {
        *at = p + strlen(p);
    }
    return p;
}

/* Splits @p s at spaces into up to MAX_TENSORS specs. Returns the count or -1. */
static int parse_specs(char *s, tensor_spec *out)
{
    int n = 0;
    for (char *tok = next_token(&s, ' '); tok; tok = next_token(&s, ' ')) {
        if (n == MAX_TENSORS || parse_spec(tok, &out[n]))
            return -1;
        n++;
    }
    return n;
}

static const tensor_spec *find_spec(const tensor_spec *s, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s[i].name, name) == 0)
            return &s[i];
    return NULL;
}

/* Reads a raw float32 file of exactly @p count elements (relative to the onnx data folder). */
static float *read_f32(const char *rel, size_t count)
{
    char path[1024], full[1200];
    snprintf(full, sizeof(full), "onnx/%s", rel);
    kt_data_path(path, sizeof(path), full);
    size_t size = 0, n = 0, len = strlen(rel);
    float *data;
    if (len > 4 && !strcmp(rel + len - 4, ".f16")) { /* exact binary16 values (PROVENANCE.md) */
        data = kt_read_f16_file(path, &n);
        size = n * sizeof(float);
    } else {
        data = kt_read_file(path, &size);
    }
    if (data && size != count * sizeof(float)) {
        printf("    %s: %zu bytes, expected %zu\n", path, size, count * sizeof(float));
        free(data);
        return NULL;
    }
    if (!data)
        printf("    %s: cannot read\n", path);
    return data;
}

/* Whether keyer's file-layout description at runtime batch @p batch (dimension 0 times the
 * batch) matches the manifest's shape. */
static int same_shape(const keyer_tensor_info *info, int batch, const tensor_spec *s)
{
    if (info->file_rank != s->rank)
        return 0;
    for (int d = 0; d < s->rank; d++)
        if (info->file_dims[d] * (d == 0 ? batch : 1) != s->dims[d])
            return 0;
    return 1;
}

static void shape_str(char *buf, size_t n, int rank, const int *dims, int batch)
{
    size_t at = 0;
    buf[0] = 0;
    for (int d = 0; d < rank && at < n; d++)
        at += (size_t)snprintf(buf + at, n - at, d ? "x%d" : "%d", dims[d] * (d ? 1 : batch));
    if (rank == 0)
        snprintf(buf, n, "scalar");
}

/* Differences of @p n values: largest absolute, largest scaled (|d| / max(1, |ref|)), mean
 * absolute; NaN anywhere makes them infinite. */
typedef struct diff_stats {
    double max_abs, max_scaled, mean_abs;
    size_t worst;
} diff_stats;

static diff_stats compare(const float *got, const float *ref, size_t n)
{
    diff_stats s = {0, 0, 0, 0};
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)ref[i]);
        if (isnan(d))
            d = INFINITY;
        double scaled = d / fmax(1.0, fabs((double)ref[i]));
        if (scaled > s.max_scaled) {
            s.max_scaled = scaled;
            s.worst = i;
        }
        if (d > s.max_abs)
            s.max_abs = d;
        sum += d;
    }
    s.mean_abs = n ? sum / (double)n : 0;
    return s;
}

/* Output @p index of @p rt in the file's layout as float32 (int32 outputs converted).
 * Returns malloc'd memory or NULL (message printed). */
static float *output_file_layout(keyer_runtime *rt, const keyer_model *model, int index,
                                 int batch, keyer_tensor_info *info)
{
    keyer_error err = {0};
    if (keyer_model_output_info(model, index, info, &err)) {
        printf("    output %d: %s\n", index, err.message);
        return NULL;
    }
    size_t bytes = keyer_runtime_output_bytes(rt, index);
    size_t count = bytes / sizeof(float);
    float *graph = malloc(bytes ? bytes : 1);
    float *file = malloc(bytes ? bytes : 1);
    if (!graph || !file)
        goto fail;
    if (keyer_runtime_get_output(rt, index, graph, bytes, &err) ||
        keyer_tensor_to_file_layout(info, batch, graph, file, &err)) {
        printf("    output '%s': %s\n", info->name, err.message);
        goto fail;
    }
    if (info->dtype == KEYER_DTYPE_I32) {
        const int32_t *iv = (const int32_t *)(const void *)file;
        for (size_t i = 0; i < count; i++) {
            int32_t v;
            memcpy(&v, &iv[i], sizeof(v));
            graph[i] = (float)v;
        }
        memcpy(file, graph, bytes);
    }
    free(graph);
    return file;
fail:
    free(graph);
    free(file);
    return NULL;
}

/* Loads inputs from specs (file layout) into @p rt. Returns 0 or -1 (message printed). */
static int set_inputs(keyer_runtime *rt, const keyer_model *model, int batch,
                      const tensor_spec *ins, int n_ins)
{
    keyer_error err = {0};
    int n = keyer_model_input_count(model);
    if (n != n_ins) {
        printf("    the model has %d input(s), the manifest %d\n", n, n_ins);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        keyer_tensor_info info;
        if (keyer_model_input_info(model, i, &info, &err)) {
            printf("    input %d: %s\n", i, err.message);
            return -1;
        }
        const tensor_spec *s = find_spec(ins, n_ins, info.name);
        char a[96], b[96];
        shape_str(a, sizeof(a), info.file_rank, info.file_dims, batch);
        if (!s) {
            printf("    input '%s' (%s) is not in the manifest\n", info.name, a);
            return -1;
        }
        shape_str(b, sizeof(b), s->rank, s->dims, 1);
        size_t bytes = keyer_runtime_input_bytes(rt, i);
        if (!same_shape(&info, batch, s) || bytes != s->count * sizeof(float)) {
            printf("    input '%s': keyer's shape %s (%zu bytes), ONNX Runtime's %s\n", info.name, a,
                   bytes, b);
            return -1;
        }
        float *src = read_f32(s->file, s->count);
        float *dst = malloc(bytes ? bytes : 1);
        int bad = !src || !dst;
        if (!bad && (keyer_tensor_to_graph_layout(&info, batch, src, dst, &err) ||
                     keyer_runtime_set_input(rt, i, dst, bytes, &err))) {
            printf("    input '%s': %s\n", info.name, err.message);
            bad = 1;
        }
        free(src);
        free(dst);
        if (bad)
            return -1;
    }
    return 0;
}

static keyer_status create_runtime(const keyer_model *model, const kt_onnx_target *t, int batch,
                                   keyer_runtime **rt, keyer_error *err)
{
    keyer_runtime_params p = keyer_runtime_params_defaults();
    p.backend = t->backend;
    p.precision = t->precision;
    p.batch = batch;
    p.threads = t->threads;
    return keyer_runtime_create(model, &p, rt, err);
}

/* Runs one manifest case; returns 0 (pass or not compared), 1 (fail). */
static int run_case(const kt_onnx_target *t, char **f)
{
    const char *name = f[0];
    double tol = t->tol;
    if (t->f16_cases) {
        if (strcmp(f[5], "-") == 0) {
            printf("  %-48s not compared in f16 (manifest)\n", name);
            return 0;
        }
        tol = atof(f[5]);
    }
    if (strcmp(f[6], "-") != 0)
        tol = fmax(tol, atof(f[6]));
    tensor_spec ins[MAX_TENSORS], outs[MAX_TENSORS];
    int n_ins = parse_specs(f[3], ins), n_outs = parse_specs(f[4], outs);
    if (n_ins < 1 || n_outs < 1) {
        printf("  %-48s FAIL: bad manifest line\n", name);
        return 1;
    }
    keyer_model_load_params lp = keyer_model_load_params_defaults();
    if (strcmp(f[7], "-") != 0 && sscanf(f[7], "%dx%d", &lp.height, &lp.width) != 2) {
        printf("  %-48s FAIL: bad size column '%s'\n", name, f[7]);
        return 1;
    }
    char rel[600], path[1024];
    snprintf(rel, sizeof(rel), "onnx/%s", f[1]);
    kt_data_path(path, sizeof(path), rel);

    keyer_error err = {0};
    keyer_model *model = NULL;
    keyer_runtime *rt = NULL;
    int failed = 0;
    if (keyer_model_load_file_params(path, &lp, &model, &err)) {
        printf("  %-48s FAIL: load: %s\n", name, err.message);
        return 1;
    }
    /* A batch > 1 in the manifest is the runtime's batch: keyer's graph is per item (the
     * generator made such models' first dimension dynamic). */
    int batch = 1;
    keyer_tensor_info in0;
    if (keyer_model_input_info(model, 0, &in0, &err) == KEYER_OK && in0.file_rank >= 1 &&
        in0.file_dims[0] > 0 && ins[0].rank >= 1 && ins[0].dims[0] % in0.file_dims[0] == 0)
        batch = ins[0].dims[0] / in0.file_dims[0];
    if (batch < 1)
        batch = 1;
    if (create_runtime(model, t, batch, &rt, &err)) {
        printf("  %-48s FAIL: runtime (batch %d): %s\n", name, batch, err.message);
        keyer_model_destroy(&model);
        return 1;
    }
    if (set_inputs(rt, model, batch, ins, n_ins) || keyer_runtime_run(rt, &err)) {
        printf("  %-48s FAIL: %s\n", name, err.status ? err.message : "inputs (above)");
        failed = 1;
        goto done;
    }
    int n = keyer_model_output_count(model);
    if (n != n_outs) {
        printf("  %-48s FAIL: %d output(s), ONNX Runtime has %d\n", name, n, n_outs);
        failed = 1;
        goto done;
    }
    for (int j = 0; j < n; j++) {
        keyer_tensor_info info;
        float *got = output_file_layout(rt, model, j, batch, &info);
        if (!got) {
            printf("  %-48s FAIL: output %d (above)\n", name, j);
            failed = 1;
            continue;
        }
        const tensor_spec *s = find_spec(outs, n_outs, info.name);
        char a[96], b[96];
        shape_str(a, sizeof(a), info.file_rank, info.file_dims, batch);
        size_t bytes = keyer_runtime_output_bytes(rt, j);
        if (!s || !same_shape(&info, batch, s) || bytes != s->count * sizeof(float)) {
            if (s)
                shape_str(b, sizeof(b), s->rank, s->dims, 1);
            printf("  %-48s FAIL: output '%s' %s, ONNX Runtime's %s\n", name, info.name, a,
                   s ? b : "has no output of that name");
            failed = 1;
            free(got);
            continue;
        }
        float *ref = read_f32(s->file, s->count);
        if (!ref) {
            failed = 1;
            free(got);
            continue;
        }
        diff_stats d = compare(got, ref, s->count);
        int ok = d.max_scaled <= tol;
        printf("  %-48s %-8s %-10s max |d| %.3g, scaled %.3g (tol %.3g)%s\n", name, info.name, a,
               d.max_abs, d.max_scaled, tol, ok ? "" : "  FAIL");
        if (!ok) {
            printf("      worst at %zu: keyer %.9g, ONNX Runtime %.9g\n", d.worst,
                   (double)got[d.worst], (double)ref[d.worst]);
            failed = 1;
        }
        free(ref);
        free(got);
    }
done:
    keyer_runtime_destroy(&rt);
    keyer_model_destroy(&model);
    return failed;
}

int kt_onnx_run_ops(const kt_onnx_target *t, int *cases)
{
    char path[1024];
    kt_data_path(path, sizeof(path), "onnx/manifest.tsv");
    size_t size = 0;
    char *text = kt_read_file(path, &size);
    *cases = 0;
    if (!text) {
        printf("%s: cannot read\n", path);
        return -1;
    }
    char *buf = realloc(text, size + 1);
    if (!buf) {
        free(text);
        return -1;
    }
    buf[size] = 0;
    printf("ONNX operator graphs on %s %s (against ONNX Runtime 1.30.0)\n",
           keyer_backend_name(t->backend), keyer_precision_name(t->precision));
    int failed = 0;
    char *at = buf;
    for (char *line = next_token(&at, '\n'); line; line = next_token(&at, '\n')) {
        if (line[0] == '#' || line[0] == 0)
            continue;
        char *f[8];
        int nf = 0;
        for (char *p = line; nf < 8; nf++) {
            f[nf] = p;
            char *tab = strchr(p, '\t');
            if (!tab) {
                nf++;
                break;
            }
            *tab = 0;
            p = tab + 1;
        }
        (*cases)++;
        if (nf != 8) {
            printf("  %s: FAIL: %d columns, expected 8\n", f[0], nf);
            failed++;
            continue;
        }
        failed += run_case(t, f);
    }
    free(buf);
    printf("%s %s: %d of %d cases failed\n", keyer_backend_name(t->backend),
           keyer_precision_name(t->precision), failed, *cases);
    return failed;
}

/* Compares keyer's u2netp output (file layout 1x1x320x320) with ORT's: '1959' in full, the
 * others on the committed grid. Returns failed checks. */
static int check_u2netp_output(const char *photo, const keyer_tensor_info *info, const float *got,
                               const kt_u2netp_limits *lim)
{
    char rel[256];
    int full = strcmp(info->name, "1959") == 0;
    if (info->file_rank != 4 || info->file_dims[0] != 1 || info->file_dims[1] != 1 ||
        info->file_dims[2] != U2_SIZE || info->file_dims[3] != U2_SIZE) {
        printf("  %s '%s': FAIL: not 1x1x320x320\n", photo, info->name);
        return 1;
    }
    size_t n = full ? (size_t)U2_SIZE * U2_SIZE : 40 * 40;
    float *sub = NULL;
    const float *cmp = got;
    if (full) {
        snprintf(rel, sizeof(rel), "u2netp/%s/1959.f32", photo);
    } else {
        snprintf(rel, sizeof(rel), "u2netp/%s/%s_sub8.f32", photo, info->name);
        sub = malloc(n * sizeof(float));
        if (!sub)
            return 1;
        for (int y = 0; y < 40; y++)
            for (int x = 0; x < 40; x++)
                sub[y * 40 + x] = got[(U2_SUB_START + y * U2_SUB_STEP) * U2_SIZE + U2_SUB_START +
                                      x * U2_SUB_STEP];
        cmp = sub;
    }
    float *ref = read_f32(rel, n);
    if (!ref) {
        free(sub);
        return 1;
    }
    diff_stats d = compare(cmp, ref, n);
    size_t agree = 0;
    for (size_t i = 0; i < n; i++)
        agree += (cmp[i] > 0.5f) == (ref[i] > 0.5f);
    double frac = (double)agree / (double)n;
    int bad = 0;
    if (lim->tol > 0 && !(d.max_scaled <= lim->tol))
        bad = 1;
    if (full && lim->mask_agree > 0 && frac < lim->mask_agree)
        bad = 1;
    if (full && lim->mean_abs > 0 && !(d.mean_abs <= lim->mean_abs))
        bad = 1;
    printf("  %-12s %s%s: max |d| %.3g, scaled %.3g, mean |d| %.3g, same side of 0.5: %.4f%%%s\n",
           photo, info->name, full ? "     " : " grid", d.max_abs, d.max_scaled, d.mean_abs,
           100.0 * frac, bad ? "  FAIL" : "");
    free(ref);
    free(sub);
    return bad;
}

int kt_onnx_run_u2netp(const kt_onnx_target *t, const kt_u2netp_limits *lim)
{
    char path[1024];
    kt_model_path(path, sizeof(path), "u2netp.onnx");
    if (!kt_exists(path)) {
        printf("%s is absent (scripts/setup.sh fetches it): u2netp not checked\n", path);
        return -1;
    }
    keyer_error err = {0};
    keyer_model *model = NULL;
    keyer_runtime *rt = NULL;
    int failed = 0;
    printf("u2netp on %s %s against ONNX Runtime 1.30.0 (limits: scaled %.3g, mask %.4g, "
           "mean %.3g)\n",
           keyer_backend_name(t->backend), keyer_precision_name(t->precision), lim->tol,
           lim->mask_agree, lim->mean_abs);
    if (keyer_model_load_file_params(path, NULL, &model, &err) ||
        create_runtime(model, t, 1, &rt, &err)) {
        printf("  FAIL: %s\n", err.message);
        keyer_model_destroy(&model);
        return 1;
    }
    static const char *const photos[] = {"grace_hopper", "messi5"};
    for (int p = 0; p < 2; p++) {
        char rel[256];
        snprintf(rel, sizeof(rel), "u2netp/%s/input.f16", photos[p]);
        tensor_spec in = {"input.1", rel, 4, {1, 3, U2_SIZE, U2_SIZE}, 3 * U2_SIZE * U2_SIZE};
        if (set_inputs(rt, model, 1, &in, 1) || keyer_runtime_run(rt, &err)) {
            printf("  %s: FAIL: %s\n", photos[p], err.status ? err.message : "input (above)");
            failed++;
            continue;
        }
        int n = keyer_model_output_count(model);
        if (n != 7) {
            printf("  %s: FAIL: %d outputs, the model file has 7\n", photos[p], n);
            failed++;
        }
        for (int j = 0; j < n; j++) {
            keyer_tensor_info info;
            float *got = output_file_layout(rt, model, j, 1, &info);
            if (!got) {
                failed++;
                continue;
            }
            failed += check_u2netp_output(photos[p], &info, got, lim);
            free(got);
        }
    }
    keyer_runtime_destroy(&rt);
    keyer_model_destroy(&model);
    return failed;
}
