/* Between GStreamer's mapped video frames and keyer frames (see video_frames.h). */
#include "video_frames.h"

#include <stdio.h>
#include <string.h>

keyer_pixel_format kg_keyer_format(GstVideoFormat format, gboolean *swap)
{
    *swap = FALSE;
    switch (format) {
    case GST_VIDEO_FORMAT_NV12:
        return KEYER_PIXEL_FORMAT_NV12;
    case GST_VIDEO_FORMAT_I420:
        return KEYER_PIXEL_FORMAT_YUV420P;
    case GST_VIDEO_FORMAT_RGBA:
        return KEYER_PIXEL_FORMAT_RGBA;
    case GST_VIDEO_FORMAT_RGB:
        return KEYER_PIXEL_FORMAT_RGB24;
    case GST_VIDEO_FORMAT_GRAY8:
        return KEYER_PIXEL_FORMAT_GRAY8;
    case GST_VIDEO_FORMAT_BGRx:
        *swap = TRUE;
        return KEYER_PIXEL_FORMAT_RGBA;
    default:
        return KEYER_PIXEL_FORMAT_NONE;
    }
}

static keyer_color_matrix matrix_of(const GstVideoColorimetry *c)
{
    switch (c->matrix) {
    case GST_VIDEO_COLOR_MATRIX_BT601:
        return KEYER_COLOR_MATRIX_BT601;
    case GST_VIDEO_COLOR_MATRIX_BT709:
        return KEYER_COLOR_MATRIX_BT709;
    case GST_VIDEO_COLOR_MATRIX_BT2020:
        return KEYER_COLOR_MATRIX_BT2020;
    default:
        return KEYER_COLOR_MATRIX_UNSPECIFIED;
    }
}

static keyer_color_range range_of(const GstVideoColorimetry *c)
{
    switch (c->range) {
    case GST_VIDEO_COLOR_RANGE_0_255:
        return KEYER_COLOR_RANGE_FULL;
    case GST_VIDEO_COLOR_RANGE_16_235:
        return KEYER_COLOR_RANGE_LIMITED;
    default:
        return KEYER_COLOR_RANGE_UNSPECIFIED;
    }
}

gboolean kg_frame_view(const GstVideoFrame *vf, keyer_frame *out)
{
    gboolean swap;
    keyer_pixel_format f = kg_keyer_format(GST_VIDEO_FRAME_FORMAT(vf), &swap);
    if (f == KEYER_PIXEL_FORMAT_NONE)
        return FALSE;
    memset(out, 0, sizeof(*out));
    out->format = f;
    out->width = GST_VIDEO_FRAME_WIDTH(vf);
    out->height = GST_VIDEO_FRAME_HEIGHT(vf);
    out->memory = KEYER_MEMORY_HOST;
    for (guint p = 0; p < GST_VIDEO_FRAME_N_PLANES(vf) && p < KEYER_FRAME_MAX_PLANES; p++) {
        out->data[p] = GST_VIDEO_FRAME_PLANE_DATA(vf, p);
        out->stride[p] = GST_VIDEO_FRAME_PLANE_STRIDE(vf, p);
    }
    out->pts = INT64_MIN;
    out->time_base = (keyer_rational){0, 1};
    if (GST_VIDEO_INFO_IS_YUV(&vf->info)) {
        out->matrix = matrix_of(&GST_VIDEO_INFO_COLORIMETRY(&vf->info));
        out->range = range_of(&GST_VIDEO_INFO_COLORIMETRY(&vf->info));
    }
    return TRUE;
}

void kg_swap_rb(const keyer_frame *src, keyer_frame *dst)
{
    for (int y = 0; y < src->height; y++) {
        const uint8_t *s = src->data[0] + y * src->stride[0];
        uint8_t *d = dst->data[0] + y * dst->stride[0];
        for (int x = 0; x < src->width; x++, s += 4, d += 4) {
            uint8_t r = s[2], g = s[1], b = s[0];
            d[0] = r;
            d[1] = g;
            d[2] = b;
            d[3] = 255;
        }
    }
}

gboolean kg_frame_copy_out(const keyer_frame *src, GstVideoFrame *dst, gboolean dst_on_device,
                           keyer_frame *host, char *why, size_t why_size)
{
    gboolean swap;
    keyer_pixel_format f = kg_keyer_format(GST_VIDEO_FRAME_FORMAT(dst), &swap);
    if (f != src->format || src->width != GST_VIDEO_FRAME_WIDTH(dst) ||
        src->height != GST_VIDEO_FRAME_HEIGHT(dst)) {
        snprintf(why, why_size, "a %dx%d %s frame into %dx%d %s", src->width, src->height,
                 keyer_pixel_format_name(src->format), GST_VIDEO_FRAME_WIDTH(dst),
                 GST_VIDEO_FRAME_HEIGHT(dst), GST_VIDEO_INFO_NAME(&dst->info));
        return FALSE;
    }
    uint8_t *planes[4] = {0};
    gint strides[4] = {0};
    for (guint p = 0; p < GST_VIDEO_FRAME_N_PLANES(dst) && p < 4; p++) {
        planes[p] = GST_VIDEO_FRAME_PLANE_DATA(dst, p);
        strides[p] = GST_VIDEO_FRAME_PLANE_STRIDE(dst, p);
    }
    if (src->memory == KEYER_MEMORY_CUDA || dst_on_device) {
#ifdef KEYER_GST_HAVE_CUDA
        if (!swap)
            return kg_cuda_copy_planes(src, planes, strides, dst_on_device, src->device, why,
                                       why_size);
        /* BGRx (host memory only): down into @p host, then swapped */
        keyer_error err = {0};
        if ((host->width != src->width || host->height != src->height ||
             host->format != KEYER_PIXEL_FORMAT_RGBA || host->memory != KEYER_MEMORY_HOST) &&
            keyer_frame_alloc(host, KEYER_PIXEL_FORMAT_RGBA, src->width, src->height, NULL,
                              &err)) {
            snprintf(why, why_size, "%s", err.message);
            return FALSE;
        }
        uint8_t *hp[4] = {host->data[0]};
        gint hs[4] = {host->stride[0]};
        if (!kg_cuda_copy_planes(src, hp, hs, FALSE, src->device, why, why_size))
            return FALSE;
        src = host;
#else
        (void)host;
        snprintf(why, why_size, "CUDA memory, but keyer's GStreamer elements were built without "
                                "CUDA");
        return FALSE;
#endif
    }
    if (swap) {
        keyer_frame view;
        if (!kg_frame_view(dst, &view))
            return FALSE;
        kg_swap_rb(src, &view);
        return TRUE;
    }
    for (int p = 0; p < keyer_pixel_format_planes(f); p++) {
        int pw, ph, bpe;
        if (keyer_pixel_format_plane(f, src->width, src->height, p, &pw, &ph, &bpe, NULL))
            return FALSE;
        size_t row = (size_t)pw * (size_t)bpe;
        const uint8_t *s = src->data[p];
        for (int y = 0; y < ph; y++)
            memcpy(planes[p] + (size_t)y * strides[p], s + y * src->stride[p], row);
    }
    return TRUE;
}
