/* One demuxer + one video decoder: the unit both the reader and each split-decode worker use. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <libavutil/dict.h>
#include <libavutil/pixdesc.h>

#include "io/av.h"
#include "io/io_internal.h"
#include "keyer/log.h"

#ifdef KEYER_HAVE_AVDEVICE
#include <libavdevice/avdevice.h>
#endif

/* Consecutive demuxer errors after which the input counts as ended (damaged beyond resync). */
#define MAX_DEMUX_ERRORS 64

/* Seconds of probing an opening may take beyond the timeout (libavformat's default
 * analyzeduration). */
#define OPEN_PROBE_NS 5000000000LL

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The caller asked the source to stop. */
static int user_interrupted(const kr_source *s)
{
    return s->interrupt && atomic_load_explicit(s->interrupt, memory_order_relaxed);
}

/* libavformat's interrupt callback: the caller's stop, or the current operation's deadline. */
static int interrupt_cb(void *opaque)
{
    const kr_source *s = opaque;
    return user_interrupted(s) || (s->deadline_ns && now_ns() > s->deadline_ns);
}

/* Starts the deadline of one blocking operation (no-op without a timeout). */
static void arm_deadline(kr_source *s, int64_t extra_ns)
{
    s->op_start_ns = now_ns();
    s->deadline_ns = s->timeout_ns ? s->op_start_ns + s->timeout_ns + extra_ns : 0;
}

/* Whether the operation started by arm_deadline() failed with @p ret for want of data: the
 * deadline, a protocol timeout, or any error once the timeout has passed (UDP reports EIO). */
static int timed_out(const kr_source *s, int ret)
{
    return s->timeout_ns && (ret == AVERROR_EXIT || ret == AVERROR(ETIMEDOUT) ||
                             now_ns() - s->op_start_ns >= s->timeout_ns);
}

int kr_source_is_sdp(const char *url)
{
    size_t n = url ? strlen(url) : 0;
    return n > 4 && !strstr(url, "://") && !strcasecmp(url + n - 4, ".sdp");
}

int kr_source_is_network(const char *url)
{
    const char *sep = url ? strstr(url, "://") : NULL;
    return (sep && sep > url && strncmp(url, "file://", 7) != 0) || kr_source_is_sdp(url);
}

/* The scheme of @p url is @p scheme (case-insensitive). */
static int has_scheme(const char *url, const char *scheme)
{
    size_t n = strlen(scheme);
    return !strncasecmp(url, scheme, n) && !strncmp(url + n, "://", 3);
}

/* Network timeouts in microseconds for the protocol of @p url, unless the caller's input
 * options set them: rw_timeout for every protocol, and "timeout" where it means socket I/O
 * (for rtmp it would mean listening, so it is left out there). */
static int add_timeouts(AVDictionary **opts, const char *url, int64_t us)
{
    static const char *const with_timeout[] = {"rtsp", "rtsps", "srt", "udp", "rtp",
                                               "tcp",  "http",  "https"};
    int ret = av_dict_set_int(opts, "rw_timeout", us, AV_DICT_DONT_OVERWRITE);
    for (size_t i = 0; ret >= 0 && i < sizeof(with_timeout) / sizeof(with_timeout[0]); i++)
        if (has_scheme(url, with_timeout[i]))
            ret = av_dict_set_int(opts, "timeout", us, AV_DICT_DONT_OVERWRITE);
    return ret;
}

static int is_camera(const char *url)
{
    return !strncmp(url, "/dev/video", 10) || !strncmp(url, "v4l2:", 5);
}

static const char *format_alias(const char *name)
{
    if (!strcmp(name, "y4m"))
        return "yuv4mpegpipe";
    if (!strcmp(name, "v4l2"))
        return "video4linux2";
    if (!strcmp(name, "mkv"))
        return "matroska";
    return name;
}

/* Names the container of a file libavformat could not open, for the error message. */
static void describe_open_failure(const char *url, int averr, char *buf, size_t n)
{
    buf[0] = 0;
    if (averr != AVERROR_INVALIDDATA || kr_source_is_network(url)) /* no second connection */
        return;
    AVIOContext *pb = NULL;
    if (avio_open(&pb, url, AVIO_FLAG_READ) < 0)
        return;
    const AVInputFormat *fmt = NULL;
    /* By content only: the extension of a misnamed file would decide otherwise. */
    if (av_probe_input_buffer2(pb, &fmt, NULL, NULL, 0, 0) >= 0 && fmt) {
        if (strstr(fmt->name, "mov") || strstr(fmt->name, "mp4"))
            snprintf(buf, n, " (an MP4/MOV file without its moov atom: cut before it was "
                             "finalised, or damaged)");
        else
            snprintf(buf, n, " (looks like %s, but its header is damaged)", fmt->name);
    } else {
        snprintf(buf, n, " (not a media file libavformat recognises)");
    }
    avio_closep(&pb);
}

/* The input format and the URL libavformat opens for o->url: a named format (aliases
 * resolved), V4L2 for camera paths (through libavdevice), "-" as standard input; a path must
 * exist. */
static keyer_status resolve_input(const kr_source_opts *o, const char **url_out,
                                  const AVInputFormat **ifmt_out, keyer_error *err)
{
    const char *url = o->url;
    const AVInputFormat *ifmt = NULL;
#ifdef KEYER_HAVE_AVDEVICE
    /* Input devices (V4L2) are known to libavformat once libavdevice registered them; the
     * call only fills libavdevice's own tables and may be repeated. */
    if (o->input_format || is_camera(url))
        avdevice_register_all();
#endif
    if (o->input_format) {
        ifmt = av_find_input_format(format_alias(o->input_format));
        if (!ifmt) {
            if (!strcmp(format_alias(o->input_format), "video4linux2"))
                return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                       "%s: V4L2 input needs libavdevice; this keyer was built "
                                       "without it", url);
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "%s: libavformat has no input format \"%s\"", url,
                                   o->input_format);
        }
    } else if (is_camera(url)) {
#ifdef KEYER_HAVE_AVDEVICE
        ifmt = av_find_input_format("video4linux2");
#endif
        if (!ifmt)
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "%s: V4L2 camera input needs libavdevice; this keyer was "
                                   "built without it", url);
        if (!strncmp(url, "v4l2:", 5))
            url += 5;
    }
    if (!strcmp(url, "-"))
        url = "pipe:0";
    else {
        keyer_status st = kr_av_check_input_path(url, err);
        if (st)
            return st;
    }
    *url_out = url;
    *ifmt_out = ifmt;
    return KEYER_OK;
}

/* Opens the container at @p url (with o->input_options) into s->fc and reads its stream
 * information (not for split workers, which reuse the main source's parameters); allocates
 * s->pkt and s->tmp. On failure the caller closes the source. */
static keyer_status open_input(kr_source *s, const kr_source_opts *o, const char *url,
                               const AVInputFormat *ifmt, keyer_error *err)
{
    AVDictionary *opts = NULL;
    if (o->input_options && *o->input_options &&
        av_dict_parse_string(&opts, o->input_options, "=", ":", 0) < 0) {
        av_dict_free(&opts);
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: cannot parse input options \"%s\" (want key=value:key=value)",
                               o->url, o->input_options);
    }
    /* an SDP file's RTP session: libavformat allows only the file protocol by default */
    if ((kr_source_is_sdp(url) &&
         av_dict_set(&opts, "protocol_whitelist", "file,udp,rtp", AV_DICT_DONT_OVERWRITE) < 0) ||
        (s->timeout_ns && kr_source_is_network(url) &&
         add_timeouts(&opts, url, o->timeout_us) < 0)) {
        av_dict_free(&opts);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", o->url);
    }
    s->fc = avformat_alloc_context();
    s->pkt = av_packet_alloc();
    s->tmp = av_frame_alloc();
    if (!s->fc || !s->pkt || !s->tmp) {
        av_dict_free(&opts);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", o->url);
    }
    s->fc->interrupt_callback.callback = interrupt_cb;
    s->fc->interrupt_callback.opaque = s;
    arm_deadline(s, OPEN_PROBE_NS);
    int ret = avformat_open_input(&s->fc, url, ifmt, &opts);
    av_dict_free(&opts);
    if (ret < 0) { /* avformat_open_input freed the context */
        char why[160];
        if (user_interrupted(s))
            return keyer_error_set(err, KEYER_STATUS_INTERRUPTED, "%s: opening was interrupted",
                                   o->url);
        if (timed_out(s, ret))
            return keyer_error_set(err, KEYER_STATUS_IO, "%s: no answer within %.1f s (input "
                                   "timeout)", o->url, (double)s->timeout_ns / 1e9);
        describe_open_failure(url, ret, why, sizeof(why));
        return kr_av_error(err, ret, "%s: cannot open%s", o->url, why);
    }
    if (!o->codecpar) {
        ret = avformat_find_stream_info(s->fc, NULL);
        if (ret < 0 && user_interrupted(s))
            return keyer_error_set(err, KEYER_STATUS_INTERRUPTED, "%s: opening was interrupted",
                                   o->url);
        if (ret < 0 && timed_out(s, ret))
            return keyer_error_set(err, KEYER_STATUS_IO, "%s: no stream information within "
                                   "%.1f s (input timeout)", o->url,
                                   (double)s->timeout_ns / 1e9);
        if (ret < 0)
            return kr_av_error(err, ret, "%s: cannot read stream information (%s)", o->url,
                               s->fc->iformat->name);
    }
    s->deadline_ns = 0;
    return KEYER_OK;
}

/* Sets s->stream: o->stream_index for split workers, else the best video stream. */
static keyer_status find_video_stream(kr_source *s, const kr_source_opts *o, keyer_error *err)
{
    if (o->codecpar) {
        if (o->stream_index < 0 || o->stream_index >= (int)s->fc->nb_streams)
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                   "%s: stream %d missing on reopening", o->url, o->stream_index);
        s->stream = o->stream_index;
        return KEYER_OK;
    }
    int ret = av_find_best_stream(s->fc, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
    if (ret < 0)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "%s: no video stream (%s container with %u stream%s)", o->url,
                               s->fc->iformat->name, s->fc->nb_streams,
                               s->fc->nb_streams == 1 ? "" : "s");
    s->stream = ret;
    return KEYER_OK;
}

/* The decoder for the stream's parameters @p par, after checking the coded size. */
static keyer_status find_decoder(const kr_source_opts *o, const AVStream *vs,
                                 const AVCodecParameters *par, const AVCodec **out,
                                 keyer_error *err)
{
    const AVCodec *codec = NULL;
    /* VP9 with alpha (WebM BlockAdditional) decodes with alpha only through libvpx. */
    AVDictionaryEntry *alpha = av_dict_get(vs->metadata, "alpha_mode", NULL, 0);
    if (par->codec_id == AV_CODEC_ID_VP9 && alpha && !strcmp(alpha->value, "1"))
        codec = avcodec_find_decoder_by_name("libvpx-vp9");
    if (!codec)
        codec = avcodec_find_decoder(par->codec_id);
    if (!codec) {
        char tag[AV_FOURCC_MAX_STRING_SIZE] = "";
        av_fourcc_make_string(tag, par->codec_tag);
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: unsupported video codec %s (tag %s): libavcodec has no "
                               "decoder for it", o->url, avcodec_get_name(par->codec_id), tag);
    }
    if (par->width <= 0 || par->height <= 0 || par->width > 16384 || par->height > 16384) {
        if (par->width != 0 || par->height != 0)
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA, "%s: video size %dx%d is invalid",
                                   o->url, par->width, par->height);
    }
    *out = codec;
    return KEYER_OK;
}

/* libavcodec's choice of output format for software decoders, counted (kr_hwdec::setups). */
static enum AVPixelFormat counted_format(AVCodecContext *dec, const enum AVPixelFormat *fmts)
{
    kr_hwdec *hw = dec->opaque;
    hw->setups++;
    return avcodec_default_get_format(dec, fmts);
}

/* Creates and opens s->dec for the stream s->stream, on NVDEC when o->hw_device is given and
 * NVDEC decodes the codec. On failure the caller closes the source. */
static keyer_status open_decoder(kr_source *s, const kr_source_opts *o, keyer_error *err)
{
    AVStream *vs = s->fc->streams[s->stream];
    const AVCodecParameters *par = o->codecpar ? o->codecpar : vs->codecpar;
    const AVCodec *codec = NULL;
    keyer_status st = find_decoder(o, vs, par, &codec, err);
    if (st)
        return st;
    s->dec = avcodec_alloc_context3(codec);
    if (!s->dec)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", o->url);
    int ret = avcodec_parameters_to_context(s->dec, par);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: decoder parameters", o->url);
    s->dec->pkt_timebase = vs->time_base;
    s->dec->flags |= AV_CODEC_FLAG_OUTPUT_CORRUPT;
    s->dec->thread_count = o->threads > 0 ? o->threads : 0;
    s->dec->opaque = &s->hw;
    s->dec->get_format = counted_format;
    if (o->hw_device) {
        if (kr_hwdec_codec_supported(codec)) {
            if ((st = kr_hwdec_attach(s->dec, &s->hw, o->hw_device, err)))
                return st;
            s->dec->thread_count = 1; /* NVDEC decodes; threads would only add surfaces */
            /* Decode-ahead: a deeper reorder buffer (libavcodec's H.264 decoder outputs a
             * picture once more than has_b_frames wait), so that NVDEC has that many more
             * pictures queued while the oldest is mapped and copied out; each holds a
             * surface, hence as many more surfaces (and one spare). */
            int ahead = o->decode_ahead > 0 ? o->decode_ahead : 0;
            if (ahead > 0)
                s->dec->has_b_frames += ahead;
            if (o->hw_surfaces > 0 || ahead > 0)
                s->dec->extra_hw_frames = o->hw_surfaces + (ahead > 0 ? ahead + 1 : 0);
        } else {
            keyer_log(s->logger, KEYER_LOG_WARNING,
                      "%s: NVDEC does not decode %s: decoding on the CPU", o->url, codec->name);
            s->hw.fellback = 1;
        }
    }
    ret = avcodec_open2(s->dec, codec, NULL);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: cannot open the %s decoder", o->url, codec->name);
    return KEYER_OK;
}

keyer_status kr_source_open(kr_source *s, const kr_source_opts *o, keyer_error *err)
{
    memset(s, 0, sizeof(*s));
    s->url = o->url;
    s->logger = o->logger;
    s->interrupt = o->interrupt;
    s->network = kr_source_is_network(o->url);
    s->timeout_ns = o->timeout_us > 0 && s->network ? o->timeout_us * 1000 : 0;
    s->stream = -1;
    s->hw.url = o->url;
    s->hw.logger = o->logger;
    s->hw.source = o->source_index;
    s->max_sent_pts = INT64_MIN;
    s->leftover_pts = INT64_MIN;
    const char *url = NULL;
    const AVInputFormat *ifmt = NULL;
    keyer_status st = resolve_input(o, &url, &ifmt, err);
    if (st)
        return st;
    if ((st = open_input(s, o, url, ifmt, err)) || (st = find_video_stream(s, o, err)) ||
        (st = open_decoder(s, o, err))) {
        kr_source_close(s);
        return st;
    }
    return KEYER_OK;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

keyer_status kr_source_receive(kr_source *s, AVFrame *out, keyer_error *err)
{
    av_frame_unref(out);
    for (;;) {
        if (user_interrupted(s))
            return keyer_error_set(err, KEYER_STATUS_INTERRUPTED, "%s: reading was interrupted",
                                   s->url);
        if (s->dec_eof)
            return KEYER_STATUS_END;
        int ret = avcodec_receive_frame(s->dec, out);
        if (ret == 0 && (s->keep_pending || s->leftover_pts != INT64_MIN)) {
            int64_t t = out->best_effort_timestamp != AV_NOPTS_VALUE ? out->best_effort_timestamp
                                                                    : out->pts;
            if (s->keep_pending || (t != AV_NOPTS_VALUE && t <= s->leftover_pts)) {
                av_frame_unref(out); /* the old position's, from before the seek */
                continue;
            }
        }
        if (ret == 0) {
            s->frames_out++;
            /* NVDEC has a handful of surfaces: frames the caller keeps must not hold them. */
            const kr_io_cuda_fns *cuda = kr_io_cuda();
            if (cuda && out->format == AV_PIX_FMT_CUDA) {
                keyer_status st = cuda->detach_frame(&s->hw.pool, out, s->tmp, err);
                if (st) {
                    av_frame_unref(out);
                    return keyer_error_prefix(err, "%s: ", s->url);
                }
            }
            return KEYER_OK;
        }
        if (ret == AVERROR_EOF) {
            s->dec_eof = 1;
            /* Packets that gave no frame without an error (the decoder dropped them). */
            if (s->sent_packets > s->frames_out)
                s->dropped_packets += s->sent_packets - s->frames_out;
            return KEYER_STATUS_END;
        }
        if (ret == AVERROR_INVALIDDATA) { /* a damaged frame (frame threads report it here) */
            s->dropped_packets++;
            s->frames_out++; /* its packet was counted as sent: not a silent drop */
            continue;
        }
        if (ret != AVERROR(EAGAIN))
            return kr_av_error(err, ret, "%s: decoding %s failed", s->url, s->dec->codec->name);
        if (s->flushed) { /* a decoder that wants input while draining: treat as done */
            s->dec_eof = 1;
            return KEYER_STATUS_END;
        }
        if (s->demux_eof) {
            ret = avcodec_send_packet(s->dec, NULL);
            s->flushed = 1;
            if (ret < 0 && ret != AVERROR_EOF)
                return kr_av_error(err, ret, "%s: flushing the %s decoder", s->url,
                                   s->dec->codec->name);
            continue;
        }
        if (s->timeout_ns && !s->deadline_ns)
            arm_deadline(s, 0); /* from the first read after data (EAGAIN keeps it) */
        ret = av_read_frame(s->fc, s->pkt);
        if (ret < 0) {
            if (ret == AVERROR(EAGAIN)) {
                if (s->deadline_ns && now_ns() > s->deadline_ns)
                    return keyer_error_set(err, KEYER_STATUS_IO, "%s: no data for %.1f s "
                                           "(input timeout)", s->url,
                                           (double)s->timeout_ns / 1e9);
                sleep_ms(2);
                continue;
            }
            if (user_interrupted(s))
                return keyer_error_set(err, KEYER_STATUS_INTERRUPTED,
                                       "%s: reading was interrupted", s->url);
            if (timed_out(s, ret))
                return keyer_error_set(err, KEYER_STATUS_IO, "%s: no data for %.1f s (input "
                                       "timeout)", s->url, (double)s->timeout_ns / 1e9);
            if (ret == AVERROR_EXIT)
                return keyer_error_set(err, KEYER_STATUS_INTERRUPTED,
                                       "%s: reading was interrupted", s->url);
            if (ret == AVERROR_EOF) {
                s->demux_eof = 1;
                continue;
            }
            int at_end = s->fc->pb && avio_feof(s->fc->pb);
            if (at_end && s->network) { /* the connection ended: not a cut file */
                s->demux_eof = 1;
                continue;
            }
            if (ret == AVERROR_INVALIDDATA || at_end) {
                if (at_end || ++s->demux_errors > MAX_DEMUX_ERRORS) {
                    if (!s->truncated)
                        keyer_log(s->logger, KEYER_LOG_WARNING,
                                  "%s: the input ends inside damaged or missing data (cut "
                                  "file?): decoding what was read", s->url);
                    s->truncated = 1;
                    s->demux_eof = 1;
                }
                continue;
            }
            return kr_av_error(err, ret, "%s: reading failed", s->url);
        }
        s->demux_errors = 0;
        s->deadline_ns = 0;
        if (s->pkt->stream_index != s->stream) {
            if (s->sink)
                s->sink(s->sink_opaque, s->pkt);
            av_packet_unref(s->pkt);
            continue;
        }
        if (s->pkt->flags & AV_PKT_FLAG_CORRUPT)
            s->corrupt_packets++;
        if (s->keep_pending) { /* the first packet after a kept-decoder seek decides */
            s->keep_pending = 0;
            if (!kr_source_clean_cut(s->dec, s->pkt) || s->sent_no_pts ||
                s->pkt->pts == AV_NOPTS_VALUE || s->pkt->pts <= s->max_sent_pts) {
                avcodec_flush_buffers(s->dec);
                s->leftover_pts = INT64_MIN;
                s->max_sent_pts = INT64_MIN;
                s->sent_no_pts = 0;
            }
        }
        if (s->pkt->pts == AV_NOPTS_VALUE)
            s->sent_no_pts = 1;
        else if (s->pkt->pts > s->max_sent_pts)
            s->max_sent_pts = s->pkt->pts;
        int counted = !(s->pkt->flags & AV_PKT_FLAG_DISCARD);
        ret = avcodec_send_packet(s->dec, s->pkt);
        av_packet_unref(s->pkt);
        if (ret >= 0 && counted) {
            s->sent_packets++;
            s->pictures_sent++;
        }
        if (ret < 0 && ret != AVERROR(EAGAIN)) {
            if (ret == AVERROR(ENOMEM) || ret == AVERROR_EXTERNAL || ret == AVERROR_BUG)
                return kr_av_error(err, ret, "%s: decoding %s failed", s->url,
                                   s->dec->codec->name);
            s->dropped_packets++;
            keyer_log(s->logger, KEYER_LOG_DEBUG, "%s: the %s decoder rejected a packet",
                      s->url, s->dec->codec->name);
        }
    }
}

keyer_status kr_source_seek(kr_source *s, int64_t ts, int flags, keyer_error *err)
{
    int keep = (flags & KR_SEEK_KEEP_DECODER) && !s->flushed && !s->dec_eof && !s->demux_eof;
    flags &= ~KR_SEEK_KEEP_DECODER;
    int ret = av_seek_frame(s->fc, s->stream, ts, flags | AVSEEK_FLAG_BACKWARD);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: cannot seek", s->url);
    if (keep) {
        /* decided at the first video packet (kr_source_receive); until then, and for the
         * frames presented up to the last packet sent, the decoder's output is the old
         * position's */
        s->keep_pending = 1;
        s->leftover_pts = s->max_sent_pts;
    } else {
        avcodec_flush_buffers(s->dec);
        s->keep_pending = 0;
        s->leftover_pts = INT64_MIN;
        s->max_sent_pts = INT64_MIN;
        s->sent_no_pts = 0;
    }
    s->demux_eof = s->flushed = s->dec_eof = 0;
    s->sent_packets = s->frames_out = 0;
    s->demux_errors = 0;
    return KEYER_OK;
}

/* The NAL unit type of the first picture (VCL) NAL unit in @p d: H.264 types 1..5; 0 when
 * there is none. @p len_size: bytes of each NAL unit's length prefix (avcC), 0: start codes. */
static int first_picture_nal(const uint8_t *d, int n, int len_size)
{
    int i = 0;
    while (i < n) {
        int start, end;
        if (len_size) {
            if (n - i < len_size)
                return 0;
            uint32_t len = 0;
            for (int b = 0; b < len_size; b++)
                len = (len << 8) | d[i + b];
            start = i + len_size;
            if (len == 0 || len > (uint32_t)(n - start))
                return 0;
            end = start + (int)len;
        } else {
            while (i + 3 <= n && !(d[i] == 0 && d[i + 1] == 0 && d[i + 2] == 1))
                i++;
            if (i + 3 > n)
                return 0;
            start = i + 3;
            end = start;
            while (end + 3 <= n && !(d[end] == 0 && d[end + 1] == 0 && d[end + 2] <= 1))
                end++;
            if (end + 3 > n)
                end = n;
        }
        if (start < n) {
            int type = d[start] & 0x1f;
            if (type >= 1 && type <= 5)
                return type;
        }
        i = end;
    }
    return 0;
}

int kr_source_clean_cut_of(enum AVCodecID codec, const uint8_t *extradata, int extradata_size,
                           const AVPacket *pkt)
{
    if (!pkt || codec != AV_CODEC_ID_H264 || !pkt->data || pkt->size <= 0 ||
        !(pkt->flags & AV_PKT_FLAG_KEY))
        return 0;
    int len_size = 0;
    if (extradata && extradata_size >= 7 && extradata[0] == 1)
        len_size = (extradata[4] & 3) + 1; /* avcC: lengthSizeMinusOne */
    return first_picture_nal(pkt->data, pkt->size, len_size) == 5;
}

int kr_source_clean_cut(const AVCodecContext *dec, const AVPacket *pkt)
{
    return dec ? kr_source_clean_cut_of(dec->codec_id, dec->extradata, dec->extradata_size, pkt)
               : 0;
}

void kr_source_close(kr_source *s)
{
    if (!s)
        return;
    avcodec_free_context(&s->dec);
    avformat_close_input(&s->fc);
    av_packet_free(&s->pkt);
    av_frame_free(&s->tmp);
    av_buffer_unref(&s->hw.pool); /* frames still out keep their buffers alive */
    kr_hwdec hw = s->hw;
    memset(s, 0, sizeof(*s));
    s->hw = hw; /* counters of the fallback stay readable */
    s->stream = -1;
}
