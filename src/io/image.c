#define _POSIX_C_SOURCE 200809L
/* Still images through libavformat/libavcodec: decode the first picture, write PNG. */
#include "keyer/image.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/dict.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>

#include "io/av.h"

static int is_image_output(keyer_pixel_format f)
{
    return f == KEYER_PIXEL_FORMAT_RGB24 || f == KEYER_PIXEL_FORMAT_RGBA ||
           f == KEYER_PIXEL_FORMAT_GRAY8 || f == KEYER_PIXEL_FORMAT_NV12 ||
           f == KEYER_PIXEL_FORMAT_YUV420P;
}

/* Receives the first picture of the file into @p pic. */
static keyer_status decode_first(const char *path, AVFormatContext *fc, int stream,
                                 AVCodecContext *dec, AVPacket *pkt, AVFrame *pic,
                                 keyer_error *err)
{
    int draining = 0;
    for (;;) {
        int ret = avcodec_receive_frame(dec, pic);
        if (ret == 0) {
            if (pic->decode_error_flags || (pic->flags & AV_FRAME_FLAG_CORRUPT))
                return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                       "%s: the %s picture is damaged (truncated or corrupt data)",
                                       path, avcodec_get_name(dec->codec_id));
            return KEYER_OK;
        }
        if (ret == AVERROR_EOF)
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                   "%s: the %s decoder produced no picture (truncated or corrupt "
                                   "data)", path, avcodec_get_name(dec->codec_id));
        if (ret != AVERROR(EAGAIN))
            return kr_av_error(err, ret, "%s: cannot decode the %s picture", path,
                               avcodec_get_name(dec->codec_id));
        if (draining)
            return keyer_error_set(err, KEYER_STATUS_INTERNAL,
                                   "%s: decoder asked for input while draining", path);
        ret = av_read_frame(fc, pkt);
        if (ret == AVERROR_EOF) {
            draining = 1;
            ret = avcodec_send_packet(dec, NULL);
        } else if (ret < 0) {
            return kr_av_error(err, ret, "%s: cannot read", path);
        } else {
            if (pkt->stream_index == stream)
                ret = avcodec_send_packet(dec, pkt);
            av_packet_unref(pkt);
        }
        if (ret < 0 && ret != AVERROR(EAGAIN) && ret != AVERROR_EOF)
            return kr_av_error(err, ret, "%s: cannot decode the %s picture", path,
                               avcodec_get_name(dec->codec_id));
    }
}

keyer_status keyer_image_read(const char *path, keyer_pixel_format format, keyer_frame *frame,
                              keyer_error *err)
{
    if (!path || !frame)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "keyer_image_read: %s is NULL",
                               !path ? "path" : "frame");
    keyer_frame_unref(frame);
    if (!is_image_output(format))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_image_read %s: pixel format %s is not an image output "
                               "(rgb24, rgba, gray8, nv12, yuv420p)",
                               path, keyer_pixel_format_name(format));
    keyer_status st = kr_av_check_input_path(path, err);
    if (st)
        return st;

    AVFormatContext *fc = NULL;
    AVCodecContext *dec = NULL;
    AVPacket *pkt = NULL;
    AVFrame *pic = NULL;
    AVDictionary *opts = NULL;
    kr_converter conv = {0};
    /* A file name is one picture, never a numbered sequence pattern. */
    av_dict_set(&opts, "pattern_type", "none", 0);
    int ret = avformat_open_input(&fc, path, NULL, &opts);
    av_dict_free(&opts);
    if (ret < 0) {
        st = kr_av_error(err, ret, "%s: cannot open as an image", path);
        goto fail;
    }
    ret = avformat_find_stream_info(fc, NULL);
    if (ret < 0) {
        st = kr_av_error(err, ret, "%s: cannot read stream information", path);
        goto fail;
    }
    const AVCodec *codec = NULL;
    int stream = av_find_best_stream(fc, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (stream == AVERROR_DECODER_NOT_FOUND) {
        int s = av_find_best_stream(fc, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
        st = keyer_error_set(err, KEYER_STATUS_UNSUPPORTED, "%s: no decoder for codec %s", path,
                             s >= 0 ? avcodec_get_name(fc->streams[s]->codecpar->codec_id) : "?");
        goto fail;
    }
    if (stream < 0 || !codec) {
        st = keyer_error_set(err, KEYER_STATUS_BAD_DATA, "%s: not an image (%s found no picture)",
                             path, fc->iformat ? fc->iformat->name : "libavformat");
        goto fail;
    }
    dec = avcodec_alloc_context3(codec);
    pkt = av_packet_alloc();
    pic = av_frame_alloc();
    if (!dec || !pkt || !pic) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: cannot allocate a decoder",
                             path);
        goto fail;
    }
    ret = avcodec_parameters_to_context(dec, fc->streams[stream]->codecpar);
    if (ret >= 0) {
        /* A damaged still is an error, not a picture with a grey bottom half. */
        dec->err_recognition |= AV_EF_EXPLODE | AV_EF_BITSTREAM | AV_EF_BUFFER;
        dec->thread_count = 1;
        ret = avcodec_open2(dec, codec, NULL);
    }
    if (ret < 0) {
        st = kr_av_error(err, ret, "%s: cannot open the %s decoder", path, codec->name);
        goto fail;
    }
    st = decode_first(path, fc, stream, dec, pkt, pic, err);
    if (st)
        goto fail;
    if (pic->width <= 0 || pic->height <= 0) {
        st = keyer_error_set(err, KEYER_STATUS_BAD_DATA, "%s: picture has size %dx%d", path,
                             pic->width, pic->height);
        goto fail;
    }

    st = keyer_frame_alloc(frame, format, pic->width, pic->height, NULL, err);
    if (st) {
        keyer_error_prefix(err, "%s: ", path);
        goto fail;
    }
    kr_image src, dst;
    kr_image_from_avframe(&src, pic);
    int yuv_out = format == KEYER_PIXEL_FORMAT_NV12 || format == KEYER_PIXEL_FORMAT_YUV420P;
    if (yuv_out) {
        const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(src.format);
        int src_rgb = !d || (d->flags & AV_PIX_FMT_FLAG_RGB) || (d->flags & AV_PIX_FMT_FLAG_PAL);
        frame->matrix = src_rgb ? KEYER_COLOR_MATRIX_BT601 : kr_av_matrix_from(src.colorspace);
        if (frame->matrix == KEYER_COLOR_MATRIX_UNSPECIFIED)
            frame->matrix = KEYER_COLOR_MATRIX_BT601; /* JFIF and unmarked stills */
        frame->range = src_rgb ? KEYER_COLOR_RANGE_FULL : kr_av_range_from(src.range);
        if (frame->range == KEYER_COLOR_RANGE_UNSPECIFIED)
            frame->range = KEYER_COLOR_RANGE_LIMITED;
    } else {
        frame->matrix = KEYER_COLOR_MATRIX_UNSPECIFIED;
        frame->range = KEYER_COLOR_RANGE_FULL;
    }
    kr_image_from_frame(&dst, frame);
    if (!yuv_out)
        dst.colorspace = src.colorspace == AVCOL_SPC_UNSPECIFIED ? AVCOL_SPC_SMPTE170M
                                                                  : src.colorspace;
    st = kr_convert(&conv, &src, &dst, err);
    if (st) {
        keyer_error_prefix(err, "%s: ", path);
        goto fail;
    }
    frame->pts = 0;
    frame->time_base = (keyer_rational){1, 1};
    frame->flags = KEYER_FRAME_FLAG_KEY;
    kr_convert_free(&conv);
    av_frame_free(&pic);
    av_packet_free(&pkt);
    avcodec_free_context(&dec);
    avformat_close_input(&fc);
    return KEYER_OK;
fail:
    keyer_frame_unref(frame);
    kr_convert_free(&conv);
    av_frame_free(&pic);
    av_packet_free(&pkt);
    avcodec_free_context(&dec);
    avformat_close_input(&fc);
    return st;
}

/* ---- PNG writing ------------------------------------------------------- */

/* Writes all of @p data to @p fd; 0 or an errno value. */
static int write_all(int fd, const uint8_t *data, size_t size)
{
    while (size > 0) {
        ssize_t n = write(fd, data, size);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (n == 0)
            return EIO;
        data += n;
        size -= (size_t)n;
    }
    return 0;
}

/* Encodes @p frame as one PNG packet. */
static keyer_status encode_png(const char *path, const keyer_frame *frame, AVPacket *pkt,
                               keyer_error *err)
{
    keyer_status st = KEYER_OK;
    AVCodecContext *enc = NULL;
    AVFrame *pic = NULL;
    const AVCodec *codec = avcodec_find_encoder(AV_CODEC_ID_PNG);
    if (!codec)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: libavcodec has no PNG encoder", path);
    enc = avcodec_alloc_context3(codec);
    pic = av_frame_alloc();
    if (!enc || !pic) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                             "%s: cannot allocate the PNG encoder", path);
        goto done;
    }
    enc->width = frame->width;
    enc->height = frame->height;
    enc->pix_fmt = kr_av_pix_fmt(frame->format);
    enc->time_base = (AVRational){1, 1};
    enc->color_range = AVCOL_RANGE_JPEG;
    /* Paeth prediction: photos compress by about a third more than without prediction
     * (libavcodec's default), losslessly; decoding is unchanged. */
    av_opt_set(enc->priv_data, "pred", "paeth", 0);
    int ret = avcodec_open2(enc, codec, NULL);
    if (ret < 0) {
        st = kr_av_error(err, ret, "%s: cannot open the PNG encoder", path);
        goto done;
    }
    pic->format = enc->pix_fmt;
    pic->width = frame->width;
    pic->height = frame->height;
    for (int p = 0; p < keyer_pixel_format_planes(frame->format); p++) {
        pic->data[p] = frame->data[p];
        pic->linesize[p] = (int)frame->stride[p];
    }
    pic->pts = 0;
    ret = avcodec_send_frame(enc, pic);
    if (ret >= 0)
        ret = avcodec_send_frame(enc, NULL);
    if (ret >= 0)
        ret = avcodec_receive_packet(enc, pkt);
    if (ret < 0)
        st = kr_av_error(err, ret, "%s: cannot encode PNG", path);
done:
    av_frame_free(&pic);
    avcodec_free_context(&enc);
    return st;
}

keyer_status keyer_image_write(const char *path, const keyer_frame *frame, keyer_error *err)
{
    if (!path || !*path || !frame)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_image_write: %s", !frame ? "frame is NULL" : "path is empty");
    keyer_status st = keyer_frame_check(frame, err);
    if (st)
        return keyer_error_prefix(err, "keyer_image_write %s: ", path);
    if (frame->memory != KEYER_MEMORY_HOST)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_image_write %s: the frame is in device memory", path);
    if (frame->format != KEYER_PIXEL_FORMAT_RGB24 && frame->format != KEYER_PIXEL_FORMAT_RGBA &&
        frame->format != KEYER_PIXEL_FORMAT_GRAY8)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "keyer_image_write %s: PNG is written from rgb24, rgba or gray8, "
                               "not %s", path, keyer_pixel_format_name(frame->format));
    for (int p = 0; p < keyer_pixel_format_planes(frame->format); p++)
        if (frame->stride[p] > INT32_MAX || frame->stride[p] < -INT32_MAX)
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "keyer_image_write %s: stride %td is too large", path,
                                   frame->stride[p]);

    AVPacket *pkt = av_packet_alloc();
    char *tmp = NULL;
    int fd = -1;
    if (!pkt)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: cannot allocate a packet",
                               path);
    st = encode_png(path, frame, pkt, err);
    if (st)
        goto fail;

    size_t n = strlen(path);
    tmp = malloc(n + 16);
    if (!tmp) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
        goto fail;
    }
    /* A fresh name beside the target, created exclusively with the usual 0666 & ~umask. */
    for (int attempt = 0; attempt < 32 && fd < 0; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        unsigned salt = (unsigned)ts.tv_nsec ^ ((unsigned)getpid() << 12) ^
                        (unsigned)((uintptr_t)&ts >> 4) ^ (unsigned)attempt * 2654435761u;
        snprintf(tmp, n + 16, "%s.tmp-%06x", path, salt & 0xffffffu);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        st = keyer_error_set(err, KEYER_STATUS_IO, "%s: cannot create a file in its directory: %s",
                             path, strerror(errno));
        free(tmp);
        tmp = NULL;
        goto fail;
    }
    int e = write_all(fd, pkt->data, (size_t)pkt->size);
    if (!e && fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
        e = errno;
    if (close(fd) != 0 && !e)
        e = errno;
    fd = -1;
    if (e) {
        st = keyer_error_set(err, KEYER_STATUS_IO, "%s: cannot write: %s", path, strerror(e));
        goto fail;
    }
    if (rename(tmp, path) != 0) {
        st = keyer_error_set(err, KEYER_STATUS_IO, "%s: cannot rename the written file: %s",
                             path, strerror(errno));
        goto fail;
    }
    free(tmp);
    av_packet_free(&pkt);
    return KEYER_OK;
fail:
    if (fd >= 0)
        close(fd);
    if (tmp) {
        unlink(tmp);
        free(tmp);
    }
    av_packet_free(&pkt);
    return st;
}
