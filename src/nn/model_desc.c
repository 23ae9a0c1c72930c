/* Model descriptions (keyer/registry.h): how to feed a segmentation model and read its mask,
 * as one option table for the command line, the YAML file and the checks. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/config.h"
#include "keyer/registry.h"

/* ---- setters --------------------------------------------------------------------------------- */

/* A tensor name into its fixed-size field (input, output). */
static keyer_status set_name(const keyer_option *o, void *obj, const char *value,
                             keyer_error *err)
{
    size_t n = strlen(value);
    if (n >= KEYER_MODEL_DESC_NAME_MAX)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "option %s: a name of %zu bytes (at most %d)", o->name, n,
                               KEYER_MODEL_DESC_NAME_MAX - 1);
    memcpy((char *)obj + o->offset, value, n + 1);
    return KEYER_OK;
}

/* Up to @p max finite numbers separated by commas or slashes (spaces allowed around them);
 * *count gets how many. */
static int parse_floats(const char *text, float *out, int max, int *count)
{
    int n = 0;
    const char *p = text;
    for (;;) {
        while (*p == ' ')
            p++;
        char *end = NULL;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno || !isfinite(v) || fabs(v) > 1e6 || n >= max)
            return -1;
        out[n++] = (float)v;
        p = end;
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        if (*p != ',' && *p != '/') /* '/' inside a K=V,... list of options */
            return -1;
        p++;
    }
    *count = n;
    return 0;
}

/* mean, std: one value for the three channels, or three. */
static keyer_status set_triple(const keyer_option *o, void *obj, const char *value,
                               keyer_error *err)
{
    float v[3];
    int n = 0;
    if (parse_floats(value, v, 3, &n) || n == 2)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "option %s: '%s' is not one number or three separated by commas "
                               "(or slashes)",
                               o->name, value);
    if (!strcmp(o->name, "std"))
        for (int c = 0; c < n; c++)
            if (!(v[c] > 0))
                return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                       "option std: '%s': every value must be above 0", value);
    float *f = (float *)((char *)obj + o->offset);
    for (int c = 0; c < 3; c++)
        f[c] = v[n == 1 ? 0 : c];
    return KEYER_OK;
}

/* size: WxH, W,H or one number for a square. */
static keyer_status set_size(const keyer_option *o, void *obj, const char *value,
                             keyer_error *err)
{
    keyer_model_desc *d = obj;
    char buf[64];
    size_t n = strlen(value);
    float v[2];
    int count = 0;
    if (n < sizeof(buf)) {
        memcpy(buf, value, n + 1);
        char *x = strchr(buf, 'x');
        if (x)
            *x = ',';
        if (!parse_floats(buf, v, 2, &count) && count == 1)
            v[1] = v[0];
    }
    if (n >= sizeof(buf) || count < 1 || v[0] != floorf(v[0]) || v[1] != floorf(v[1]) ||
        v[0] < 1 || v[1] < 1 || v[0] > 16384 || v[1] > 16384)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "option %s: '%s' is not WIDTHxHEIGHT (1..16384 each)", o->name,
                               value);
    d->width = (int)v[0];
    d->height = (int)v[1];
    return KEYER_OK;
}

enum { RANGE_UNIT = 0, RANGE_SIGNED, RANGE_BYTE };

static keyer_status set_range(const keyer_option *o, void *obj, const char *value,
                              keyer_error *err)
{
    keyer_model_desc *d = obj;
    int r = -1;
    for (const keyer_option_choice *c = o->choices; c->name; c++)
        if (!strcmp(c->name, value) || (value[0] >= '0' && value[0] <= '2' && !value[1] &&
                                         c->value == value[0] - '0'))
            r = c->value;
    if (r < 0)
        return keyer_error_set(err, KEYER_STATUS_INTERNAL, "option %s: '%s'", o->name, value);
    d->scale = r == RANGE_UNIT ? 1.0f : r == RANGE_SIGNED ? 2.0f : 255.0f;
    d->offset = r == RANGE_SIGNED ? -1.0f : 0.0f;
    return KEYER_OK;
}

/* ---- the table ------------------------------------------------------------------------------- */

static const keyer_option_choice layout_choices[] = {
    {"nchw", KEYER_TENSOR_LAYOUT_NCHW, "[N,3,H,W] (most ONNX models)"},
    {"nhwc", KEYER_TENSOR_LAYOUT_NHWC, "[N,H,W,3] (TFLite, TensorFlow exports)"},
    {NULL, 0, NULL},
};
static const keyer_option_choice color_choices[] = {
    {"rgb", KEYER_COLOR_RGB, "red, green, blue"},
    {"bgr", KEYER_COLOR_BGR, "blue, green, red (OpenCV, Caffe)"},
    {NULL, 0, NULL},
};
static const keyer_option_choice range_choices[] = {
    {"unit", RANGE_UNIT, "pixels in [0,1] (scale 1, offset 0)"},
    {"signed", RANGE_SIGNED, "pixels in [-1,1] (scale 2, offset -1)"},
    {"byte", RANGE_BYTE, "pixels in [0,255] (scale 255, offset 0)"},
    {NULL, 0, NULL},
};
static const keyer_option_choice fit_choices[] = {
    {"stretch", 0, "stretch the frame over the input"},
    {"letterbox", 1, "keep the frame's aspect ratio, pad the rest"},
    {NULL, 0, NULL},
};
static const keyer_option_choice kind_choices[] = {
    {"probability", KEYER_MASK_PROBABILITY, "the person's probability in [0,1]"},
    {"logits", KEYER_MASK_LOGITS, "logits: a sigmoid is applied"},
    {"alpha", KEYER_MASK_ALPHA, "an alpha matte in [0,1]"},
    {"classes", KEYER_MASK_CLASSES,
     "a score per class (channel axis): softmax, the person_class's probability"},
    {NULL, 0, NULL},
};

#define OFF(f) offsetof(keyer_model_desc, f)
static const keyer_option desc_options[] = {
    {"input", "the input tensor's name (default: the only image input)", OFF(input),
     KEYER_OPTION_CUSTOM, 0, 0, 0, NULL, set_name, NULL, "NAME", 0, 0u},
    {"size", "input size for dynamic dimensions", 0, KEYER_OPTION_CUSTOM, 0, 0, 0, NULL, set_size,
     NULL, "WxH", 0, 0u},
    KEYER_OPTION_FIELD("width", "input width for a dynamic dimension (0: the model's)",
        OFF(width), KEYER_OPTION_INT, 0, 0, 16384, NULL),
    KEYER_OPTION_FIELD("height", "input height for a dynamic dimension (0: the model's)",
        OFF(height), KEYER_OPTION_INT, 0, 0, 16384, NULL),
    KEYER_OPTION_FIELD("layout", "the file's input layout", OFF(layout), KEYER_OPTION_ENUM,
        KEYER_TENSOR_LAYOUT_NCHW, 0, 0, layout_choices),
    KEYER_OPTION_FIELD("color_order", "order of the colour channels", OFF(color_order),
        KEYER_OPTION_ENUM, KEYER_COLOR_RGB, 0, 0, color_choices),
    {"range", "pixel range before mean/std (sets scale and offset)", 0, KEYER_OPTION_ENUM, 0, 0,
     0, range_choices, set_range, NULL, NULL, 0, 0u},
    KEYER_OPTION_FIELD("scale", "value = pixel / 255 * scale + offset", OFF(scale),
        KEYER_OPTION_FLOAT, 1, -1e6, 1e6, NULL),
    KEYER_OPTION_FIELD("offset", "added after scaling", OFF(offset), KEYER_OPTION_FLOAT, 0, -1e6,
        1e6, NULL),
    {"mean", "per-channel mean subtracted after the range (one value, or R/G/B)", OFF(mean),
     KEYER_OPTION_CUSTOM, 0, 0, 0, NULL, set_triple, NULL, "M[/M/M]", 0, 0u},
    {"std", "per-channel divisor after the mean (one value, or R/G/B)", OFF(std),
     KEYER_OPTION_CUSTOM, 0, 0, 0, NULL, set_triple, NULL, "S[/S/S]", 0, 0u},
    KEYER_OPTION_FIELD("fit", "how a frame is fitted into the input", OFF(letterbox),
        KEYER_OPTION_ENUM, 0, 0, 0, fit_choices),
    {"output", "the mask output's name (default: output_index)", OFF(output), KEYER_OPTION_CUSTOM,
     0, 0, 0, NULL, set_name, NULL, "NAME", 0, 0u},
    KEYER_OPTION_FIELD("output_index", "the mask output when no name is given", OFF(output_index),
        KEYER_OPTION_INT, 0, 0, 255, NULL),
    KEYER_OPTION_FIELD("output_kind", "what the mask output holds", OFF(output_kind),
        KEYER_OPTION_ENUM, KEYER_MASK_PROBABILITY, 0, 0, kind_choices),
    KEYER_OPTION_FIELD("person_class", "with output_kind classes: the person's class",
        OFF(person_class), KEYER_OPTION_INT, 15, 0, 4095, NULL),
    KEYER_OPTION_END,
};
#undef OFF

const keyer_option *keyer_model_desc_options(void) { return desc_options; }

keyer_model_desc keyer_model_desc_defaults(void)
{
    keyer_model_desc d;
    memset(&d, 0, sizeof(d));
    keyer_options_set_defaults(desc_options, &d, NULL);
    return d;
}

keyer_status keyer_model_desc_validate(const keyer_model_desc *d, keyer_error *err)
{
    if (!d)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "model description: NULL");
    keyer_status st = keyer_options_validate(desc_options, d, "model description", err);
    if (st)
        return st;
    if (!memchr(d->input, 0, sizeof(d->input)) || !memchr(d->output, 0, sizeof(d->output)))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "model description: a tensor name is not terminated");
    for (int c = 0; c < 3; c++)
        if (!isfinite(d->mean[c]) || !isfinite(d->std[c]) || d->std[c] < 0 ||
            fabsf(d->mean[c]) > 1e6f || d->std[c] > 1e6f)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "model description: mean %g / std %g of channel %d (std must "
                                   "be above 0, or 0 for none)",
                                   (double)d->mean[c], (double)d->std[c], c);
    if (d->scale == 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "model description: scale 0 makes every input the same");
    if ((d->width == 0) != (d->height == 0))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "model description: width %d and height %d: give both or neither",
                               d->width, d->height);
    return KEYER_OK;
}

keyer_model_desc keyer_model_desc_from_entry(const keyer_model_entry *e)
{
    keyer_model_desc d = keyer_model_desc_defaults();
    if (!e)
        return d;
    d.width = e->input_width;
    d.height = e->input_height;
    d.layout = e->layout;
    d.scale = e->input_scale;
    d.offset = e->input_offset;
    for (int c = 0; c < 3; c++) {
        d.mean[c] = e->input_mean[c];
        d.std[c] = e->input_std[c];
    }
    d.letterbox = e->letterbox;
    d.output_index = e->mask_output >= 0 ? e->mask_output : 0;
    d.output_kind = e->mask_is_logit ? KEYER_MASK_LOGITS : KEYER_MASK_PROBABILITY;
    return d;
}

/* ---- the YAML file --------------------------------------------------------------------------- */

/* A YAML list ("mean: [0.485, 0.456, 0.406]") arrives as one setting per element with the same
 * key: the elements are joined with commas and the option is set when the key changes. */
typedef struct read_ctx {
    keyer_model_desc *desc;
    const char *path;
    char key[64];
    char value[256];
    int line;
} read_ctx;

static keyer_status flush(read_ctx *c, keyer_error *err)
{
    if (!c->key[0])
        return KEYER_OK;
    keyer_status st = keyer_option_set(desc_options, c->desc, c->key, c->value, err);
    if (st) {
        char msg[sizeof(err->message)];
        snprintf(msg, sizeof(msg), "%s", err ? err->message : "");
        return keyer_error_set(err, st, "%s:%d: %s", c->path, c->line, msg);
    }
    c->key[0] = 0;
    return KEYER_OK;
}

static keyer_status on_setting(void *opaque, const char *key, const char *value, int line,
                               keyer_error *err)
{
    read_ctx *c = opaque;
    int same = !strcmp(key, c->key);
    if (!same) {
        keyer_status st = flush(c, err);
        if (st)
            return st;
        if (strlen(key) >= sizeof(c->key) || !keyer_option_find(desc_options, key))
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "%s:%d: unknown key '%s' (see keyer models --help)", c->path,
                                   line, key);
        snprintf(c->key, sizeof(c->key), "%s", key);
        c->value[0] = 0;
        c->line = line;
    }
    size_t used = strlen(c->value), n = strlen(value);
    if (used + n + 2 > sizeof(c->value))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s:%d: '%s' is too long",
                               c->path, line, key);
    if (same)
        c->value[used++] = ',';
    memcpy(c->value + used, value, n + 1);
    return KEYER_OK;
}

keyer_status keyer_model_desc_read(const char *path, keyer_model_desc *desc, keyer_error *err)
{
    if (!path || !desc)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_model_desc_read: %s is NULL", !path ? "path" : "desc");
    read_ctx c;
    memset(&c, 0, sizeof(c));
    c.desc = desc;
    c.path = path;
    keyer_status st = keyer_config_read(path, on_setting, &c, err);
    if (!st)
        st = flush(&c, err);
    if (!st && (st = keyer_model_desc_validate(desc, err)))
        keyer_error_prefix(err, "%s: ", path);
    return st;
}
