/* The writer's copied streams: audio and subtitle packets of the reader's input carried over,
 * audio re-encoded where the container cannot hold its codec; chapters and metadata. */
#include "io/copy.h"

#include <stdlib.h>
#include <string.h>

#include <libavcodec/bsf.h>
#include <libavutil/audio_fifo.h>
#include <libavutil/channel_layout.h>
#include <libswresample/swresample.h>

#include "io/av.h"
#include "io/io_internal.h"
#include "keyer/log.h"

struct kr_copy_stream {
    int in_index;
    AVStream *ost;
    AVRational in_tb;
    int64_t last_dts; /* of the last copied packet, in the output stream's time base */
    /* re-encoding (the container cannot hold the input codec) */
    AVCodecContext *dec, *enc;
    SwrContext *swr;
    AVAudioFifo *fifo;
    AVFrame *in, *out;
    uint8_t **cvt; /* resampler output, grown when a larger frame arrives */
    int cvt_cap;
    int64_t next_pts; /* in enc->time_base; INT64_MIN until the first frame */
    /* AAC in ADTS frames (MPEG-TS inputs) into a container that wants raw AAC and its
     * AudioSpecificConfig: FFmpeg inserts this filter itself, except into fragmented MP4 */
    AVBSFContext *adts;
};

/* The input stream is AAC without an AudioSpecificConfig (ADTS, as MPEG-TS carries it) and
 * the container keeps codec configuration in its header (MP4, MOV, Matroska). */
static int needs_adts_filter(const AVStream *ist, const AVOutputFormat *of)
{
    return ist->codecpar->codec_id == AV_CODEC_ID_AAC && ist->codecpar->extradata_size == 0 &&
           (of->flags & AVFMT_GLOBALHEADER);
}

/* Copies @p ist through aac_adtstoasc into cs->ost. */
static keyer_status setup_adts_filter(kr_copies *cp, kr_copy_stream *cs, const AVStream *ist,
                                      keyer_error *err)
{
    const AVBitStreamFilter *f = av_bsf_get_by_name("aac_adtstoasc");
    if (!f)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: audio stream %d is AAC in ADTS frames and libavcodec has no "
                               "aac_adtstoasc filter", cp->path, ist->index);
    int ret = av_bsf_alloc(f, &cs->adts);
    if (ret >= 0)
        ret = avcodec_parameters_copy(cs->adts->par_in, ist->codecpar);
    if (ret >= 0) {
        cs->adts->time_base_in = ist->time_base;
        ret = av_bsf_init(cs->adts);
    }
    if (ret >= 0)
        ret = avcodec_parameters_copy(cs->ost->codecpar, cs->adts->par_out);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: aac_adtstoasc for audio stream %d", cp->path,
                           ist->index);
    cs->ost->codecpar->codec_tag = 0;
    cs->ost->time_base = ist->time_base;
    return KEYER_OK;
}

static keyer_status setup_transcode(kr_copies *cp, kr_copy_stream *cs, const AVStream *ist,
                                    enum AVCodecID to, keyer_error *err)
{
    const AVCodec *dc = avcodec_find_decoder(ist->codecpar->codec_id);
    const AVCodec *ec = avcodec_find_encoder(to);
    if (!dc || !ec)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: cannot re-encode audio stream %d (%s to %s): %s missing",
                               cp->path, ist->index, avcodec_get_name(ist->codecpar->codec_id),
                               avcodec_get_name(to), !dc ? "decoder" : "encoder");
    cs->dec = avcodec_alloc_context3(dc);
    cs->enc = avcodec_alloc_context3(ec);
    cs->in = av_frame_alloc();
    cs->out = av_frame_alloc();
    if (!cs->dec || !cs->enc || !cs->in || !cs->out)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", cp->path);
    int ret = avcodec_parameters_to_context(cs->dec, ist->codecpar);
    if (ret >= 0) {
        cs->dec->pkt_timebase = ist->time_base;
        ret = avcodec_open2(cs->dec, dc, NULL);
    }
    if (ret < 0)
        return kr_av_error(err, ret, "%s: audio decoder %s", cp->path, dc->name);
    AVCodecContext *e = cs->enc;
    int rate = cs->dec->sample_rate > 0 ? cs->dec->sample_rate : 48000;
    if (ec->supported_samplerates) {
        int best = ec->supported_samplerates[0];
        for (const int *r = ec->supported_samplerates; *r; r++)
            if (*r == rate)
                best = rate;
        rate = best;
    }
    e->sample_rate = rate;
    e->sample_fmt = ec->sample_fmts ? ec->sample_fmts[0] : cs->dec->sample_fmt;
    if (cs->dec->ch_layout.order == AV_CHANNEL_ORDER_UNSPEC || cs->dec->ch_layout.nb_channels <= 0)
        av_channel_layout_default(&e->ch_layout,
                                  cs->dec->ch_layout.nb_channels > 0 ? cs->dec->ch_layout.nb_channels : 2);
    else if ((ret = av_channel_layout_copy(&e->ch_layout, &cs->dec->ch_layout)) < 0)
        return kr_av_error(err, ret, "%s: channel layout", cp->path);
    e->bit_rate = 64000L * (e->ch_layout.nb_channels > 0 ? e->ch_layout.nb_channels : 2);
    e->time_base = (AVRational){1, rate};
    if (cp->oc->oformat->flags & AVFMT_GLOBALHEADER)
        e->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    ret = avcodec_open2(e, ec, NULL);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: audio encoder %s", cp->path, ec->name);
    ret = swr_alloc_set_opts2(&cs->swr, &e->ch_layout, e->sample_fmt, e->sample_rate,
                              &cs->dec->ch_layout, cs->dec->sample_fmt, cs->dec->sample_rate, 0,
                              NULL);
    if (ret >= 0)
        ret = swr_init(cs->swr);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: audio resampler", cp->path);
    int fs = e->frame_size > 0 ? e->frame_size : 1024;
    cs->fifo = av_audio_fifo_alloc(e->sample_fmt, e->ch_layout.nb_channels, fs * 4);
    if (!cs->fifo)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", cp->path);
    cs->out->format = e->sample_fmt;
    cs->out->sample_rate = e->sample_rate;
    cs->out->nb_samples = fs;
    if ((ret = av_channel_layout_copy(&cs->out->ch_layout, &e->ch_layout)) < 0 ||
        (ret = av_frame_get_buffer(cs->out, 0)) < 0)
        return kr_av_error(err, ret, "%s: audio frame", cp->path);
    ret = avcodec_parameters_from_context(cs->ost->codecpar, e);
    if (ret < 0)
        return kr_av_error(err, ret, "%s: audio parameters", cp->path);
    cs->ost->time_base = e->time_base;
    cs->next_pts = INT64_MIN;
    keyer_log(cp->logger, KEYER_LOG_INFO,
              "%s: %s cannot hold %s audio (stream %d): re-encoding it to %s", cp->path,
              cp->oc->oformat->name, avcodec_get_name(ist->codecpar->codec_id), ist->index,
              ec->name);
    return KEYER_OK;
}

keyer_status kr_copies_open(kr_copies *cp, AVFormatContext *oc, keyer_reader *src,
                            const char *path, const keyer_logger *logger, keyer_error *err)
{
    cp->path = path;
    cp->logger = logger;
    cp->oc = oc;
    cp->src = src;
    cp->pkt = av_packet_alloc();
    if (!cp->pkt)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    AVFormatContext *ic = kr_reader_format_context(cp->src);
    int vidx = kr_reader_video_stream(cp->src);
    const AVOutputFormat *of = cp->oc->oformat;
    cp->nmap = (int)ic->nb_streams;
    cp->map = malloc(sizeof(int) * (size_t)(cp->nmap ? cp->nmap : 1));
    cp->streams = calloc(ic->nb_streams ? ic->nb_streams : 1, sizeof(kr_copy_stream));
    if (!cp->map || !cp->streams)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", cp->path);
    for (unsigned i = 0; i < ic->nb_streams; i++) {
        cp->map[i] = -1;
        AVStream *ist = ic->streams[i];
        enum AVMediaType type = ist->codecpar->codec_type;
        if ((int)i == vidx || (type != AVMEDIA_TYPE_AUDIO && type != AVMEDIA_TYPE_SUBTITLE))
            continue;
        enum AVCodecID id = ist->codecpar->codec_id;
        int q = avformat_query_codec(of, id, FF_COMPLIANCE_NORMAL);
        enum AVCodecID transcode_to = AV_CODEC_ID_NONE;
        if (type == AVMEDIA_TYPE_SUBTITLE) {
            if (q != 1) {
                keyer_log(cp->logger, KEYER_LOG_WARNING,
                          "%s: %s cannot hold %s subtitles: stream %u is not copied", cp->path,
                          of->name, avcodec_get_name(id), i);
                continue;
            }
        } else if (of->audio_codec == AV_CODEC_ID_NONE) {
            keyer_log(cp->logger, KEYER_LOG_WARNING,
                      "%s: %s takes no audio: audio stream %u is not copied", cp->path, of->name, i);
            continue;
        } else if (q == 0) {
            transcode_to = avformat_query_codec(of, AV_CODEC_ID_AAC, FF_COMPLIANCE_NORMAL) == 1 &&
                                   avcodec_find_encoder(AV_CODEC_ID_AAC)
                               ? AV_CODEC_ID_AAC
                               : of->audio_codec;
        }
        kr_copy_stream *cs = &cp->streams[cp->count];
        cs->in_index = (int)i;
        cs->in_tb = ist->time_base;
        cs->last_dts = INT64_MIN;
        cs->ost = avformat_new_stream(cp->oc, NULL);
        if (!cs->ost)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", cp->path);
        cp->count++;
        cp->map[i] = cp->count - 1;
        cs->ost->disposition = ist->disposition;
        av_dict_copy(&cs->ost->metadata, ist->metadata, 0);
        if (transcode_to != AV_CODEC_ID_NONE) {
            keyer_status st = setup_transcode(cp, cs, ist, transcode_to, err);
            if (st)
                return st;
        } else if (needs_adts_filter(ist, of)) {
            keyer_status st = setup_adts_filter(cp, cs, ist, err);
            if (st)
                return st;
        } else {
            int ret = avcodec_parameters_copy(cs->ost->codecpar, ist->codecpar);
            if (ret < 0)
                return kr_av_error(err, ret, "%s: copying stream %u parameters", cp->path, i);
            cs->ost->codecpar->codec_tag = 0;
            cs->ost->time_base = ist->time_base;
        }
    }
    /* Chapters and global metadata. */
    av_dict_copy(&cp->oc->metadata, ic->metadata, AV_DICT_DONT_OVERWRITE);
    if (ic->nb_chapters > 0 && !kr_av_name_in_list(of->name, "image2")) {
        cp->oc->chapters = av_calloc(ic->nb_chapters, sizeof(*cp->oc->chapters));
        if (!cp->oc->chapters)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", cp->path);
        for (unsigned i = 0; i < ic->nb_chapters; i++) {
            const AVChapter *in = ic->chapters[i];
            AVChapter *c = av_mallocz(sizeof(*c));
            if (!c)
                return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory",
                                       cp->path);
            c->id = in->id;
            c->time_base = in->time_base;
            c->start = in->start;
            c->end = in->end;
            av_dict_copy(&c->metadata, in->metadata, 0);
            cp->oc->chapters[cp->oc->nb_chapters++] = c;
        }
    }
    kr_reader_attach_consumer(cp->src);
    return KEYER_OK;
}

static keyer_status drain_audio_encoder(kr_copies *cp, kr_copy_stream *cs, keyer_error *err)
{
    for (;;) {
        int ret = avcodec_receive_packet(cs->enc, cp->pkt);
        if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF)
            return KEYER_OK;
        if (ret < 0)
            return kr_av_error(err, ret, "%s: audio encoder", cp->path);
        av_packet_rescale_ts(cp->pkt, cs->enc->time_base, cs->ost->time_base);
        cp->pkt->stream_index = cs->ost->index;
        keyer_status st = kr_av_write_packet(cp->oc, cp->pkt, cp->path, err);
        if (st)
            return st;
    }
}

/* Encodes whole encoder frames from the FIFO; with @p flush also the rest. */
static keyer_status encode_fifo(kr_copies *cp, kr_copy_stream *cs, int flush, keyer_error *err)
{
    int fs = cs->out->nb_samples;
    for (;;) {
        int have = av_audio_fifo_size(cs->fifo);
        if (have <= 0 || (have < fs && !flush))
            return KEYER_OK;
        int n = have < fs ? have : fs;
        int ret = av_frame_make_writable(cs->out);
        if (ret < 0)
            return kr_av_error(err, ret, "%s: audio frame", cp->path);
        if (av_audio_fifo_read(cs->fifo, (void **)cs->out->data, n) != n)
            return keyer_error_set(err, KEYER_STATUS_INTERNAL, "%s: audio FIFO read", cp->path);
        if (n < fs && !(cs->enc->codec->capabilities & AV_CODEC_CAP_SMALL_LAST_FRAME))
            av_samples_set_silence(cs->out->data, n, fs - n, cs->enc->ch_layout.nb_channels,
                                   cs->enc->sample_fmt);
        else
            cs->out->nb_samples = n;
        cs->out->pts = cs->next_pts;
        cs->next_pts += n;
        ret = avcodec_send_frame(cs->enc, cs->out);
        cs->out->nb_samples = fs;
        if (ret < 0)
            return kr_av_error(err, ret, "%s: audio encoder", cp->path);
        keyer_status st = drain_audio_encoder(cp, cs, err);
        if (st)
            return st;
    }
}

/* Decodes, resamples and queues for re-encoding; @p pkt NULL flushes the decoder. */
static keyer_status transcode_packet(kr_copies *cp, kr_copy_stream *cs, AVPacket *pkt,
                                     keyer_error *err)
{
    int ret = avcodec_send_packet(cs->dec, pkt);
    if (pkt)
        av_packet_unref(pkt);
    if (ret < 0 && ret != AVERROR_EOF) {
        keyer_log(cp->logger, KEYER_LOG_DEBUG, "%s: audio decoder rejected a packet", cp->path);
        return KEYER_OK;
    }
    for (;;) {
        ret = avcodec_receive_frame(cs->dec, cs->in);
        if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF)
            break;
        if (ret < 0)
            return kr_av_error(err, ret, "%s: audio decoder", cp->path);
        if (cs->next_pts == INT64_MIN) {
            int64_t t = cs->in->best_effort_timestamp;
            cs->next_pts = t == AV_NOPTS_VALUE ? 0 : av_rescale_q(t, cs->in_tb, cs->enc->time_base);
        }
        int out_n = swr_get_out_samples(cs->swr, cs->in->nb_samples);
        if (out_n < 0)
            return kr_av_error(err, out_n, "%s: resampler", cp->path);
        if (out_n > cs->cvt_cap) {
            if (cs->cvt)
                av_freep(&cs->cvt[0]);
            av_freep(&cs->cvt);
            cs->cvt_cap = 0;
            ret = av_samples_alloc_array_and_samples(&cs->cvt, NULL,
                                                     cs->enc->ch_layout.nb_channels, out_n,
                                                     cs->enc->sample_fmt, 0);
            if (ret < 0)
                return kr_av_error(err, ret, "%s: audio buffer", cp->path);
            cs->cvt_cap = out_n;
        }
        int got = swr_convert(cs->swr, cs->cvt, out_n, (const uint8_t **)cs->in->extended_data,
                              cs->in->nb_samples);
        av_frame_unref(cs->in);
        if (got < 0)
            return kr_av_error(err, got, "%s: resampler", cp->path);
        if (got > 0 && av_audio_fifo_write(cs->fifo, (void **)cs->cvt, got) != got)
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: audio FIFO", cp->path);
        keyer_status st = encode_fifo(cp, cs, 0, err);
        if (st)
            return st;
    }
    return KEYER_OK;
}

/* Writes copied packet @p pkt (input time base; consumed) unless it does not go forward in
 * the output's time base: out of order after a seek of the reader or a live input's
 * reconnection, or two input timestamps that round to one output tick (the muxer refuses a
 * dts that does not increase, and that would fail the whole output). */
static keyer_status write_copied(kr_copies *cp, kr_copy_stream *cs, AVPacket *pkt,
                                 keyer_error *err)
{
    av_packet_rescale_ts(pkt, cs->in_tb, cs->ost->time_base);
    if (pkt->dts != AV_NOPTS_VALUE) {
        if (cs->last_dts != INT64_MIN && pkt->dts <= cs->last_dts) {
            av_packet_unref(pkt);
            return KEYER_OK;
        }
        cs->last_dts = pkt->dts;
    }
    pkt->stream_index = cs->ost->index;
    pkt->pos = -1;
    return kr_av_write_packet(cp->oc, pkt, cp->path, err);
}

keyer_status kr_copies_write_pending(kr_copies *cp, keyer_error *err)
{
    if (!cp->src)
        return KEYER_OK;
    while (kr_reader_take_packet(cp->src, cp->pkt)) {
        AVPacket *pkt = cp->pkt;
        int idx = pkt->stream_index >= 0 && pkt->stream_index < cp->nmap
                      ? cp->map[pkt->stream_index]
                      : -1;
        if (idx < 0) {
            av_packet_unref(pkt);
            continue;
        }
        kr_copy_stream *cs = &cp->streams[idx];
        if (cs->enc) {
            keyer_status st = transcode_packet(cp, cs, pkt, err);
            if (st)
                return st;
            continue;
        }
        if (!cs->adts) {
            keyer_status st = write_copied(cp, cs, pkt, err);
            if (st)
                return st;
            continue;
        }
        if (av_bsf_send_packet(cs->adts, pkt) < 0) { /* not an ADTS frame: dropped */
            av_packet_unref(pkt);
            continue;
        }
        while (av_bsf_receive_packet(cs->adts, pkt) == 0) {
            keyer_status st = write_copied(cp, cs, pkt, err);
            if (st)
                return st;
        }
    }
    return KEYER_OK;
}

int kr_copies_count(const kr_copies *cp) { return cp->count; }

keyer_status kr_copies_flush(kr_copies *cp, int i, keyer_error *err)
{
    kr_copy_stream *cs = &cp->streams[i];
    if (!cs->enc || cs->next_pts == INT64_MIN)
        return KEYER_OK;
    keyer_status st;
    if ((st = transcode_packet(cp, cs, NULL, err)) || (st = encode_fifo(cp, cs, 1, err)))
        return st;
    avcodec_send_frame(cs->enc, NULL);
    return drain_audio_encoder(cp, cs, err);
}

void kr_copies_free(kr_copies *cp)
{
    for (int i = 0; cp->streams && i < cp->count; i++) {
        kr_copy_stream *cs = &cp->streams[i];
        avcodec_free_context(&cs->dec);
        avcodec_free_context(&cs->enc);
        swr_free(&cs->swr);
        av_bsf_free(&cs->adts);
        if (cs->fifo)
            av_audio_fifo_free(cs->fifo);
        av_frame_free(&cs->in);
        av_frame_free(&cs->out);
        if (cs->cvt)
            av_freep(&cs->cvt[0]);
        av_freep(&cs->cvt);
    }
    free(cp->streams);
    free(cp->map);
    av_packet_free(&cp->pkt);
    memset(cp, 0, sizeof(*cp));
}
