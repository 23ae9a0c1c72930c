/* One image model with its runtime and input preparation (see vmodel.h). */
#include "vision/vmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "keyer/registry.h"

void kr_vmodel_close(kr_vmodel *m)
{
    if (!m)
        return;
    keyer_prepare_destroy(&m->prep);
    keyer_runtime_destroy(&m->rt);
    keyer_model_destroy(&m->model);
    free(m->in_staging);
    for (int i = 0; i < KR_VMODEL_MAX_OUTPUTS; i++)
        free(m->out_staging[i]);
    if (m->stream && kr_device_cuda())
        kr_device_cuda()->stream_destroy(m->device, m->stream);
    memset(m, 0, sizeof(*m));
}

keyer_status kr_vmodel_open(kr_vmodel *m, const kr_vmodel_spec *spec, keyer_error *err)
{
    keyer_status st;
    memset(m, 0, sizeof(*m));
    m->what = spec->what;
    if ((st = keyer_registry_resolve(spec->name_or_path, m->path, sizeof(m->path), err)))
        return keyer_error_prefix(err, "%s: ", spec->what);
    if ((st = keyer_model_load_file(m->path, &m->model, err))) {
        keyer_error_prefix(err, "%s: ", spec->what);
        goto fail;
    }
    keyer_tensor_info in;
    if (keyer_model_input_count(m->model) != 1 ||
        keyer_model_input_info(m->model, 0, &in, NULL) != KEYER_OK || in.rank != 4 ||
        in.dims[0] != 1 || in.dims[3] != 3 || in.dims[1] < 8 || in.dims[2] < 8 ||
        in.dims[1] > 4096 || in.dims[2] > 4096 || in.dtype != KEYER_DTYPE_F32) {
        st = keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                             "%s: %s: expected one float input of shape [1,H,W,3]", spec->what,
                             m->path);
        goto fail;
    }
    m->height = in.dims[1];
    m->width = in.dims[2];
    m->n_outputs = keyer_model_output_count(m->model);
    if (m->n_outputs < spec->min_outputs || m->n_outputs > KR_VMODEL_MAX_OUTPUTS) {
        st = keyer_error_set(err, KEYER_STATUS_BAD_DATA, "%s: %s: %d outputs, expected %d..%d",
                             spec->what, m->path, m->n_outputs, spec->min_outputs,
                             KR_VMODEL_MAX_OUTPUTS);
        goto fail;
    }
    for (int i = 0; i < m->n_outputs; i++) {
        keyer_tensor_info *t = &m->out_info[i];
        if (keyer_model_output_info(m->model, i, t, NULL) != KEYER_OK || t->rank < 1 ||
            t->rank > KEYER_TENSOR_MAX_DIMS || t->dtype != KEYER_DTYPE_F32) {
            st = keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                 "%s: %s: output %d is not a float tensor", spec->what, m->path, i);
            goto fail;
        }
        size_t n = 1;
        for (int d = 0; d < t->rank; d++) {
            if (t->dims[d] < 1 || n > ((size_t)1 << 40) / (size_t)t->dims[d]) {
                st = keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                     "%s: %s: output %d has a bad shape", spec->what, m->path, i);
                goto fail;
            }
            n *= (size_t)t->dims[d];
        }
        m->out_count[i] = n;
    }
    keyer_runtime_params rp = keyer_runtime_params_defaults();
    rp.backend = spec->backend;
    rp.threads = spec->threads;
    rp.logger = spec->logger;
    rp.device = spec->device;
    if (spec->backend == KEYER_BACKEND_CUDA && kr_device_cuda()) {
        /* one stream for the preparation of CUDA frames and the runtime, so that a crop is
         * made before the network reads it */
        m->device = spec->device;
        if ((st = kr_device_cuda()->stream_create(spec->device, &m->stream, err))) {
            m->stream = NULL;
            keyer_error_prefix(err, "%s: ", spec->what);
            goto fail;
        }
        rp.stream = m->stream;
    }
    if ((st = keyer_runtime_create(m->model, &rp, &m->rt, err))) {
        keyer_error_prefix(err, "%s: ", spec->what);
        goto fail;
    }
    m->host = keyer_runtime_backend(m->rt) != KEYER_BACKEND_CUDA;
    if (!m->host) {
        m->in_staging = malloc(keyer_runtime_input_bytes(m->rt, 0));
        if (!m->in_staging)
            goto oom;
        for (int i = 0; i < m->n_outputs; i++)
            if (!(m->out_staging[i] = malloc(m->out_count[i] * sizeof(float))))
                goto oom;
    }
    keyer_prepare_params pp = keyer_prepare_params_defaults();
    pp.width = m->width;
    pp.height = m->height;
    pp.fit = spec->fit;
    pp.scale = spec->scale;
    pp.offset = spec->offset;
    pp.threads = spec->threads > 0 ? spec->threads : 0;
    pp.stream = m->stream;
    if ((st = keyer_prepare_create(&pp, &m->prep, err))) {
        keyer_error_prefix(err, "%s: ", spec->what);
        goto fail;
    }
    return KEYER_OK;
oom:
    st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", spec->what);
fail:
    kr_vmodel_close(m);
    return st;
}

keyer_status kr_vmodel_run(kr_vmodel *m, const keyer_frame *frame, const keyer_roi *roi,
                           keyer_prepare_geometry *geo, keyer_error *err)
{
    keyer_status st;
    int device_frame = frame->memory == KEYER_MEMORY_CUDA;
    if (device_frame && m->host)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: a CUDA frame for a network on the CPU", m->what);
    float *in = m->host || device_frame ? keyer_runtime_input_data(m->rt, 0) : m->in_staging;
    if ((st = keyer_prepare_run(m->prep, &frame, roi, 1, in, geo, err)))
        return keyer_error_prefix(err, "%s: ", m->what);
    if (!m->host && !device_frame &&
        (st = keyer_runtime_set_input(m->rt, 0, in, keyer_runtime_input_bytes(m->rt, 0), err)))
        return keyer_error_prefix(err, "%s: ", m->what);
    if ((st = keyer_runtime_run(m->rt, err)))
        return keyer_error_prefix(err, "%s: ", m->what);
    for (int i = 0; i < m->n_outputs; i++) {
        if (m->host) {
            m->out[i] = keyer_runtime_output_data(m->rt, i);
        } else {
            if ((st = keyer_runtime_get_output(m->rt, i, m->out_staging[i],
                                               m->out_count[i] * sizeof(float), err)))
                return keyer_error_prefix(err, "%s: ", m->what);
            m->out[i] = m->out_staging[i];
        }
        if (!m->out[i])
            return keyer_error_set(err, KEYER_STATUS_INTERNAL, "%s: output %d has no data",
                                   m->what, i);
    }
    return KEYER_OK;
}

int kr_vmodel_find_output(const kr_vmodel *m, size_t count, int from)
{
    for (int i = from < 0 ? 0 : from; i < m->n_outputs; i++)
        if (m->out_count[i] == count)
            return i;
    return -1;
}

int kr_geo_invert(const keyer_prepare_geometry *geo, float inv[6])
{
    const float *a = geo->matrix;
    double det = (double)a[0] * a[4] - (double)a[1] * a[3];
    if (!(fabs(det) > 1e-12) || !isfinite(det))
        return 0;
    double i0 = a[4] / det, i1 = -a[1] / det, i3 = -a[3] / det, i4 = a[0] / det;
    inv[0] = (float)i0;
    inv[1] = (float)i1;
    inv[2] = (float)(-(i0 * a[2] + i1 * a[5]));
    inv[3] = (float)i3;
    inv[4] = (float)i4;
    inv[5] = (float)(-(i3 * a[2] + i4 * a[5]));
    return 1;
}
