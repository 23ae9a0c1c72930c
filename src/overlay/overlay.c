/*
 * The overlay object: primitives recorded in drawing order (lines, dots, polylines, curves,
 * boxes; text and keypoints in text.c and draw.c), and keyer_overlay_render, which checks
 * the frame and hands it to the renderer of its memory (backend.h: cpu/ and cuda/).
 */
#include "keyer/overlay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "overlay/backend.h"

keyer_status keyer_overlay_create(int capacity, keyer_overlay **out, keyer_error *err)
{
    if (!out || capacity < 1 || capacity > (1 << 22))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "overlay: capacity %d outside 1..%d", capacity, 1 << 22);
    *out = NULL;
    keyer_overlay *ov = calloc(1, sizeof(*ov));
    if (!ov || !(ov->prims = malloc((size_t)capacity * sizeof(kr_prim)))) {
        free(ov);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "overlay: out of memory");
    }
    ov->capacity = capacity;
    *out = ov;
    return KEYER_OK;
}

void keyer_overlay_destroy(keyer_overlay **pov)
{
    if (!pov || !*pov)
        return;
    keyer_overlay *ov = *pov;
    for (int m = 0; m < KR_OVERLAY_BACKENDS; m++) {
        const kr_overlay_backend *b = kr_overlay_backend_for((keyer_memory_type)m);
        if (b)
            b->state_destroy(ov->state[m]);
    }
    free(ov->prims);
    free(ov);
    *pov = NULL;
}

void keyer_overlay_clear(keyer_overlay *ov)
{
    if (ov)
        ov->count = 0;
}

int keyer_overlay_count(const keyer_overlay *ov) { return ov ? ov->count : 0; }

void kr_overlay_premultiply(keyer_color c, float out[4])
{
    float a = fminf(fmaxf(c.a, 0.0f), 1.0f);
    out[0] = fminf(fmaxf(c.r, 0.0f), 1.0f) * a;
    out[1] = fminf(fmaxf(c.g, 0.0f), 1.0f) * a;
    out[2] = fminf(fmaxf(c.b, 0.0f), 1.0f) * a;
    out[3] = a;
}

static int finite4(float a, float b, float c, float d)
{
    return isfinite(a) && isfinite(b) && isfinite(c) && isfinite(d);
}

kr_prim *kr_overlay_new_prim(keyer_overlay *ov, keyer_error *err)
{
    if (!ov) {
        keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "overlay is NULL");
        return NULL;
    }
    if (ov->count >= ov->capacity) {
        keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                        "overlay: capacity of %d primitives reached", ov->capacity);
        return NULL;
    }
    kr_prim *p = &ov->prims[ov->count];
    memset(p, 0, sizeof(*p)); /* every byte defined: the record is copied to the GPU as is */
    return p;
}

keyer_status keyer_overlay_add_line(keyer_overlay *ov, float x0, float y0, float x1, float y1,
                                    float width, keyer_color color, keyer_error *err)
{
    if (!finite4(x0, y0, x1, y1) || !(width > 0) || !isfinite(width))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "overlay line: coordinates must be finite and width > 0");
    kr_prim *p = kr_overlay_new_prim(ov, err);
    if (!p)
        return err ? err->status : KEYER_STATUS_INVALID_ARGUMENT;
    p->kind = KR_PRIM_SEGMENT;
    p->x0 = x0;
    p->y0 = y0;
    p->x1 = x1;
    p->y1 = y1;
    p->half_width = width / 2;
    float m = p->half_width + 1.0f;
    p->bx0 = fminf(x0, x1) - m;
    p->by0 = fminf(y0, y1) - m;
    p->bx1 = fmaxf(x0, x1) + m;
    p->by1 = fmaxf(y0, y1) + m;
    kr_overlay_premultiply(color, p->stroke);
    ov->count++;
    return KEYER_OK;
}

keyer_status keyer_overlay_add_dot(keyer_overlay *ov, float x, float y, float radius,
                                   keyer_color color, keyer_error *err)
{
    return keyer_overlay_add_line(ov, x, y, x, y, 2 * radius, color, err);
}

keyer_status keyer_overlay_add_polyline(keyer_overlay *ov, const float *xy, int n, float width,
                                        keyer_color color, keyer_error *err)
{
    if (!xy || n < 2)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "overlay polyline: needs at least 2 points");
    if (ov && ov->count + n - 1 > ov->capacity)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "overlay: capacity of %d primitives reached", ov->capacity);
    for (int i = 0; i + 1 < n; i++) {
        keyer_status st = keyer_overlay_add_line(ov, xy[2 * i], xy[2 * i + 1], xy[2 * i + 2],
                                                 xy[2 * i + 3], width, color, err);
        if (st)
            return st;
    }
    return KEYER_OK;
}

keyer_status keyer_overlay_add_curve(keyer_overlay *ov, float x0, float y0, float x1, float y1,
                                     float bend, float width, keyer_color color, keyer_error *err)
{
    if (!finite4(x0, y0, x1, y1) || !isfinite(bend))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "overlay curve: values must be finite");
    if (!(width > 0) || !isfinite(width))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "overlay line: coordinates must be finite and width > 0");
    float dx = x1 - x0, dy = y1 - y0, len = sqrtf(dx * dx + dy * dy);
    float cx = (x0 + x1) / 2 - dy * bend, cy = (y0 + y1) / 2 + dx * bend;
    /* Points of the curve are weighted means of these three: bounded, so finite. */
    const float big = 1e30f;
    if (!(fabsf(x0) <= big && fabsf(y0) <= big && fabsf(x1) <= big && fabsf(y1) <= big &&
          fabsf(cx) <= big && fabsf(cy) <= big))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "overlay curve: ends or control point beyond 1e30 pixels");
    /* A quadratic's distance from its chord is at most |P0 - 2C + P1| / 4 per subdivision level;
     * n segments keep the error below 0.1 px when dev / (4 n^2) <= 0.1 (dev = |P0-2C+P1|). */
    float ddx = x0 - 2 * cx + x1, ddy = y0 - 2 * cy + y1;
    float dev = sqrtf(ddx * ddx + ddy * ddy);
    int n = (int)ceilf(sqrtf(dev / 0.4f));
    if (n < 1 || len == 0)
        n = 1;
    if (n > 64)
        n = 64;
    if (!ov)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "overlay is NULL");
    if (ov->count + n > ov->capacity)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "overlay: capacity of %d primitives reached", ov->capacity);
    /* One curve record and n - 1 slots for the rest of its segments: the renderer flattens it
     * (overlay_internal.h), on the device for CUDA frames. */
    kr_prim *p = kr_overlay_new_prim(ov, err);
    p->kind = KR_PRIM_CURVE;
    p->x0 = x0;
    p->y0 = y0;
    p->x1 = x1;
    p->y1 = y1;
    p->cx = cx;
    p->cy = cy;
    p->segs = n;
    p->half_width = width / 2;
    float m = p->half_width + 1.0f;
    p->bx0 = fminf(fminf(x0, x1), cx) - m;
    p->by0 = fminf(fminf(y0, y1), cy) - m;
    p->bx1 = fmaxf(fmaxf(x0, x1), cx) + m;
    p->by1 = fmaxf(fmaxf(y0, y1), cy) + m;
    kr_overlay_premultiply(color, p->stroke);
    ov->count++;
    for (int i = 1; i < n; i++) {
        kr_prim *r = kr_overlay_new_prim(ov, err);
        r->kind = KR_PRIM_CURVE_REST;
        r->bx0 = r->by0 = INFINITY; /* an empty bounding box */
        r->bx1 = r->by1 = -INFINITY;
        ov->count++;
    }
    return KEYER_OK;
}

keyer_status keyer_overlay_add_box(keyer_overlay *ov, float x0, float y0, float x1, float y1,
                                   float radius, float stroke_width, keyer_color stroke,
                                   keyer_color fill, keyer_error *err)
{
    if (!finite4(x0, y0, x1, y1) || !isfinite(radius) || !isfinite(stroke_width) || radius < 0 ||
        stroke_width < 0 || x1 < x0 || y1 < y0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "overlay box: needs finite x0 <= x1, y0 <= y1, radius >= 0, "
                               "stroke width >= 0");
    kr_prim *p = kr_overlay_new_prim(ov, err);
    if (!p)
        return err ? err->status : KEYER_STATUS_INVALID_ARGUMENT;
    p->kind = KR_PRIM_BOX;
    p->x0 = (x0 + x1) / 2; /* centre */
    p->y0 = (y0 + y1) / 2;
    p->x1 = (x1 - x0) / 2; /* half extents */
    p->y1 = (y1 - y0) / 2;
    p->radius = fminf(radius, fminf(p->x1, p->y1));
    p->half_width = stroke_width / 2;
    float m = p->half_width + 1.0f;
    p->bx0 = x0 - m;
    p->by0 = y0 - m;
    p->bx1 = x1 + m;
    p->by1 = y1 + m;
    kr_overlay_premultiply(stroke, p->stroke);
    if (stroke_width == 0)
        p->stroke[3] = 0;
    kr_overlay_premultiply(fill, p->fill);
    ov->count++;
    return KEYER_OK;
}

/* YUV conversion constants for frame @p f's matrix and range. */
static kr_ov_yuv yuv_coeffs(const keyer_frame *f)
{
    kr_ov_yuv c;
    keyer_color_matrix m = f->matrix;
    if (m == KEYER_COLOR_MATRIX_UNSPECIFIED)
        m = f->height >= 720 ? KEYER_COLOR_MATRIX_BT709 : KEYER_COLOR_MATRIX_BT601;
    if (m == KEYER_COLOR_MATRIX_BT709) {
        c.kr = 0.2126f;
        c.kb = 0.0722f;
    } else if (m == KEYER_COLOR_MATRIX_BT2020) {
        c.kr = 0.2627f;
        c.kb = 0.0593f;
    } else {
        c.kr = 0.299f;
        c.kb = 0.114f;
    }
    c.kg = 1 - c.kr - c.kb;
    if (f->range == KEYER_COLOR_RANGE_FULL) {
        c.y_off = 0;
        c.y_scale = 255;
        c.c_scale = 255;
    } else {
        c.y_off = 16;
        c.y_scale = 219;
        c.c_scale = 224;
    }
    return c;
}

keyer_status keyer_overlay_set_stream(keyer_overlay *ov, void *cuda_stream, keyer_error *err)
{
    if (!ov)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "overlay is NULL");
    ov->cuda_stream = cuda_stream;
    return KEYER_OK;
}

keyer_status keyer_overlay_render(keyer_overlay *ov, keyer_frame *f, keyer_error *err)
{
    if (!ov)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "overlay is NULL");
    keyer_status st = keyer_frame_check(f, err);
    if (st)
        return keyer_error_prefix(err, "overlay render: ");
    int yuv = f->format == KEYER_PIXEL_FORMAT_NV12 || f->format == KEYER_PIXEL_FORMAT_YUV420P;
    if (!yuv && f->format != KEYER_PIXEL_FORMAT_RGBA)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "overlay render: %s frames are not supported (rgba, nv12, yuv420p)",
                               keyer_pixel_format_name(f->format));
    const kr_overlay_backend *b = kr_overlay_backend_for(f->memory);
    if (!b && f->memory == KEYER_MEMORY_CUDA)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "overlay render: a CUDA frame, but keyer was built without CUDA");
    if (!b || (unsigned)f->memory >= KR_OVERLAY_BACKENDS)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "overlay render: unknown frame memory type %d", (int)f->memory);
    if (ov->count == 0)
        return KEYER_OK;
    int curves = 0;
    for (int i = 0; i < ov->count; i++)
        curves += ov->prims[i].kind == KR_PRIM_CURVE;
    kr_overlay_job job = {
        .prims = ov->prims,
        .curves = curves,
        .count = ov->count,
        .frame = f,
        .yuv = yuv,
        .yc = yuv_coeffs(f),
        .stream = ov->cuda_stream,
    };
    return b->render(&ov->state[f->memory], &job, err);
}
