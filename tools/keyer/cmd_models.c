/*
 * keyer models: the shipped models, their files, sizes and what they output; or, given model
 * files (TFLite or ONNX), each file's inputs, outputs (the graph's shape, and the file's own
 * where it differs: NCHW for ONNX images) and operators.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "keyer/keyer.h"
#include "keyer/nn.h"

static const char *task_name(keyer_model_task t)
{
    switch (t) {
    case KEYER_TASK_SEGMENTATION: return "segmentation";
    case KEYER_TASK_FACE_DETECTION: return "face detection";
    case KEYER_TASK_POSE_LANDMARKS: return "pose landmarks";
    case KEYER_TASK_FACE_LANDMARKS: return "face landmarks";
    case KEYER_TASK_POSE_DETECTION: return "pose detection";
    }
    return "?";
}

#define MAX_FILES 16

typedef struct models_args {
    int verbose;
    kc_size size; /* --input-size */
    const char *files[MAX_FILES];
    int n_files;
} models_args;

static int add_file(const kc_args *a, const char *arg)
{
    models_args *m = a->opaque;
    if (m->n_files == MAX_FILES)
        return kc_usage_error(a, "at most 16 model files");
    m->files[m->n_files++] = arg;
    return 0;
}

static void print_dims(const char *label, int rank, const int *dims)
{
    printf("%s[", label);
    for (int d = 0; d < rank; d++)
        printf("%s%d", d ? "," : "", dims[d]);
    printf("]");
}

static void print_tensor(const char *what, int index, const keyer_tensor_info *info)
{
    printf("    %s %d %-28s ", what, index, info->name);
    print_dims("", info->rank, info->dims);
    int same = 1;
    for (int d = 0; d < info->rank; d++)
        same &= info->file_perm[d] == d;
    if (!same)
        print_dims("  file ", info->file_rank, info->file_dims);
    printf("%s\n", info->dtype == KEYER_DTYPE_I32 ? "  int32" : "");
}

/* One model file: inputs, outputs, operator counts. Returns 0 or 1. */
static int describe_file(const char *path, const models_args *args)
{
    keyer_error err = {0};
    keyer_model *m = NULL;
    keyer_model_load_params lp = keyer_model_load_params_defaults();
    lp.height = args->size.height;
    lp.width = args->size.width;
    if (keyer_model_load_file_params(path, &lp, &m, &err)) {
        fprintf(stderr, "keyer models: %s\n", err.message);
        return 1;
    }
    printf("%s\n    %d operators, %.1f M multiply-adds, %.2f MB float32 weights\n", path,
           keyer_model_node_count(m), (double)keyer_model_macs(m) / 1e6,
           (double)keyer_model_weight_bytes(m) / 1e6);
    keyer_tensor_info info;
    for (int i = 0; i < keyer_model_input_count(m); i++)
        if (!keyer_model_input_info(m, i, &info, NULL))
            print_tensor("input ", i, &info);
    for (int o = 0; o < keyer_model_output_count(m); o++)
        if (!keyer_model_output_info(m, o, &info, NULL))
            print_tensor("output", o, &info);
    /* Operator counts, in order of first appearance. */
    int n = keyer_model_node_count(m);
    const char *names[64];
    int counts[64], kinds = 0;
    for (int i = 0; i < n; i++) {
        const char *op = keyer_model_node_op_name(m, i);
        int k = 0;
        while (k < kinds && strcmp(names[k], op) != 0)
            k++;
        if (k == kinds && kinds < 64) {
            names[kinds] = op;
            counts[kinds++] = 0;
        }
        if (k < kinds)
            counts[k]++;
    }
    printf("    operators:");
    for (int k = 0; k < kinds; k++)
        printf(" %s %d%s", names[k], counts[k], k + 1 < kinds ? "," : "");
    printf("\n");
    keyer_model_destroy(&m);
    return 0;
}

static const keyer_option models_options[] = {
    {"verbose", "load each model and print its operations, outputs and weights",
     offsetof(models_args, verbose), KEYER_OPTION_BOOL, 0, 0, 1, NULL, NULL, NULL, NULL, 'v',
     KEYER_OPTION_FLAG_VALUE_OPTIONAL},
    {"input_size", "height and width for an ONNX model file's dynamic input dimensions",
     offsetof(models_args, size), KEYER_OPTION_CUSTOM, 0, 0, 0, NULL, kc_set_size, NULL, "HxW", 0, 0u},
    KC_OPTION_HELP,
    KEYER_OPTION_END,
};

static const char desc_intro[] =
    "\nYour own model: keyer INPUT -o OUTPUT --model FILE.onnx --model-config FILE.yaml\n"
    "(or --model-options K=V,...; a .tflite file works too). The description says what the\n"
    "registry says for a shipped model; its keys (also in the main job's --config file as\n"
    "model_config: FILE.yaml):\n";
static const char desc_example[] =
    "Example (a 21-class DeepLabV3 export):\n"
    "  input: input            # the input tensor's name\n"
    "  size: [513, 513]        # width, height of dynamic dimensions\n"
    "  layout: nchw\n"
    "  range: unit             # pixels in [0,1], then (x - mean) / std per channel\n"
    "  mean: [0.485, 0.456, 0.406]\n"
    "  std: [0.229, 0.224, 0.225]\n"
    "  output: out\n"
    "  output_kind: classes    # softmax over the channel axis\n"
    "  person_class: 15\n"
    "See docs/cli.md (\"Your own model\").\n";

/* "scale 1 offset 0, mean 0.485/0.456/0.406 std 0.229/0.224/0.225" */
static void print_normalisation(const keyer_model_entry *e)
{
    printf("    input: pixel/255 * %g %+g", (double)e->input_scale, (double)e->input_offset);
    if (e->input_std[0] > 0)
        printf(", then (x - mean) / std with mean %g/%g/%g, std %g/%g/%g",
               (double)e->input_mean[0], (double)e->input_mean[1], (double)e->input_mean[2],
               (double)e->input_std[0], (double)e->input_std[1], (double)e->input_std[2]);
    printf(" (%s, %s)", e->layout == KEYER_TENSOR_LAYOUT_NCHW ? "NCHW" : "NHWC",
           e->letterbox ? "letterboxed" : "stretched");
    if (e->mask_output >= 0)
        printf("; mask: output %d, %s", e->mask_output,
               e->mask_is_logit ? "logits" : "a probability");
    printf("\n");
}

int keyer_cmd_models(int argc, char **argv)
{
    models_args args = {0};
    kc_table table = {models_options, &args};
    kc_args a = {
        .prog = "keyer models",
        .tables = &table,
        .ntables = 1,
        .help_tables = 1,
        .usage = "usage: keyer models [-v]\n"
                 "       keyer models [--input-size HxW] FILE.tflite|FILE.onnx ...\n"
                 "Lists the shipped models: name, task, input size, file and whether it is\n"
                 "present; or describes model files: inputs, outputs (the graph's NHWC shape and\n"
                 "the file's own, e.g. NCHW for ONNX) and operators.\n\n",
        .positional = add_file,
        .opaque = &args,
    };
    size_t need = keyer_options_help(keyer_model_desc_options(), NULL, 0) + 1;
    char *keys = malloc(need);
    if (!keys)
        return 1;
    keyer_options_help(keyer_model_desc_options(), keys, need);
    char footer[16384];
    snprintf(footer, sizeof(footer), "%s%s%s", desc_intro, keys, desc_example);
    free(keys);
    a.footer = footer;
    int rc = kc_args_parse(&a, argc, argv);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (args.n_files) {
        int bad = 0;
        for (int i = 0; i < args.n_files; i++)
            bad |= describe_file(args.files[i], &args);
        return bad;
    }
    int verbose = args.verbose;
    int n = 0;
    const keyer_model_entry *e = keyer_registry_list(&n);
    printf("models directory: %s\n", keyer_registry_models_dir());
    int missing = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        keyer_error err = {0};
        int present = keyer_registry_resolve(e[i].name, path, sizeof(path), &err) == KEYER_OK;
        missing += !present;
        printf("%-17s %-15s %3dx%-3d %s%s\n    %s\n", e[i].name, task_name(e[i].task),
               e[i].input_width, e[i].input_height, e[i].file, present ? "" : "  (missing)",
               e[i].description);
        if (!verbose)
            continue;
        print_normalisation(&e[i]);
        if (!present)
            continue;
        keyer_model *m = NULL;
        if (keyer_model_load_file(path, &m, &err)) {
            printf("    cannot load: %s\n", err.message);
            continue;
        }
        printf("    %d operators, %.1f M multiply-adds, %.2f MB float32 weights\n",
               keyer_model_node_count(m), (double)keyer_model_macs(m) / 1e6,
               (double)keyer_model_weight_bytes(m) / 1e6);
        for (int o = 0; o < keyer_model_output_count(m); o++) {
            keyer_tensor_info info;
            if (keyer_model_output_info(m, o, &info, NULL))
                continue;
            printf("    output %d %-28s [", o, info.name);
            for (int d = 0; d < info.rank; d++)
                printf("%s%d", d ? "," : "", info.dims[d]);
            printf("]\n");
        }
        keyer_model_destroy(&m);
    }
    if (missing)
        printf("%d model file(s) missing: run scripts/setup.sh\n", missing);
    return 0;
}
