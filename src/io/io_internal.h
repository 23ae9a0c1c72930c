/*
 * Internal pieces of keyer's video I/O shared between reader.c, source.c, live.c, hwdecode.c,
 * split.c and writer.c. Not part of the public API.
 *
 *  - kr_hwdec: NVDEC through libavcodec's CUDA hwaccel (primary CUDA context), with the
 *    logged fallback to software decoding.
 *  - kr_source: one demuxer + one video decoder over an input; produces AVFrames in
 *    presentation order, counts damaged packets and frames, hands other packets to a sink.
 *  - kr_live: reconnection of a live network source, its timestamps continued over gaps.
 *  - kr_split: parallel decode of one input by several sources, chunked at keyframes.
 *  - the reader's queue of audio/subtitle packets that a writer copies.
 */
#ifndef KEYER_IO_INTERNAL_H
#define KEYER_IO_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>

#include "keyer/io.h"

/* ---- NVDEC (hwdecode.c) ---------------------------------------------------------------- */

/** Hardware-decode state of one decoder; lives as long as the decoder (its get_format opaque). */
typedef struct kr_hwdec {
    AVBufferRef *pool; /* device buffers NVDEC frames are copied into (CUDA builds) */
    int active;   /* the last get_format picked AV_PIX_FMT_CUDA */
    int fellback; /* NVDEC was tried and the decoder went to software (logged once) */
    int ordinal;  /* CUDA device ordinal */
    int source;   /* index of the source, used in log lines (split decode) */
    int64_t setups; /* get_format calls: the decoder's set-ups (the first picture, and again
                     * after each flush; for NVDEC each is a new decoder session) */
    const char *url;
    const keyer_logger *logger;
} kr_hwdec;

/** 1 when this keyer build may use NVDEC (built with CUDA: kr_io_cuda() is not NULL). */
int kr_hwdec_built(void);

/**
 * Creates a CUDA device context on device @p ordinal using the primary CUDA context
 * (AV_CUDA_USE_PRIMARY_CONTEXT), so frames share keyer's CUDA context. @p own_stream 1: the
 * context gets a non-blocking CUDA stream of its own (destroyed with it), on which a decoder
 * using it maps and copies its frames; 0: the legacy default stream, shared by every user
 * of the device. Errors: UNSUPPORTED (built without CUDA), DEVICE (no GPU, no driver, the
 * stream cannot be made).
 */
keyer_status kr_hwdec_device_create(int ordinal, int own_stream, AVBufferRef **out,
                                    keyer_error *err);

/** 1 when libavcodec's @p codec decodes through the CUDA hwaccel. */
int kr_hwdec_codec_supported(const AVCodec *codec);

/**
 * Makes @p dec (not yet opened) decode with NVDEC on @p device (a new reference is
 * taken), with a get_format callback that logs and falls back to software when the
 * hwaccel cannot start (profile, size, session failure). @p hw must outlive @p dec.
 */
keyer_status kr_hwdec_attach(AVCodecContext *dec, kr_hwdec *hw, AVBufferRef *device,
                             keyer_error *err);

/* ---- source (source.c) ----------------------------------------------------------------- */

/** Receives packets of streams other than the decoded one (ownership moves to the sink). */
typedef void (*kr_packet_sink)(void *opaque, AVPacket *pkt);

/** How to open a source. */
typedef struct kr_source_opts {
    const char *url;
    const char *input_format;  /* may be NULL */
    const char *input_options; /* may be NULL */
    int threads;
    AVBufferRef *hw_device;    /* NULL: software decoding */
    int hw_own_stream;         /* hw_device has a stream of its own: split workers get theirs */
    int hw_ordinal;            /* hw_device's CUDA ordinal */
    int hw_surfaces;           /* extra NVDEC surfaces (extra_hw_frames); 0: libavcodec's */
    int decode_ahead;          /* NVDEC: frames decoded ahead of the one returned (0..8) */
    int source_index;          /* for log lines */
    const AVCodecParameters *codecpar; /* split workers: the main source's, skips probing */
    int stream_index;          /* with codecpar: the stream to decode */
    atomic_int *interrupt;     /* may be NULL; non-zero aborts I/O */
    const keyer_logger *logger;
    /* network inputs: microseconds without data after which an operation fails, given to
     * the protocol and enforced by an interrupt deadline (0: none) */
    int64_t timeout_us;
} kr_source_opts;

typedef struct kr_source {
    const char *url;
    AVFormatContext *fc;
    int stream;
    AVCodecContext *dec;
    AVPacket *pkt;
    kr_hwdec hw;
    int demux_eof, flushed, dec_eof;
    int demux_errors; /* consecutive demuxer errors */
    int64_t dropped_packets, corrupt_packets;
    int64_t sent_packets, frames_out; /* since the last seek: packets without a frame are dropped */
    int64_t pictures_sent; /* video packets given to the decoder since the opening (not reset) */
    int64_t max_sent_pts; /* largest pts of the video packets sent since the last flush */
    int sent_no_pts;      /* a video packet without pts was sent since the last flush */
    int keep_pending;     /* a kept-decoder seek waits for its first video packet's verdict */
    int64_t leftover_pts; /* after a kept-decoder seek: frames at or before this are the old
                           * position's, dropped (INT64_MIN: none) */
    AVFrame *tmp;                     /* spare frame for copies out of NVDEC surfaces */
    int truncated;
    kr_packet_sink sink;
    void *sink_opaque;
    atomic_int *interrupt;
    const keyer_logger *logger;
    int network;         /* a network URL: the end of the connection ends the input cleanly */
    int64_t timeout_ns;  /* per blocking operation; 0: none */
    int64_t deadline_ns; /* CLOCK_MONOTONIC time the current operation is abandoned at; 0: none */
    int64_t op_start_ns; /* when that operation started */
} kr_source;

/**
 * Opens the input and the decoder of its best video stream. Errors name the URL; an opening
 * that outlives o->timeout_us (plus 5 s of probing) fails with IO ("no answer within").
 * @p s must stay at its address while open (the interrupt callback points at it).
 */
keyer_status kr_source_open(kr_source *s, const kr_source_opts *o, keyer_error *err);

/**
 * Next decoded frame into @p out (unreferenced first). KEYER_OK, KEYER_STATUS_END, or an
 * error. Damaged packets are counted and skipped; a cut file ends the stream (truncated).
 * A read that gets no data within the source's timeout fails with IO ("no data for").
 */
keyer_status kr_source_receive(kr_source *s, AVFrame *out, keyer_error *err);

/** kr_source_seek() flag: keep the decoder where that is exact (see there). */
#define KR_SEEK_KEEP_DECODER 0x10000

/**
 * Seeks the demuxer to the keyframe at or before @p ts (stream time base; @p flags: AVSEEK_*
 * flags, AVSEEK_FLAG_BACKWARD is always added) and flushes the decoder. A flush makes
 * libavcodec set the decoder up again at the next picture (for NVDEC: a new decoder session
 * and surface pool). With KR_SEEK_KEEP_DECODER the flush waits for the first video packet
 * after the seek and is skipped when that packet is an H.264 IDR picture presented after every
 * packet sent before (kr_source_clean_cut()): the decoder then goes on as over a cut between
 * two closed GOPs, and the frames of the old position it still outputs (all presented before
 * the IDR) are dropped here, not counted.
 */
keyer_status kr_source_seek(kr_source *s, int64_t ts, int flags, keyer_error *err);

/**
 * 1 when packet @p pkt of a stream decoded by @p dec starts an H.264 IDR picture (its first
 * picture NAL unit is of type 5; avcC length-prefixed NAL units when the decoder's extradata
 * is an avcC record, else Annex B start codes). 0 for other codecs and packets.
 */
int kr_source_clean_cut(const AVCodecContext *dec, const AVPacket *pkt);
/** kr_source_clean_cut() for a stream of @p codec with @p extradata (its codec parameters),
 *  before any decoder is opened (the split decode's plan). */
int kr_source_clean_cut_of(enum AVCodecID codec, const uint8_t *extradata, int extradata_size,
                           const AVPacket *pkt);

/** Frees everything; the struct may be reused. */
void kr_source_close(kr_source *s);

/** 1 when @p url names a network input: a "scheme://" URL other than file://, or an SDP file
 *  (kr_source_is_sdp: it describes an RTP session received over UDP). */
int kr_source_is_network(const char *url);

/** 1 when @p url is a path (no "://") ending in ".sdp" (any case): an RTP session's
 *  description, opened with the protocols it needs allowed (file, udp, rtp). */
int kr_source_is_sdp(const char *url);

/* ---- live network inputs (live.c) ------------------------------------------------------ */

/** Streams whose codecs are compared across reconnections (kept packets keep their indices). */
#define KR_LIVE_LAYOUT_MAX 16

/**
 * Reconnection state of a reader's source (keyer_reader_params::reconnect): a break closes
 * and reopens the source with back-off, and the frames of each new connection are mapped into
 * the timestamps of the first, continuing over the gap.
 */
typedef struct kr_live {
    int on;               /* a break reopens the source (cleared once it gives up) */
    double reconnect_max; /* seconds from the last frame */
    AVRational tb;        /* time base of the frames returned: the first connection's */
    AVRational src_tb;    /* the current connection's video time base */
    int remapped;         /* the current connection's timestamps are mapped into tb */
    int64_t ts_offset;    /* added to them after rescaling (tb units) */
    int64_t keep_offset;  /* added to kept audio/subtitle packets (AV_TIME_BASE units) */
    int resync;           /* reopened: the next frame sets the offsets; packets before it drop */
    int64_t gap_start_ns; /* when the last frame before the break was returned */
    int64_t last_frame_ns;
    enum AVCodecID layout[KR_LIVE_LAYOUT_MAX]; /* the first connection's streams */
    unsigned layout_n;
} kr_live;

/** CLOCK_MONOTONIC in nanoseconds. */
int64_t kr_live_now_ns(void);

/**
 * 1 when @p url, opened as @p fc, is a live network input (KEYER_RECONNECT_AUTO): rtsp(s),
 * rtmp (all its variants), srt, udp, rtp and tcp URLs, SDP files (RTP sessions), and http(s)
 * URLs of unknown length.
 */
int kr_live_url(const char *url, const AVFormatContext *fc);

/** Starts tracking the open source @p s (its video time base and streams); @p on: breaks
 *  reopen it, for up to @p reconnect_max seconds. */
void kr_live_init(kr_live *l, const kr_source *s, int on, double reconnect_max);

/** Records that a frame was returned now (where a gap would start). */
void kr_live_frame_returned(kr_live *l);

/** Whether the source's failure @p st (END, IO, BAD_DATA) is a break to reconnect after: on,
 *  and @p interrupt (may be NULL) not set. */
int kr_live_is_break(const kr_live *l, keyer_status st, const atomic_int *interrupt);

/** 1 when @p fc has the streams (number and codecs) of the first connection. */
int kr_live_same_layout(const kr_live *l, const AVFormatContext *fc);

/**
 * After a break (@p cause: END, or the error in @p err): closes @p s and reopens it with @p o,
 * waiting 0.25 s doubling to 4 s between attempts, until it opens or reconnect_max seconds
 * have passed since the last frame returned. Logs the break (warning) and the reconnection
 * (info). KEYER_OK: @p s is open (the caller re-attaches its sink) and the next frame
 * resyncs. Else l->on is cleared and the error is INTERRUPTED, OUT_OF_MEMORY, or IO naming the
 * URL, the cause, the attempts and the last one's error.
 */
keyer_status kr_live_reopen(kr_live *l, kr_source *s, const kr_source_opts *o, keyer_status cause,
                            keyer_error *err);

/**
 * Maps decoded frame @p pic of the current connection into the timestamps of the frames
 * returned (tb). The first frame after a reopening follows @p last_pts (tb units; INT64_MIN:
 * none) by the gap's wall-clock length rounded to whole frames of @p last_duration (else
 * 1 / @p frame_rate, else 1/25 s); returns 1 then, with the frames the gap held at that rate
 * less one in *@p missed and its seconds in *@p gap, else 0.
 */
int kr_live_map(kr_live *l, AVFrame *pic, int64_t last_pts, int64_t last_duration,
                AVRational frame_rate, int64_t *missed, double *gap);

/** Shifts a kept packet of a stream of time base @p tb by the current offset; 0 when it must
 *  be dropped instead (a new connection's packet before its first frame). */
int kr_live_shift_packet(const kr_live *l, AVPacket *pkt, AVRational tb);

/* ---- split decode (split.c) ------------------------------------------------------------ */

typedef struct kr_split kr_split;

/**
 * Plans chunks from @p main's keyframe index and starts @p n worker sources, beginning
 * with the chunk that holds pts @p from (INT64_MIN: the first). The plan is made on a second
 * opening of the input: @p main's demuxer keeps its position. Each worker decodes ahead
 * @p queue frames when it is > 0; 0: its largest chunk + 2; < 0: that, at most -queue.
 * Chunks are whole GOPs of at least 24 frames; with @p long_chunks (keyer's own split) they
 * are as long as a worker's queue holds (|queue| - 2 frames, at least 24), a multiple of @p n
 * (at least @p min_chunks) of about equal length, so that each worker crosses fewer chunk
 * boundaries: at each one it decodes the next chunk's first pictures (its decoder's reorder
 * delay) only to output the end of its own. A chunk whose frames the index counts exactly
 * and that starts and ends at IDR pictures ends as soon as that many frames came out.
 * Errors: UNSUPPORTED (no usable keyframe index, fewer than @p min_chunks chunks (at least
 * 2), with @p clean_cuts a chunk after the first that does not start with an H.264 IDR
 * picture (kr_source_clean_cut_of: each worker would set its decoder up again at such a
 * chunk, for NVDEC a new session), not seekable: the caller falls back to a single source),
 * or an opening error.
 */
keyer_status kr_split_create(kr_source *main, const kr_source_opts *o, int n, int queue,
                             int min_chunks, int clean_cuts, int long_chunks, int64_t from,
                             kr_split **out, keyer_error *err);

/**
 * The queue (kr_split_create()) of a split keyer chose (keyer_reader_params::segments_auto):
 * @p segment_queue when the caller gave one (> 0), else "the chunk, at most about 256 MB of
 * frames of @p par's size" (NV12 or P010 sizes; at least 8 frames) as a negative count.
 */
int kr_split_auto_queue(const AVCodecParameters *par, int segment_queue);

/** Next frame in presentation order. KEYER_OK, KEYER_STATUS_END or an error. */
keyer_status kr_split_receive(kr_split *sp, AVFrame *out, keyer_error *err);

/** Sums the workers' counters (@p setups: their decoders' set-ups, kr_hwdec::setups;
 *  @p pictures: the video packets their decoders were given, kr_source::pictures_sent). */
void kr_split_counters(kr_split *sp, int64_t *dropped, int64_t *corrupt_packets, int *truncated,
                       int *hw_active, int *hw_fellback, int64_t *setups, int64_t *pictures);

/** Number of workers actually started. */
int kr_split_sources(const kr_split *sp);

/** Stops the workers and frees everything; accepts NULL and sets *sp NULL. */
void kr_split_destroy(kr_split **sp);

/* ---- reader internals used by the writer (reader.c) ------------------------------------ */

/** The reader's input (chapters, metadata, streams) for a writer copying from it. */
AVFormatContext *kr_reader_format_context(keyer_reader *r);

/** Index of the decoded video stream in kr_reader_format_context(). */
int kr_reader_video_stream(const keyer_reader *r);

/** A writer starts taking packets: from now on packets are kept without limit. */
void kr_reader_attach_consumer(keyer_reader *r);

/**
 * Moves the oldest kept audio/subtitle packet into @p out (stream_index and timestamps
 * of the input). Returns 1 when a packet was moved, 0 when none is kept. Thread-safe.
 */
int kr_reader_take_packet(keyer_reader *r, AVPacket *out);

/** 1 once the input has been demuxed to its end (no more packets will be kept). */
int kr_reader_input_done(keyer_reader *r);

/* ---- the CUDA side of io (cuda/, CUDA builds only) -------------------------------------- */

/** What io needs of CUDA: NVDEC's device context and copies out of its surfaces, and the
 *  copies of device frames for the encoders. */
typedef struct kr_io_cuda_fns {
    /** kr_hwdec_device_create() in CUDA builds: retains the primary context itself
     *  (cuda/hwdevice.c). Errors: OUT_OF_MEMORY, DEVICE (no driver, no such device). */
    keyer_status (*hwdevice_create)(int ordinal, int own_stream, AVBufferRef **out,
                                    keyer_error *err);

    /**
     * Replaces NVDEC frame @p pic (AV_PIX_FMT_CUDA, mapped from one of the decoder's few
     * surfaces) with a device-to-device copy in a buffer of *@p pool (created or re-created to
     * match), releasing the surface at once; the copy runs on the stream of @p pic's device
     * context (its own, or the legacy default stream) and is complete when this returns.
     * @p tmp is a blank frame used for the copy
     * (cuda/hwdevice.c). Errors: OUT_OF_MEMORY, INTERNAL (plane pitches), DEVICE.
     */
    keyer_status (*detach_frame)(AVBufferRef **pool, AVFrame *pic, AVFrame *tmp,
                                 keyer_error *err);

    /**
     * 2-D copy of @p rows rows of @p row_bytes bytes, between any host/device pointers
     * (cudaMemcpy2D with cudaMemcpyDefault), complete when it returns (device-to-device copies
     * too: the legacy default stream is waited for) (cuda/transfer.c). Errors: DEVICE.
     */
    keyer_status (*copy_2d)(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                            size_t row_bytes, size_t rows, keyer_error *err);
} kr_io_cuda_fns;

/** The CUDA table (cuda/hwdevice.c); defined only when keyer is built with CUDA. */
extern const kr_io_cuda_fns kr_io_cuda_table;

/** The CUDA functions, or NULL when keyer was built without CUDA (hwdecode.c: the one place
 *  that knows). */
const kr_io_cuda_fns *kr_io_cuda(void);

#endif /* KEYER_IO_INTERNAL_H */
