/* A segmentation model for keying (segmodel.h): loading it as described, finding its input
 * and mask output, and reading the mask of each kind on the CPU. */
#include "vision/segmodel.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "keyer/effects.h"
#include "vision/sigmoid.h"

#ifdef KEYER_HAVE_CUDA
keyer_status kr_cuda_segmask(int ordinal, float *dst, const float *src, size_t cells,
                             int channels, int planar, int channel, int kind, void *stream,
                             keyer_error *err); /* cuda/segmask.cu */
#endif

void kr_segmodel_close(kr_segmodel *m)
{
    if (!m)
        return;
    keyer_model_destroy(&m->model);
    memset(m, 0, sizeof(*m));
}

/* "'a', 'b', 'c'": the names of the model's inputs (@p outputs 0) or outputs, for messages. */
static void list_names(const keyer_model *model, int outputs, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = 0;
    int n = outputs ? keyer_model_output_count(model) : keyer_model_input_count(model);
    for (int i = 0; i < n; i++) {
        keyer_tensor_info t;
        if ((outputs ? keyer_model_output_info(model, i, &t, NULL)
                     : keyer_model_input_info(model, i, &t, NULL)) != KEYER_OK)
            continue;
        int w = snprintf(buf + used, size - used, "%s'%s'", used ? ", " : "",
                         t.name ? t.name : "");
        if (w < 0 || (size_t)w >= size - used) {
            buf[used] = 0;
            return;
        }
        used += (size_t)w;
    }
}

/* 1 when @p path holds a TFLite flatbuffer (its file identifier "TFL3" at byte 4). */
static int is_tflite(const char *path)
{
    unsigned char head[8];
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = fread(head, 1, sizeof(head), f);
    fclose(f);
    return n == sizeof(head) && !memcmp(head + 4, "TFL3", 4);
}

static keyer_status check_input(kr_segmodel *m, const char *name, keyer_error *err)
{
    const keyer_model_desc *d = &m->desc;
    char names[512];
    keyer_tensor_info in;
    if (d->input[0]) {
        keyer_tensor_info t;
        if (keyer_model_input_count(m->model) < 1 ||
            keyer_model_input_info(m->model, 0, &t, NULL) != KEYER_OK || !t.name ||
            strcmp(t.name, d->input)) {
            list_names(m->model, 0, names, sizeof(names));
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "model %s: no input named '%s' (its inputs: %s)", name,
                                   d->input, names);
        }
    }
    if (keyer_model_input_count(m->model) != 1) {
        list_names(m->model, 0, names, sizeof(names));
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "model %s: %d inputs (%s); keying feeds one image input", name,
                               keyer_model_input_count(m->model), names);
    }
    keyer_status st = keyer_model_input_info(m->model, 0, &in, err);
    if (st)
        return st;
    if (in.rank != 4 || in.dims[3] != 3 || in.dtype != KEYER_DTYPE_F32 || in.dims[1] < 1 ||
        in.dims[2] < 1)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "model %s: input 0 is not a float [1,H,W,3] image (not an "
                               "image-to-mask model)", name);
    /* the file's own shape must have its 3 channels where the description's layout says */
    int nchw = d->layout == KEYER_TENSOR_LAYOUT_NCHW;
    if (in.file_rank != 4 || in.file_dims[nchw ? 1 : 3] != 3)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "model %s: %sinput '%s' is [%d,%d,%d,%d] in the file, but the "
                               "description says layout %s", name,
                               m->tflite ? "a TFLite model (always NHWC): its " : "",
                               in.name ? in.name : "", in.file_dims[0], in.file_dims[1],
                               in.file_dims[2], in.file_dims[3], nchw ? "nchw" : "nhwc");
    m->in_h = in.dims[1];
    m->in_w = in.dims[2];
    if (d->width && (d->width != m->in_w || d->height != m->in_h))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "model %s: its input is %dx%d, the description says %dx%d", name,
                               m->in_w, m->in_h, d->width, d->height);
    return KEYER_OK;
}

static keyer_status check_output(kr_segmodel *m, const char *name, keyer_error *err)
{
    const keyer_model_desc *d = &m->desc;
    int n = keyer_model_output_count(m->model);
    char names[512];
    m->output = -1;
    if (d->output[0]) {
        for (int i = 0; i < n && m->output < 0; i++) {
            keyer_tensor_info t;
            if (keyer_model_output_info(m->model, i, &t, NULL) == KEYER_OK && t.name &&
                !strcmp(t.name, d->output))
                m->output = i;
        }
        if (m->output < 0) {
            list_names(m->model, 1, names, sizeof(names));
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "model %s: no output named '%s' (its outputs: %s)", name,
                                   d->output, names);
        }
    } else if (d->output_index >= n) {
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "model %s: no output %d (it has %d)", name, d->output_index, n);
    } else {
        m->output = d->output_index;
    }
    keyer_tensor_info mo;
    keyer_status st = keyer_model_output_info(m->model, m->output, &mo, err);
    if (st)
        return st;
    if ((mo.rank != 4 && mo.rank != 3) || mo.dims[0] != 1 || mo.dims[1] < 1 || mo.dims[2] < 1 ||
        (mo.rank == 4 && mo.dims[3] < 1) || mo.dtype != KEYER_DTYPE_F32)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "model %s: output %d ('%s') is not a float [1,H,W,C] mask", name,
                               m->output, mo.name ? mo.name : "");
    /* an ONNX output the import left in the file's order is [1,C,H,W]: channel planes */
    int identity = 1;
    for (int i = 0; i < mo.rank; i++)
        identity &= mo.file_perm[i] == i;
    m->mask_planar = !m->tflite && mo.rank == 4 && identity;
    m->mask_h = m->mask_planar ? mo.dims[2] : mo.dims[1];
    m->mask_w = m->mask_planar ? mo.dims[3] : mo.dims[2];
    m->mask_c = mo.rank == 4 ? (m->mask_planar ? mo.dims[1] : mo.dims[3]) : 1;
    m->kind = d->output_kind;
    m->channel = 0;
    if (m->kind == KEYER_MASK_CLASSES) {
        if (m->mask_c < 2)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "model %s: output '%s' has one channel, not one per class "
                                   "(output_kind classes)", name, mo.name ? mo.name : "");
        if (d->person_class >= m->mask_c)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "model %s: person_class %d, but output '%s' has %d classes",
                                   name, d->person_class, mo.name ? mo.name : "", m->mask_c);
        m->channel = d->person_class;
    }
    return KEYER_OK;
}

keyer_status kr_segmodel_open(kr_segmodel *m, const char *name_or_path,
                              const keyer_model_desc *desc, keyer_error *err)
{
    memset(m, 0, sizeof(*m));
    const char *name = name_or_path;
    m->entry = keyer_registry_find(name);
    if (m->entry && m->entry->mask_output < 0 && !desc)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "model %s has no person mask (keying needs a segmentation or pose "
                               "model: selfie, selfie-landscape, u2netp, pose-lite, ...)", name);
    char path[4096];
    keyer_status st = keyer_registry_resolve(name, path, sizeof(path), err);
    if (st)
        return st;
    m->tflite = is_tflite(path);
    m->desc = desc ? *desc : keyer_model_desc_from_entry(m->entry);
    if (!desc && !m->entry && m->tflite)
        m->desc.layout = KEYER_TENSOR_LAYOUT_NHWC; /* a user's TFLite file, undescribed */
    if ((st = keyer_model_desc_validate(&m->desc, err)))
        return keyer_error_prefix(err, "model %s: ", name);
    keyer_model_load_params lp = keyer_model_load_params_defaults();
    lp.width = m->desc.width;
    lp.height = m->desc.height;
    if ((st = keyer_model_load_file_params(path, &lp, &m->model, err)) ||
        (st = check_input(m, name, err)) || (st = check_output(m, name, err))) {
        kr_segmodel_close(m);
        return st;
    }
    return KEYER_OK;
}

void kr_segmodel_prepare_params(const kr_segmodel *m, keyer_prepare_params *pp)
{
    const keyer_model_desc *d = &m->desc;
    pp->width = m->in_w;
    pp->height = m->in_h;
    pp->fit = d->letterbox ? KEYER_FIT_LETTERBOX : KEYER_FIT_STRETCH;
    pp->scale = d->scale;
    pp->offset = d->offset;
    for (int c = 0; c < 3; c++) {
        pp->mean[c] = d->mean[c];
        pp->std[c] = d->std[c];
    }
    pp->bgr = d->color_order == KEYER_COLOR_BGR;
}

void kr_segmask_cpu(const kr_segmodel *m, float *dst, const float *src, size_t cells)
{
    size_t c = (size_t)m->mask_c, ch = (size_t)m->channel;
    /* value j of cell k: src[k * cs + j * js] */
    size_t cs = m->mask_planar ? 1 : c, js = m->mask_planar ? cells : 1;
    switch (m->kind) {
    case KEYER_MASK_LOGITS:
        kr_sigmoid_cpu(dst, src, cells, cs);
        return;
    case KEYER_MASK_ALPHA:
        for (size_t k = 0; k < cells; k++) {
            float v = src[k * cs];
            dst[k] = v > 0.0f ? (v < 1.0f ? v : 1.0f) : 0.0f; /* NaN: 0 */
        }
        return;
    case KEYER_MASK_CLASSES:
        for (size_t k = 0; k < cells; k++) {
            const float *s = src + k * cs;
            float mx = s[0];
            for (size_t j = 1; j < c; j++)
                mx = s[j * js] > mx ? s[j * js] : mx;
            float sum = 0.0f;
            for (size_t j = 0; j < c; j++)
                sum += expf(s[j * js] - mx);
            dst[k] = expf(s[ch * js] - mx) / sum;
        }
        return;
    case KEYER_MASK_PROBABILITY:
    default:
        if (cs == 1) {
            if (dst != src)
                memcpy(dst, src, cells * sizeof(float));
        } else {
            for (size_t k = 0; k < cells; k++)
                dst[k] = src[k * cs];
        }
        return;
    }
}

keyer_status kr_segmask_cuda(const kr_segmodel *m, int ordinal, float *dst, const float *src,
                             size_t cells, void *stream, keyer_error *err)
{
#ifdef KEYER_HAVE_CUDA
    return kr_cuda_segmask(ordinal, dst, src, cells, m->mask_c, m->mask_planar, m->channel,
                           (int)m->kind, stream, err);
#else
    (void)m, (void)ordinal, (void)dst, (void)src, (void)cells, (void)stream;
    return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                           "the mask of a CUDA output: keyer was built without CUDA");
#endif
}
