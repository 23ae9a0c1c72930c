/* Helpers for the frame-effects tests: see kt_effects.h. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kt_effects.h"

/* The next number of the generator (xorshift32; state 0 is replaced by a fixed constant). */
uint32_t kt_next(kt_rng *r)
{
    uint32_t x = r->s ? r->s : 0x9E3779B9u;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    r->s = x;
    return x;
}

/* A host frame whose rows are `pad` bytes longer than needed (pad keeps sample alignment),
 * so strides are not multiples of 16. NULL on failure. */
keyer_frame *kt_frame_padded(keyer_pixel_format fmt, int w, int h, int pad)
{
    keyer_frame *f = NULL;
    if (keyer_frame_create(&f, NULL))
        return NULL;
    size_t offs[4], total = 0;
    ptrdiff_t strides[4];
    int planes = keyer_pixel_format_planes(fmt);
    for (int p = 0; p < planes; p++) {
        int pw, ph, bpe;
        if (keyer_pixel_format_plane(fmt, w, h, p, &pw, &ph, &bpe, NULL)) {
            keyer_frame_destroy(&f);
            return NULL;
        }
        int unit = bpe >= 2 ? 2 : 1;
        if (fmt == KEYER_PIXEL_FORMAT_GRAYF32)
            unit = 4;
        size_t row = (size_t)pw * (size_t)bpe + (size_t)(pad / unit * unit);
        strides[p] = (ptrdiff_t)row;
        offs[p] = total;
        total += row * (size_t)ph + 64;
        total = (total + 63) & ~(size_t)63;
    }
    keyer_buffer *buf = NULL;
    if (keyer_buffer_create(total, NULL, &buf, NULL)) {
        keyer_frame_destroy(&f);
        return NULL;
    }
    memset(keyer_buffer_data(buf), 0, total);
    f->format = fmt;
    f->width = w;
    f->height = h;
    f->memory = KEYER_MEMORY_HOST;
    for (int p = 0; p < planes; p++) {
        f->data[p] = (uint8_t *)keyer_buffer_data(buf) + offs[p];
        f->stride[p] = strides[p];
    }
    f->buf[0] = buf;
    return f;
}

/* Fills every sample with random codes (P010: 10-bit codes in the high bits). `smooth` > 0
 * makes a smooth random field plus noise instead of white noise. */
void kt_fill_random(keyer_frame *f, uint32_t seed, int smooth)
{
    kt_rng r = {seed * 2654435761u + 1};
    int planes = keyer_pixel_format_planes(f->format);
    double ph1 = (kt_next(&r) % 1000) / 100.0, ph2 = (kt_next(&r) % 1000) / 100.0;
    for (int p = 0; p < planes; p++) {
        int pw, ph, bpe;
        keyer_pixel_format_plane(f->format, f->width, f->height, p, &pw, &ph, &bpe, NULL);
        int wide = f->format == KEYER_PIXEL_FORMAT_P010;
        int n = pw * (wide ? bpe / 2 : bpe);
        for (int y = 0; y < ph; y++) {
            uint8_t *row = f->data[p] + (ptrdiff_t)y * f->stride[p];
            for (int i = 0; i < n; i++) {
                uint32_t v;
                int maxv = wide ? 1023 : 255;
                if (smooth) {
                    double t = 0.5 + 0.45 * sin(i * 0.05 + ph1 + p) * cos(y * 0.07 + ph2 + i % 3);
                    v = (uint32_t)(t * maxv) + kt_next(&r) % 9;
                    if (v > (uint32_t)maxv)
                        v = (uint32_t)maxv;
                } else {
                    v = kt_next(&r) % (uint32_t)(maxv + 1);
                }
                if (f->format == KEYER_PIXEL_FORMAT_GRAYF32)
                    ((float *)(void *)row)[i] = (float)(kt_next(&r) % 10001) / 10000.0f;
                else if (wide)
                    ((uint16_t *)(void *)row)[i] = (uint16_t)(v << 6);
                else
                    row[i] = (uint8_t)v;
            }
        }
    }
}

/* ---- reference colour and sampling, double precision ------------------------------------ */

/* Kr and Kb of the frame's colour matrix (unspecified: BT.601 below 720 rows, else BT.709). */
void kt_kr_kb(const keyer_frame *f, double *kr, double *kb)
{
    keyer_color_matrix m = f->matrix;
    if (m == KEYER_COLOR_MATRIX_UNSPECIFIED)
        m = f->height < 720 ? KEYER_COLOR_MATRIX_BT601 : KEYER_COLOR_MATRIX_BT709;
    if (m == KEYER_COLOR_MATRIX_BT709) {
        *kr = 0.2126;
        *kb = 0.0722;
    } else if (m == KEYER_COLOR_MATRIX_BT2020) {
        *kr = 0.2627;
        *kb = 0.0593;
    } else {
        *kr = 0.299;
        *kb = 0.114;
    }
}

/* 1 for the YUV formats (NV12, P010, YUV420P). */
int kt_is_yuv(keyer_pixel_format f)
{
    return f == KEYER_PIXEL_FORMAT_NV12 || f == KEYER_PIXEL_FORMAT_P010 ||
           f == KEYER_PIXEL_FORMAT_YUV420P;
}

/* Code of component c (0..2) at sample (x, y) of its own plane. */
double kt_code(const keyer_frame *f, int c, int x, int y)
{
    switch (f->format) {
    case KEYER_PIXEL_FORMAT_NV12:
        if (c == 0)
            return f->data[0][(ptrdiff_t)y * f->stride[0] + x];
        return f->data[1][(ptrdiff_t)y * f->stride[1] + 2 * x + (c - 1)];
    case KEYER_PIXEL_FORMAT_P010: {
        const uint8_t *row = f->data[c ? 1 : 0] + (ptrdiff_t)y * f->stride[c ? 1 : 0];
        const uint16_t *s = (const uint16_t *)(const void *)row;
        return c == 0 ? s[x] >> 6 : s[2 * x + (c - 1)] >> 6;
    }
    case KEYER_PIXEL_FORMAT_YUV420P: return f->data[c][(ptrdiff_t)y * f->stride[c] + x];
    case KEYER_PIXEL_FORMAT_RGB24: return f->data[0][(ptrdiff_t)y * f->stride[0] + 3 * x + c];
    case KEYER_PIXEL_FORMAT_RGBA: return f->data[0][(ptrdiff_t)y * f->stride[0] + 4 * x + c];
    default: return 0;
    }
}

/* Bilinear sample of component c at index coordinates of its own plane (edges clamped). */
double kt_bilinear(const keyer_frame *f, int c, double x, double y)
{
    int sub = kt_is_yuv(f->format) && c > 0;
    int w = sub ? (f->width + 1) / 2 : f->width, h = sub ? (f->height + 1) / 2 : f->height;
    x = x < 0 ? 0 : x > w - 1 ? w - 1 : x;
    y = y < 0 ? 0 : y > h - 1 ? h - 1 : y;
    int x0 = (int)floor(x), y0 = (int)floor(y);
    int x1 = x0 + 1 < w ? x0 + 1 : x0, y1 = y0 + 1 < h ? y0 + 1 : y0;
    double fx = x - x0, fy = y - y0;
    return (1 - fy) * ((1 - fx) * kt_code(f, c, x0, y0) + fx * kt_code(f, c, x1, y0)) +
           fy * ((1 - fx) * kt_code(f, c, x0, y1) + fx * kt_code(f, c, x1, y1));
}

/* Codes at luma index coordinates (x, y): chroma sited with even luma columns, between rows. */
void kt_sample(const keyer_frame *f, double x, double y, double c[3])
{
    c[0] = kt_bilinear(f, 0, x, y);
    if (kt_is_yuv(f->format)) {
        c[1] = kt_bilinear(f, 1, x / 2, (y - 0.5) / 2);
        c[2] = kt_bilinear(f, 2, x / 2, (y - 0.5) / 2);
    } else {
        c[1] = kt_bilinear(f, 1, x, y);
        c[2] = kt_bilinear(f, 2, x, y);
    }
}

/* Codes to RGB in [0,1], clamped: BT.601/709/2020 equations, limited or full range. */
void kt_rgb(const keyer_frame *f, const double c[3], double rgb[3])
{
    if (!kt_is_yuv(f->format)) {
        for (int i = 0; i < 3; i++)
            rgb[i] = c[i] / 255.0;
    } else {
        double kr, kb;
        kt_kr_kb(f, &kr, &kb);
        double kg = 1 - kr - kb;
        int ten = f->format == KEYER_PIXEL_FORMAT_P010;
        int full = f->range == KEYER_COLOR_RANGE_FULL;
        double s = ten ? 4.0 : 1.0; /* 10-bit codes are 4x 8-bit ones */
        double yv, pb, pr;
        if (full) {
            double mx = ten ? 1023.0 : 255.0;
            yv = c[0] / mx;
            pb = (c[1] - 128 * s) / mx;
            pr = (c[2] - 128 * s) / mx;
        } else {
            yv = (c[0] - 16 * s) / (219 * s);
            pb = (c[1] - 128 * s) / (224 * s);
            pr = (c[2] - 128 * s) / (224 * s);
        }
        rgb[0] = yv + 2 * (1 - kr) * pr;
        rgb[2] = yv + 2 * (1 - kb) * pb;
        rgb[1] = (yv - kr * rgb[0] - kb * rgb[2]) / kg;
    }
    for (int i = 0; i < 3; i++)
        rgb[i] = rgb[i] < 0 ? 0 : rgb[i] > 1 ? 1 : rgb[i];
}

/* Reference preparation of one frame into out (th x tw x 3, NHWC, float), from the
 * definitions: ROI (NULL: whole frame), stretch or letterbox, centre mapping, area
 * supersampling when a tensor pixel covers more than 2 frame pixels along an axis. */
void kt_ref_prepare(const keyer_frame *f, const keyer_roi *roi, int tw, int th,
                    int letterbox, int area, double scale, double offset,
                    double pad, float *out)
{
    double cx = f->width / 2.0, cy = f->height / 2.0, rw = f->width, rh = f->height, rot = 0;
    if (roi && roi->width > 0 && roi->height > 0) {
        cx = roi->center_x;
        cy = roi->center_y;
        rw = roi->width;
        rh = roi->height;
        rot = roi->rotation;
    }
    double ox = 0, oy = 0, cw = tw, chh = th;
    if (letterbox) {
        double s = fmin(tw / rw, th / rh);
        cw = rw * s;
        chh = rh * s;
        ox = (tw - cw) / 2;
        oy = (th - chh) / 2;
    }
    double ux = rw / cw, uy = rh / chh; /* frame pixels per tensor pixel */
    int nx = area && ux > 2 ? (int)ceil(ux) : 1, ny = area && uy > 2 ? (int)ceil(uy) : 1;
    for (int y = 0; y < th; y++)
        for (int x = 0; x < tw; x++) {
            float *o = out + ((size_t)y * tw + x) * 3;
            double px = x + 0.5, py = y + 0.5;
            if (px < ox || px >= ox + cw || py < oy || py >= oy + chh) {
                for (int i = 0; i < 3; i++)
                    o[i] = (float)(pad * scale + offset);
                continue;
            }
            double acc[3] = {0, 0, 0};
            for (int j = 0; j < ny; j++)
                for (int i = 0; i < nx; i++) {
                    double tx = x + (i + 0.5) / nx, ty = y + (j + 0.5) / ny;
                    /* region-local coordinates, then rotate into the frame */
                    double lx = ((tx - ox) / cw - 0.5) * rw, ly = ((ty - oy) / chh - 0.5) * rh;
                    double fx = cx + cos(rot) * lx - sin(rot) * ly;
                    double fy = cy + sin(rot) * lx + cos(rot) * ly;
                    double c[3];
                    kt_sample(f, fx - 0.5, fy - 0.5, c);
                    for (int k = 0; k < 3; k++)
                        acc[k] += c[k];
                }
            for (int k = 0; k < 3; k++)
                acc[k] /= nx * ny;
            double rgb[3];
            kt_rgb(f, acc, rgb);
            for (int k = 0; k < 3; k++)
                o[k] = (float)(rgb[k] * scale + offset);
        }
}

/* Largest |a - b| over n floats. */
double kt_maxdiff(const float *a, const float *b, size_t n, size_t *where)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) {
            m = d;
            if (where)
                *where = i;
        }
    }
    return m;
}
