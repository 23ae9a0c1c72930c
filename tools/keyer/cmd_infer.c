/*
 * keyer infer: runs one model from the command line, for people debugging models and for tests.
 *
 *   keyer infer --model NAME|FILE.tflite|FILE.onnx [--backend reference|cpu|cuda] [--threads N]
 *               [--input-size HxW] (--image PHOTO | --input-tensor FILE.f32 ...) --output-dir DIR
 *
 * --image decodes a photo, stretches it to the model input (bilinear) and normalises it as the
 * registry says; --input-tensor takes raw little-endian float32 input in the model file's own
 * declared shape and layout (NHWC for TFLite, NCHW for ONNX images; repeat for several inputs,
 * in input order). --input-size fixes the dynamic height and width of an ONNX model's inputs.
 * Writes every output in the file's declared shape and layout as DIR/<output name>.f32 (so
 * that ONNX outputs compare one to one with ONNX Runtime's) and DIR/outputs.json. File names:
 * '/', '\' and control characters in an output name become '_', and a name that is empty or
 * starts with '.' gets a '_' in front. Its options come from an option table (args.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "commands.h"
#include "infer_image.h"
#include "keyer/keyer.h"
#include "keyer/nn.h"

#define MAX_INPUT_FILES 8

static int fail(const char *what, const keyer_error *err)
{
    fprintf(stderr, "keyer infer: %s%s%s\n", what, err ? ": " : "", err ? err->message : "");
    return 1;
}

static int read_exact(const char *path, void *dst, size_t bytes)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "keyer infer: %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || (size_t)st.st_size != bytes) {
        fprintf(stderr, "keyer infer: %s: holds %lld bytes but the model input needs %zu\n", path,
                (long long)st.st_size, bytes);
        fclose(f);
        return -1;
    }
    size_t got = fread(dst, 1, bytes, f);
    fclose(f);
    if (got != bytes) {
        fprintf(stderr, "keyer infer: %s: short read\n", path);
        return -1;
    }
    return 0;
}

/* Writes @p bytes to @p path through a temporary file renamed at the end. */
static int write_file(const char *path, const void *data, size_t bytes)
{
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.part", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        fprintf(stderr, "keyer infer: %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    size_t put = fwrite(data, 1, bytes, f);
    if (fclose(f) != 0 || put != bytes || rename(tmp, path) != 0) {
        fprintf(stderr, "keyer infer: cannot write %s: %s\n", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

/* mkdir -p: creates @p dir and its missing parents. */
static int make_dirs(const char *dir)
{
    char buf[4096];
    if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf))
        return -1;
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return (mkdir(buf, 0777) != 0 && errno != EEXIST) ? -1 : 0;
}

typedef struct infer_args {
    const char *model, *image, *outdir;
    const char *tensors[MAX_INPUT_FILES];
    int n_tensors;
    int threads;
    keyer_backend backend;
    kc_size size; /* --input-size */
} infer_args;

/* JSON string body of @p s (quotes, backslashes and control characters escaped). */
static void json_string(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
}

/* --input-tensor, once per model input */
static keyer_status add_tensor(const keyer_option *o, void *obj, const char *value,
                               keyer_error *err)
{
    infer_args *a = obj;
    if (a->n_tensors == MAX_INPUT_FILES)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "option %s: at most %d files (got %s)", o->name, MAX_INPUT_FILES,
                               value);
    a->tensors[a->n_tensors++] = value;
    return KEYER_OK;
}

#define OFF(f) offsetof(infer_args, f)
static const keyer_option infer_options[] = {
    {"model", "registry name (see 'keyer models'), .tflite or .onnx file", OFF(model),
     KEYER_OPTION_STRING, 0, 0, 0, NULL, NULL, NULL, "NAME|FILE", 0, 0u},
    {"backend", "reference, cpu (default) or cuda", OFF(backend), KEYER_OPTION_CUSTOM, 0, 0, 0,
     NULL, kc_set_backend, "cpu", "NAME", 0, 0u},
    {"threads", "CPU threads; 0 = all cores (default 0)", OFF(threads), KEYER_OPTION_INT, 0, 0,
     INT_MAX, NULL, NULL, NULL, "N", 0, 0u},
    {"image", "a photo, stretched to the model input and normalised", OFF(image),
     KEYER_OPTION_STRING, 0, 0, 0, NULL, NULL, NULL, "PHOTO", 0, 0u},
    {"input_tensor", "raw little-endian float32 input in the model's declared shape and layout "
     "(NCHW for ONNX images; once per input, in order)", 0,
     KEYER_OPTION_CUSTOM, 0, 0, 0, NULL, add_tensor, NULL, "FILE.f32", 0, 0u},
    {"input_size", "height and width for an ONNX model's dynamic input dimensions", OFF(size),
     KEYER_OPTION_CUSTOM, 0, 0, 0, NULL, kc_set_size, NULL, "HxW", 0, 0u},
    {"output_dir", "where to write <output name>.f32 and outputs.json", OFF(outdir),
     KEYER_OPTION_STRING, 0, 0, 0, NULL, NULL, NULL, "DIR", 0, 0u},
    KC_OPTION_HELP,
    KEYER_OPTION_END,
};
#undef OFF

int keyer_cmd_infer(int argc, char **argv)
{
    infer_args args;
    memset(&args, 0, sizeof(args));
    args.backend = KEYER_BACKEND_CPU;
    kc_table table = {infer_options, &args};
    kc_args a = {
        .prog = "keyer infer",
        .tables = &table,
        .ntables = 1,
        .help_tables = 1,
        .usage = "usage: keyer infer --model NAME|FILE.tflite|FILE.onnx [--backend reference|cpu|cuda]\n"
                 "                   [--threads N] [--input-size HxW]\n"
                 "                   (--image PHOTO | --input-tensor FILE.f32 ...) --output-dir DIR\n"
                 "Runs one inference and writes every output as DIR/<name>.f32 (raw little-endian\n"
                 "float32 in the model file's declared shape and layout: NCHW for ONNX images)\n"
                 "plus DIR/outputs.json.\n\n",
    };
    int rc = kc_args_parse(&a, argc, argv);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (!args.model || !args.outdir || (!args.image && args.n_tensors == 0) ||
        (args.image && args.n_tensors))
        return kc_usage_error(&a, "--model, --output-dir and either --image or --input-tensor "
                                  "are needed");
    const char *model_name = args.model, *image = args.image, *outdir = args.outdir;
    const char *const *tensors = args.tensors;
    int n_tensors = args.n_tensors;

    keyer_error err = {0};
    keyer_runtime_params params = keyer_runtime_params_defaults();
    params.threads = args.threads;
    params.backend = args.backend;
    char path[4096];
    if (keyer_registry_resolve(model_name, path, sizeof(path), &err))
        return fail("--model", &err);

    rc = 1;
    keyer_model *model = NULL;
    keyer_runtime *rt = NULL;
    float *host = NULL, *file = NULL;
    keyer_model_load_params lp = keyer_model_load_params_defaults();
    lp.height = args.size.height;
    lp.width = args.size.width;
    if (keyer_model_load_file_params(path, &lp, &model, &err) ||
        keyer_runtime_create(model, &params, &rt, &err)) {
        fail(path, &err);
        goto done;
    }
    int n_in = keyer_model_input_count(model);
    if (n_tensors && n_tensors != n_in) {
        fprintf(stderr, "keyer infer: %s has %d input(s) but %d --input-tensor file(s) were given\n",
                path, n_in, n_tensors);
        goto done;
    }
    if (image && n_in != 1) {
        fprintf(stderr, "keyer infer: --image needs a model with one input (%s has %d)\n", path,
                n_in);
        goto done;
    }
    for (int i = 0; i < n_in; i++) {
        size_t bytes = keyer_runtime_input_bytes(rt, i);
        free(host);
        free(file);
        host = malloc(bytes);
        file = malloc(bytes);
        if (!host || !file) {
            fprintf(stderr, "keyer infer: out of memory\n");
            goto done;
        }
        keyer_tensor_info info;
        if (keyer_model_input_info(model, i, &info, &err)) {
            fail("input", &err);
            goto done;
        }
        if (image) {
            if (keyer_infer_image_tensor(image, model_name, &info, host, &err)) {
                fail(image, &err);
                goto done;
            }
        } else if (read_exact(tensors[i], file, bytes)) {
            goto done;
        } else if (keyer_tensor_to_graph_layout(&info, 1, file, host, &err)) {
            fail(tensors[i], &err);
            goto done;
        }
        if (keyer_runtime_set_input(rt, i, host, bytes, &err)) {
            fail("setting the input", &err);
            goto done;
        }
    }
    if (keyer_runtime_run(rt, &err)) {
        fail("inference", &err);
        goto done;
    }
    if (make_dirs(outdir) != 0) {
        fprintf(stderr, "keyer infer: cannot create %s: %s\n", outdir, strerror(errno));
        goto done;
    }
    char json_path[4200];
    snprintf(json_path, sizeof(json_path), "%s/outputs.json", outdir);
    char *json = NULL;
    size_t json_len = 0;
    FILE *js = open_memstream(&json, &json_len);
    if (!js) {
        fprintf(stderr, "keyer infer: out of memory\n");
        goto done;
    }
    fprintf(js, "{\n  \"model\": \"");
    json_string(js, path);
    fprintf(js, "\",\n  \"backend\": \"%s\",\n  \"outputs\": [\n",
            keyer_backend_name(params.backend));
    int n_out = keyer_model_output_count(model);
    int ok = 1;
    for (int o = 0; o < n_out && ok; o++) {
        keyer_tensor_info info;
        size_t bytes = keyer_runtime_output_bytes(rt, o);
        free(host);
        free(file);
        host = malloc(bytes);
        file = malloc(bytes);
        if (!host || !file || keyer_model_output_info(model, o, &info, &err) ||
            keyer_runtime_get_output(rt, o, host, bytes, &err) ||
            keyer_tensor_to_file_layout(&info, 1, host, file, &err)) {
            fail("reading an output", host && file ? &err : NULL);
            ok = 0;
            break;
        }
        if (info.dtype == KEYER_DTYPE_I32) { /* class indices (ArgMax): written as floats */
            int32_t v;
            for (size_t j = 0; j < bytes / sizeof(float); j++) {
                memcpy(&v, &file[j], sizeof(v));
                file[j] = (float)v;
            }
        }
        /* Output names may hold '/' or anything else: keep file names flat and visible. */
        char fname[512];
        snprintf(fname, sizeof(fname), "%s%s.f32",
                 info.name[0] == '\0' || info.name[0] == '.' ? "_" : "", info.name);
        for (char *c = fname; *c; c++)
            if (*c == '/' || *c == '\\' || (unsigned char)*c < 0x20)
                *c = '_';
        char out_path[4700];
        snprintf(out_path, sizeof(out_path), "%s/%s", outdir, fname);
        if (write_file(out_path, file, bytes)) {
            ok = 0;
            break;
        }
        fprintf(js, "    {\"name\": \"");
        json_string(js, info.name);
        fprintf(js, "\", \"file\": \"");
        json_string(js, fname);
        fprintf(js, "\", \"shape\": [");
        for (int d = 0; d < info.file_rank; d++)
            fprintf(js, "%s%d", d ? ", " : "", info.file_dims[d]);
        fprintf(js, "]}%s\n", o + 1 < n_out ? "," : "");
    }
    fprintf(js, "  ]\n}\n");
    fclose(js);
    if (ok && write_file(json_path, json, json_len) == 0) {
        printf("keyer infer: wrote %d output(s) to %s\n", n_out, outdir);
        rc = 0;
    }
    free(json);
done:
    free(host);
    free(file);
    keyer_runtime_destroy(&rt);
    keyer_model_destroy(&model);
    return rc;
}
