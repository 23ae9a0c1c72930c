/* Shared resolution of frames, colours and sampling geometry for the frame effects. */
#include <math.h>
#include <string.h>

#include "render/fx_backend.h"

int kr_fx_format_supported(keyer_pixel_format format)
{
    switch (format) {
    case KEYER_PIXEL_FORMAT_NV12:
    case KEYER_PIXEL_FORMAT_P010:
    case KEYER_PIXEL_FORMAT_YUV420P:
    case KEYER_PIXEL_FORMAT_RGB24:
    case KEYER_PIXEL_FORMAT_RGBA: return 1;
    default: return 0;
    }
}

keyer_status kr_fx_check_frame(const keyer_frame *f, const char *what, keyer_error *err)
{
    keyer_error local_err;
    if (!err)
        err = &local_err;
    if (!f)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s is NULL", what);
    if (keyer_frame_check(f, err))
        return keyer_error_prefix(err, "%s: ", what);
    if (f->memory != KEYER_MEMORY_HOST && f->memory != KEYER_MEMORY_CUDA)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: unknown memory type %d",
                               what, (int)f->memory);
    return KEYER_OK;
}

static void chan(kr_chan *c, const keyer_frame *f, int plane, int offset, int step, int wide,
                 int level)
{
    c->base = f->data[plane] + offset;
    c->stride = f->stride[plane];
    c->width = level ? (f->width + 1) / 2 : f->width;
    c->height = level ? (f->height + 1) / 2 : f->height;
    c->step = step;
    c->wide = wide;
    c->shift = wide ? 6 : 0;
    c->level = level;
}

/* Kr, Kb of a matrix, resolving UNSPECIFIED by the frame height. */
static void matrix_coefficients(keyer_color_matrix m, int height, double *kr, double *kb)
{
    if (m == KEYER_COLOR_MATRIX_UNSPECIFIED)
        m = height < 720 ? KEYER_COLOR_MATRIX_BT601 : KEYER_COLOR_MATRIX_BT709;
    switch (m) {
    case KEYER_COLOR_MATRIX_BT709: *kr = 0.2126; *kb = 0.0722; break;
    case KEYER_COLOR_MATRIX_BT2020: *kr = 0.2627; *kb = 0.0593; break;
    default: *kr = 0.299; *kb = 0.114; break;
    }
}

keyer_status kr_fx_src_init(kr_src *s, const keyer_frame *f, keyer_error *err)
{
    memset(s, 0, sizeof(*s));
    double kr, kb;
    matrix_coefficients(f->matrix, f->height, &kr, &kb);
    double kg = 1.0 - kr - kb;
    int yuv = 1, wide = 0;
    switch (f->format) {
    case KEYER_PIXEL_FORMAT_NV12:
        chan(&s->ch[0], f, 0, 0, 1, 0, 0);
        chan(&s->ch[1], f, 1, 0, 2, 0, 1);
        chan(&s->ch[2], f, 1, 1, 2, 0, 1);
        break;
    case KEYER_PIXEL_FORMAT_P010:
        wide = 1;
        chan(&s->ch[0], f, 0, 0, 2, 1, 0);
        chan(&s->ch[1], f, 1, 0, 4, 1, 1);
        chan(&s->ch[2], f, 1, 2, 4, 1, 1);
        break;
    case KEYER_PIXEL_FORMAT_YUV420P:
        chan(&s->ch[0], f, 0, 0, 1, 0, 0);
        chan(&s->ch[1], f, 1, 0, 1, 0, 1);
        chan(&s->ch[2], f, 2, 0, 1, 0, 1);
        break;
    case KEYER_PIXEL_FORMAT_RGB24:
    case KEYER_PIXEL_FORMAT_RGBA: {
        int step = f->format == KEYER_PIXEL_FORMAT_RGBA ? 4 : 3;
        for (int i = 0; i < 3; i++)
            chan(&s->ch[i], f, 0, i, step, 0, 0);
        yuv = 0;
        break;
    }
    default:
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "pixel format %s is not supported by the frame effects (use nv12, "
                               "p010, yuv420p, rgb24 or rgba)", keyer_pixel_format_name(f->format));
    }
    s->chroma = yuv;
    s->maxcode = wide ? 1023 : 255;
    if (!yuv) {
        for (int i = 0; i < 3; i++) {
            s->m[4 * i] = (float)(1.0 / 255.0);
            s->e[4 * i] = 255.0f;
        }
        s->luma[0] = (float)(kr / 255.0);
        s->luma[1] = (float)(kg / 255.0);
        s->luma[2] = (float)(kb / 255.0);
        return KEYER_OK;
    }
    int full = f->range == KEYER_COLOR_RANGE_FULL;
    double yo, ys, co, cs;
    if (wide) {
        yo = full ? 0 : 64;
        ys = full ? 1.0 / 1023 : 1.0 / 876;
        co = 512;
        cs = full ? 1.0 / 1023 : 1.0 / 896;
    } else {
        yo = full ? 0 : 16;
        ys = full ? 1.0 / 255 : 1.0 / 219;
        co = 128;
        cs = full ? 1.0 / 255 : 1.0 / 224;
    }
    double m[9] = {
        ys, 0, 2 * (1 - kr) * cs,
        ys, -2 * kb * (1 - kb) / kg * cs, -2 * kr * (1 - kr) / kg * cs,
        ys, 2 * (1 - kb) * cs, 0,
    };
    for (int i = 0; i < 3; i++) {
        s->m[3 * i] = (float)m[3 * i];
        s->m[3 * i + 1] = (float)m[3 * i + 1];
        s->m[3 * i + 2] = (float)m[3 * i + 2];
        s->o[i] = (float)(-(m[3 * i] * yo + m[3 * i + 1] * co + m[3 * i + 2] * co));
    }
    /* Encoding: y' = kr R + kg G + kb B; pb = (B - y') / (2 (1 - kb)); pr likewise. */
    double e[9] = {
        kr / ys, kg / ys, kb / ys,
        -kr / (2 * (1 - kb)) / cs, -kg / (2 * (1 - kb)) / cs, (1 - kb) / (2 * (1 - kb)) / cs,
        (1 - kr) / (2 * (1 - kr)) / cs, -kg / (2 * (1 - kr)) / cs, -kb / (2 * (1 - kr)) / cs,
    };
    for (int i = 0; i < 9; i++)
        s->e[i] = (float)e[i];
    s->eo[0] = (float)yo;
    s->eo[1] = (float)co;
    s->eo[2] = (float)co;
    s->luma[0] = (float)(1.0 / s->maxcode);
    return KEYER_OK;
}

#define MAX_COORD 1e6
#define MAX_SUBSAMPLES 128

keyer_status kr_fx_resolve_sampling(int w, int h, const keyer_roi *roi, int tw, int th,
                                    int letterbox, int area, kr_prepare_item *it,
                                    keyer_prepare_geometry *geometry, keyer_error *err)
{
    double cx = w / 2.0, cy = h / 2.0, rw = w, rh = h, th_rad = 0.0;
    if (roi && roi->width > 0 && roi->height > 0) {
        if (!isfinite(roi->center_x) || !isfinite(roi->center_y) || !isfinite(roi->width) ||
            !isfinite(roi->height) || !isfinite(roi->rotation) ||
            fabs(roi->center_x) > MAX_COORD || fabs(roi->center_y) > MAX_COORD ||
            roi->width > MAX_COORD || roi->height > MAX_COORD)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "region of interest (%g,%g %gx%g rotation %g) is not finite or "
                                   "beyond +-%g pixels", (double)roi->center_x,
                                   (double)roi->center_y, (double)roi->width,
                                   (double)roi->height, (double)roi->rotation, MAX_COORD);
        cx = roi->center_x;
        cy = roi->center_y;
        rw = roi->width;
        rh = roi->height;
        th_rad = roi->rotation;
    } else if (roi && (!isfinite(roi->width) || !isfinite(roi->height))) {
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "region of interest size %gx%g is not finite",
                               (double)roi->width, (double)roi->height);
    }
    double ox = 0, oy = 0, cw = tw, ch = th;
    if (letterbox) {
        double s = fmin(tw / rw, th / rh);
        cw = rw * s;
        ch = rh * s;
        ox = (tw - cw) / 2;
        oy = (th - ch) / 2;
    }
    double c = th_rad == 0.0 ? 1.0 : cos(th_rad), sn = th_rad == 0.0 ? 0.0 : sin(th_rad);
    double m0 = c * rw / cw, m1 = -sn * rh / ch, m3 = sn * rw / cw, m4 = c * rh / ch;
    double tcx = ox + cw / 2, tcy = oy + ch / 2;
    it->m[0] = (float)m0;
    it->m[1] = (float)m1;
    it->m[2] = (float)(cx - m0 * tcx - m1 * tcy);
    it->m[3] = (float)m3;
    it->m[4] = (float)m4;
    it->m[5] = (float)(cy - m3 * tcx - m4 * tcy);
    double sx = rw / cw, sy = rh / ch; /* frame pixels per tensor pixel along its axes */
    it->nx = area && sx > 2.0 ? (int)fmin(ceil(sx), MAX_SUBSAMPLES) : 1;
    it->ny = area && sy > 2.0 ? (int)fmin(ceil(sy), MAX_SUBSAMPLES) : 1;
    it->x0 = (int)fmax(0, fmin(tw, ceil(ox - 0.5)));
    it->x1 = (int)fmax(0, fmin(tw, ceil(ox + cw - 0.5)));
    it->y0 = (int)fmax(0, fmin(th, ceil(oy - 0.5)));
    it->y1 = (int)fmax(0, fmin(th, ceil(oy + ch - 0.5)));
    if (geometry) {
        geometry->content.x = (float)ox;
        geometry->content.y = (float)oy;
        geometry->content.width = (float)cw;
        geometry->content.height = (float)ch;
        memcpy(geometry->matrix, it->m, sizeof(it->m));
    }
    return KEYER_OK;
}
