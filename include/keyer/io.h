/**
 * @file keyer/io.h
 * @brief Video input and output through FFmpeg's libraries, with NVDEC decoding into GPU memory.
 *
 * A ::keyer_reader opens anything libavformat opens (files, "-" for standard input,
 * image sequences such as "frame_%05d.png", network URLs, V4L2 cameras such as
 * /dev/video0 when keyer was built with libavdevice) and decodes its best video stream
 * into ::keyer_frame objects, with NVIDIA's NVDEC (frames stay in CUDA memory) or on the
 * CPU. A ::keyer_writer encodes frames into a file or a pipe (H.264/H.265, ProRes 4444,
 * VP9 with alpha, PNG sequences, raw video, y4m) and copies the audio, subtitles,
 * chapters and metadata of a reader into it.
 *
 * @code
 * keyer_error err = {0};
 * keyer_reader *in = NULL;
 * keyer_writer *out = NULL;
 * keyer_frame *f = NULL;
 * keyer_reader_params rp = keyer_reader_params_defaults();   // NVDEC if possible
 * if (keyer_reader_open("in.mp4", &rp, &in, &err)) die(err.message);
 * const keyer_video_info *vi = keyer_reader_info(in);        // known before the first frame
 * keyer_writer_params wp = keyer_writer_params_defaults();
 * wp.width = vi->width; wp.height = vi->height;
 * wp.frame_rate = vi->frame_rate; wp.time_base = vi->time_base;
 * wp.copy_from = in;                                          // audio copied unchanged
 * if (keyer_writer_open("out.mp4", &wp, &out, &err) || keyer_frame_create(&f, &err)) die(...);
 * keyer_status st;
 * while ((st = keyer_reader_read(in, f, &err)) == KEYER_OK)
 *     if (keyer_writer_write(out, f, &err)) break;
 * if (keyer_writer_close(out, &err)) ...;                     // finalises the file
 * keyer_writer_destroy(&out); keyer_reader_destroy(&in); keyer_frame_destroy(&f);
 * @endcode
 *
 * Timestamps: frames carry pts in the stream's time base (keyer_video_info::time_base);
 * a writer given that time base writes the same timestamps.
 *
 * Damaged input never crashes and never stops decoding early: frames the decoder
 * reports as damaged carry KEYER_FRAME_FLAG_CORRUPT and are counted in
 * keyer_reader_stats, packets it rejects are counted too, and reading goes on.
 *
 * Logging: each reader and writer logs through the ::keyer_logger in its parameters, and
 * FFmpeg's own messages (av_log) go there too while it is open, as "ffmpeg: [<context>]
 * <text>" at the matching level (error, warning, info; FFmpeg's verbose is DEBUG, its
 * debug and trace are TRACE), so with the default logger only FFmpeg's warnings and errors
 * are printed. av_log's callback is process-global: keyer installs its own when the first
 * reader or writer opens (a program that calls av_log_set_callback() afterwards takes
 * FFmpeg's lines back), and while several are open, FFmpeg's lines go to the logger of the
 * one opened last. When none is open, FFmpeg's default callback prints them as before.
 *
 * Thread safety: a reader or writer is used by one thread at a time, except
 * keyer_reader_interrupt(), which any thread or a signal handler may call. A writer
 * that copies streams from a reader may run in another thread than the reader.
 */
#ifndef KEYER_IO_H
#define KEYER_IO_H

#include <stdint.h>

#include "keyer/frame.h"
#include "keyer/log.h"
#include "keyer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- reader ----------------------------------------------------------------------------- */

/** An open video input. Opaque. */
typedef struct keyer_reader keyer_reader;

/** Where a reader decodes. */
typedef enum keyer_decode_device {
    KEYER_DECODE_DEVICE_AUTO = 0, /**< NVDEC when keyer has CUDA and the GPU takes the stream, else CPU */
    KEYER_DECODE_DEVICE_CPU,      /**< libavcodec's software decoders with their own threads */
    KEYER_DECODE_DEVICE_CUDA,     /**< NVDEC; falls back to the CPU (logged) when it cannot */
} keyer_decode_device;

/** Name of a decode device ("auto", "cpu", "cuda"). */
const char *keyer_decode_device_name(keyer_decode_device device);
/** Parses a decode device name. Errors: INVALID_ARGUMENT for an unknown name. */
keyer_status keyer_decode_device_from_name(const char *name, keyer_decode_device *out,
                                           keyer_error *err);

/** Parameters of keyer_reader_open(). Initialise with keyer_reader_params_defaults(). */
/** Whether a reader reopens a network input that breaks off (see keyer_reader_params). */
typedef enum keyer_reconnect {
    /** Live network inputs reconnect: rtsp, rtsps, rtmp(s/t/ts), srt, udp, rtp and tcp URLs,
     *  SDP files (".sdp": an RTP session, also timed as a network input), and http(s) URLs
     *  whose length is unknown (live HLS playlists, MPEG-TS or FLV served
     *  live); files and on-demand HTTP files end at their end. */
    KEYER_RECONNECT_AUTO = 0,
    KEYER_RECONNECT_OFF, /**< never: a break is the end (clean close) or an error */
    KEYER_RECONNECT_ON,  /**< every network input (URL with "://" other than file://) */
} keyer_reconnect;

typedef struct keyer_reader_params {
    keyer_decode_device device; /**< default AUTO */
    int cuda_device;            /**< CUDA device ordinal for NVDEC; default 0 */
    int threads;                /**< CPU decoder threads; 0 = libavcodec picks (default) */
    /**
     * Format of the frames keyer_reader_read() returns. KEYER_PIXEL_FORMAT_NONE
     * ("native", the default): NVDEC frames stay in CUDA memory as NV12 (8-bit) or P010
     * (10/12-bit), copied device to device out of the decoder's few mapped surfaces into
     * pooled device buffers (so callers may hold any number of frames; no host round trip);
     * CPU frames are returned as decoded when keyer has the format
     * (yuv420p, nv12, p010, rgb24, rgba, gray8), without a copy, else converted to
     * yuv420p (8-bit), p010 (deeper) or rgba (formats with alpha). Any other format gives
     * host frames converted with libswscale (NVDEC frames are downloaded first).
     */
    keyer_pixel_format format;
    /**
     * Parallel decode of one input: the stream is split at keyframes into chunks that
     * this many concurrent decoders (NVDEC sessions or CPU decoders) decode; frames still
     * come out in order. 0 or 1: off (default). Needs a seekable input with a keyframe
     * index (MP4, MOV, MKV with cues); otherwise one decoder is used and a line is logged.
     */
    int segments;
    /**
     * Frames each split-decode session may decode ahead; 0 (default): its largest chunk
     * (whole GOPs, at least 24 frames) + 2. Memory: segments x this many frames.
     */
    int segment_queue;
    /**
     * Keep audio and subtitle packets for a writer that copies them (see
     * keyer_writer_params::copy_from). Default 1. Packets are held until a writer takes
     * them; without a writer at most 64 MiB are held, then they are dropped (logged once).
     */
    int keep_streams;
    /** libavformat demuxer to force ("y4m" ~ "yuv4mpegpipe", "v4l2", "image2", ...); NULL: probe. */
    const char *input_format;
    /** Extra demuxer options, "key=value:key=value" ("framerate=30:video_size=640x480"); NULL: none. */
    const char *input_options;
    /**
     * Receives the reader's messages and FFmpeg's (see "Logging" above); must stay valid
     * until keyer_reader_destroy(). NULL: warnings and errors to stderr.
     */
    const keyer_logger *logger;
    /**
     * Reconnection of network inputs (default AUTO). A reconnecting input that ends or
     * fails while reading (the server closed the connection, a reset, no data for
     * @ref timeout) is closed and reopened with exponential back-off (0.25 s doubling to at
     * most 4 s between attempts) until it answers or @ref reconnect_max seconds have passed
     * since the last frame; decoding then resumes with a new decoder. The frames returned
     * keep increasing timestamps: the first frame after the gap gets the last frame's pts
     * plus the gap's wall-clock length rounded to whole frame durations (frames missing =
     * a gap in pts, nothing invented), and the frames the gap held at the stream's frame
     * rate are counted in keyer_reader_stats::missed_frames. Audio and subtitle packets kept
     * for a writer are shifted by the same amount; those the new connection sends before its
     * first video frame are dropped. Opening (keyer_reader_open) is tried once.
     */
    keyer_reconnect reconnect;
    /** Seconds after which a broken input stops trying to reconnect and
     *  keyer_reader_read() returns IO naming the URL (default 30; 0: no attempt). */
    float reconnect_max;
    /**
     * Network inputs: seconds without data after which an operation fails (default 10;
     * 0: wait for ever). It is given to the protocol (rw_timeout, and "timeout" for rtsp,
     * srt, udp, rtp, tcp, http and https; input_options override both) and enforced by an
     * interrupt deadline on every read; an opening may take it plus 5 s of stream probing.
     * Files are not timed.
     */
    float timeout;
    /**
     * NVDEC: decoder surfaces added to libavcodec's (its extra_hw_frames), 0..16; more
     * frames may then be in flight inside the decoder session. A session holds at most 32
     * surfaces in all (an H.264/HEVC stream's reference frames take up to 17): one that
     * asks for more does not start, and that input is decoded on the CPU (logged).
     * 0 (default): libavcodec's own count.
     */
    int hw_surfaces;
    /**
     * NVDEC: 0 (default): each reader's decoder maps and copies its frames on a CUDA stream
     * of its own, so that the readers of one GPU do not wait for each other's copies; 1:
     * on the device's legacy default stream, shared by every reader (keyer's behaviour before
     * the own streams; kept for comparisons).
     */
    int hw_shared_stream;
    /**
     * NVDEC: pictures decoded ahead of the one returned, 0..8 (default 0). libavcodec maps
     * and copies a picture out of its NVDEC session when it leaves the decoder's reorder
     * buffer, which for H.264 holds as many pictures as the stream reorders (B-frames):
     * often the picture just submitted, so the session decodes one picture at a time with
     * the host's work in between. This deepens the buffer (AVCodecContext::has_b_frames) by
     * that many pictures, with as many more surfaces plus one, so that NVDEC has them queued
     * while the oldest is copied out. The frames and their order do not change; each stream
     * starts that many frames later (latency), and libavcodec decoders that do not use
     * has_b_frames for their output (HEVC) are not affected.
     */
    int decode_ahead;
    /**
     * 1: @ref segments is keyer's own choice (keyer_session_params::decode_segments -1), not
     * the caller's: an input that cannot be split, whose keyframes give fewer than two
     * chunks per session (a short file), or whose chunks would not all start with an H.264
     * IDR picture (HEVC, open GOPs: each chunk would set its decoder up again, for NVDEC a
     * new session) is read by one decoder without a warning (a debug line says why), and
     * each session decodes ahead its chunk but at most about 256 MB of
     * frames (long GOPs of large pictures; an explicit @ref segment_queue wins). Its chunks
     * are as long as that bound holds (1080p: about 84 frames; at least 24), a multiple of
     * the sessions of about equal length, since at each chunk's end a session also decodes
     * the next chunk's first pictures (keyer_reader_stats::decoded_pictures). The frames
     * are the same either way. 0 (default): @ref segments as asked.
     */
    int segments_auto;
    void *reserved[1]; /**< zero (hw_surfaces .. decode_ahead took 2 of 4, segments_auto 1) */
} keyer_reader_params;

/** Default reader parameters (see each field). */
keyer_reader_params keyer_reader_params_defaults(void);

/** Stream properties, known when keyer_reader_open() returns (it decodes the first frame). */
typedef struct keyer_video_info {
    int width, height;          /**< coded picture size in pixels (before rotation) */
    keyer_rational frame_rate;  /**< average frame rate; {0,1} when unknown */
    keyer_rational time_base;   /**< unit of keyer_frame::pts and duration */
    int64_t start_pts;          /**< pts of the first frame; INT64_MIN if unknown */
    int64_t duration;           /**< stream duration in time_base units; 0 if unknown */
    int64_t frame_count;        /**< frames in the stream, exact or estimated; 0 if unknown */
    int frame_count_exact;      /**< 1 when frame_count comes from the container's index */
    keyer_pixel_format format;  /**< format of the frames keyer_reader_read() returns */
    keyer_memory_type memory;   /**< where those frames are (CUDA when NVDEC decodes) */
    keyer_color_matrix matrix;  /**< colour matrix of the stream */
    keyer_color_range range;    /**< sample range of the stream */
    int rotation;               /**< clockwise degrees to rotate for display (display matrix) */
    int bit_depth;              /**< bits per sample of the coded stream */
    int has_alpha;              /**< the coded pixel format has an alpha channel */
    int has_audio;              /**< the input has at least one audio stream */
    int audio_streams;          /**< number of audio streams */
    int subtitle_streams;       /**< number of subtitle streams */
    int hw_decode;              /**< 1 when NVDEC decodes the stream */
    int segments;               /**< concurrent decoders in use (1 unless split decode is on) */
    int seekable;               /**< keyer_reader_seek() can work (a seekable file) */
    char codec[32];             /**< codec name ("h264", "hevc", "png", ...) */
    char coded_format[32];      /**< libav pixel format of the coded stream ("yuv420p10le") */
    char container[64];         /**< demuxer name ("mov,mp4,m4a,3gp,3g2,mj2", "matroska,webm") */
} keyer_video_info;

/**
 * Plans the cut of a file into chunks of whole GOPs, as the split decode
 * (keyer_reader_params::segments) does, for a caller that processes the chunks elsewhere (a
 * session splitting one file over several GPUs): chunks of at least 24 frames (fewer when
 * the file is shorter than 24 x @p parts), each starting at a keyframe of the container's
 * index. *@p start_pts receives an array (free it with free()) of *@p count pts, in the video
 * stream's time base (the unit of keyer_video_info::time_base and of the frames'
 * pts), one per chunk: chunk k holds the frames with pts in [start_pts[k], start_pts[k+1])
 * (the last one to the end); read one with keyer_reader_seek(start_pts[k]) then reads until
 * a pts at or past the next start. @p frames NULL, or *@p frames receives a second array
 * (free()) of *@p count counts: chunk k's frames where the index counts them exactly and no
 * frame crosses either end (the chunk starts, and the next one starts, with an H.264 IDR
 * picture, and the index lists every packet, as MP4's does), 0 where not known. A reader
 * of such a chunk can stop after that many frames: reading one more (the next chunk's
 * first) makes its decoder decode the next chunk's first picture and those its reorder
 * delay holds back, which the next chunk's reader decodes again
 * (keyer_reader_stats::decoded_pictures). Errors: INVALID_ARGUMENT, IO / BAD_DATA (cannot
 * open, no video stream), UNSUPPORTED (not seekable, no keyframe index, fewer than two
 * chunks), OUT_OF_MEMORY; the message names @p url. On failure both arrays are NULL.
 */
keyer_status keyer_reader_plan_chunks(const char *url, int parts, int64_t **start_pts,
                                      int **frames, int *count, keyer_error *err);

/** Counters of a reader, for reports. */
typedef struct keyer_reader_stats {
    int64_t frames;          /**< frames returned by keyer_reader_read() */
    int64_t corrupt_frames;  /**< of those, frames flagged KEYER_FRAME_FLAG_CORRUPT */
    /** video packets that gave no frame: rejected by the decoder, dropped by it silently
     *  (counted at the end of the stream, for codecs with one frame per packet), or decoded
     *  into a frame presented before the previous one (damaged reordering), which is dropped */
    int64_t dropped_packets;
    int64_t corrupt_packets; /**< video packets the demuxer marked as corrupt */
    int64_t copied_packets;  /**< audio/subtitle packets handed to a writer */
    int hw_fallback;         /**< 1 when NVDEC was asked for (or AUTO) but the CPU decodes */
    int truncated;           /**< 1 when the demuxer stopped inside damaged or missing data (not every cut shows) */
    int64_t reconnects;      /**< times a broken network input was reopened (see keyer_reader_params::reconnect) */
    /** frames the input did not deliver while disconnected: per gap, the wall-clock time from
     *  the last frame before it to the first after it, times the frame rate, less one */
    int64_t missed_frames;
    double disconnected_seconds; /**< wall-clock seconds of those gaps, summed */
    /** times the video decoders were set up (libavcodec's get_format: the first picture, and
     *  again after a flush, which for NVDEC is a new decoder session and surface pool); split
     *  decode and seeks keep the decoder where the next keyframe is an H.264 IDR picture */
    int64_t decoder_setups;
    /** video packets (pictures) given to the decoders, over all of them: equal to the frames
     *  decoded from the start for one decoder reading a file once; more with split decode
     *  (keyer_reader_params::segments), where at the end of each chunk a decoder takes the
     *  next chunk's first pictures (its reorder delay, e.g. 2 for x264's B-frames) to output
     *  its own last frames, and after seeks (the pictures from the keyframe to the target) */
    int64_t decoded_pictures;
} keyer_reader_stats;

/**
 * Opens @p url (a path, "-" for standard input, a pattern with %d for image sequences,
 * "/dev/videoN", or a URL such as rtsp:// or http://), selects its best video stream,
 * opens a decoder (NVDEC per @p params, with a logged CPU fallback) and decodes the
 * first frame, so that keyer_reader_info() is exact. @p params NULL means defaults.
 * Errors (each message names @p url and the reason): IO (missing, directory,
 * unreadable, network failure), BAD_DATA (empty, not a media file, no video stream,
 * missing moov atom, no decodable frame), UNSUPPORTED (no decoder for the codec, a V4L2
 * device without libavdevice), INVALID_ARGUMENT, OUT_OF_MEMORY, INTERRUPTED.
 * On failure *out is NULL.
 */
keyer_status keyer_reader_open(const char *url, const keyer_reader_params *params,
                               keyer_reader **out, keyer_error *err);

/** Stream properties; valid until the reader is destroyed. NULL for a NULL reader. */
const keyer_video_info *keyer_reader_info(const keyer_reader *reader);

/**
 * Returns the next frame in presentation order in @p frame (made by keyer_frame_create;
 * its previous contents are dropped): pts in keyer_video_info::time_base, colour and
 * rotation metadata, KEYER_FRAME_FLAG_KEY for keyframes, KEYER_FRAME_FLAG_CORRUPT for
 * frames the decoder reported as damaged. Device frames (memory CUDA) and unconverted
 * host frames share the decoder's buffers by reference: they stay valid after later
 * reads and after the reader is destroyed, until the frame is unreferenced.
 * Returns KEYER_STATUS_END after the last frame (and again if called again).
 * Damaged packets do not stop reading: they are counted and skipped.
 * Errors: IO (a read failed, e.g. a network stream broke: frames before it were
 * returned; a reconnecting input that did not come back within
 * keyer_reader_params::reconnect_max), INTERRUPTED (keyer_reader_interrupt was called), OUT_OF_MEMORY,
 * DEVICE (an NVDEC/CUDA call failed after the session had started).
 */
keyer_status keyer_reader_read(keyer_reader *reader, keyer_frame *frame, keyer_error *err);

/**
 * Seeks so that the next keyer_reader_read() returns the first frame with
 * pts >= @p pts (time_base units): seeks to the keyframe at or before it and decodes
 * the frames in between without returning them. Seeking past the end makes the next
 * read return END. Audio packets kept for a writer are dropped.
 * Errors: UNSUPPORTED (input not seekable, e.g. a pipe), IO, INVALID_ARGUMENT.
 */
keyer_status keyer_reader_seek(keyer_reader *reader, int64_t pts, keyer_error *err);

/** Copies the reader's counters into @p out. Both must be non-NULL. */
void keyer_reader_stats_get(const keyer_reader *reader, keyer_reader_stats *out);

/**
 * Asks the reader to stop: blocking I/O is abandoned and the next (or current)
 * keyer_reader_read() returns KEYER_STATUS_INTERRUPTED. Async-signal-safe and
 * callable from any thread (for SIGINT/SIGTERM handlers). NULL is accepted.
 */
void keyer_reader_interrupt(keyer_reader *reader);

/** Closes the input and frees the reader; accepts NULL and *reader == NULL; sets it NULL. */
void keyer_reader_destroy(keyer_reader **reader);

/* ---- writer ----------------------------------------------------------------------------- */

/** An open video output. Opaque. */
typedef struct keyer_writer keyer_writer;

/**
 * Whether NVENC opens on one CUDA device, asked once per encoder and remembered. A writer whose
 * codec is left to it (keyer_writer_params::codec NULL for MP4, MOV and MKV, or "h264",
 * "hevc") asks it to choose between h264_nvenc/hevc_nvenc and libx264/libx265. A session owns
 * one for its device and hands it to every writer it opens; a writer given none makes its own.
 *
 *     keyer_encoder_probe *probe = NULL;
 *     keyer_encoder_probe_create(0, &probe, &err);
 *     char why[256];
 *     if (!keyer_encoder_probe_nvenc(probe, "hevc_nvenc", why, sizeof(why)))
 *         printf("no NVENC: %s\n", why);
 *     keyer_encoder_probe_destroy(&probe);
 *
 * Opaque. Thread-safe: writers in several threads may share one (the first question per
 * encoder opens a test encoder while holding the probe's lock; later ones only read).
 */
typedef struct keyer_encoder_probe keyer_encoder_probe;

/**
 * Creates a probe for CUDA device @p cuda_device (>= 0). Opens nothing yet: the first
 * keyer_encoder_probe_nvenc() per encoder does. Errors: INVALID_ARGUMENT (a negative device),
 * OUT_OF_MEMORY.
 */
keyer_status keyer_encoder_probe_create(int cuda_device, keyer_encoder_probe **out,
                                        keyer_error *err);

/**
 * 1 when NVENC encoder @p codec ("h264_nvenc", "hevc_nvenc") opens on the probe's device, else 0
 * with the reason in @p why (when not NULL; @p why_size bytes, cut to fit): FFmpeg's message
 * ("Cannot load libcuda.so.1", "OpenEncodeSessionEx failed: unsupported device (2) ..."), or
 * keyer's. The first call per encoder opens a 256x144 encoder with keyer's NVENC setup (in a
 * CUDA build on CUDA frames of the device's primary context, as the writer does) and closes it;
 * when the GPU refuses the setup's B-frames (B-frames as references, or B-frames at all), the
 * setup without them is tried and remembered for the writers. FFmpeg's messages of a failed
 * probe are logged at debug level only. Later calls return the remembered answer.
 */
int keyer_encoder_probe_nvenc(keyer_encoder_probe *probe, const char *codec, char *why,
                              size_t why_size);

/** The probe's CUDA device; -1 for NULL. */
int keyer_encoder_probe_device(const keyer_encoder_probe *probe);

/** Frees the probe; accepts NULL and a NULL handle, and sets *@p probe to NULL. The writers
 *  given it must be destroyed first. */
void keyer_encoder_probe_destroy(keyer_encoder_probe **probe);

/** Parameters of keyer_writer_open(). Initialise with keyer_writer_params_defaults(). */
typedef struct keyer_writer_params {
    int width, height;         /**< size of the frames to write (required, > 0) */
    keyer_rational frame_rate; /**< nominal frame rate (required, > 0) */
    /** Unit of the pts of written frames; {0,0} (default): 1/frame_rate. */
    keyer_rational time_base;
    /**
     * libavformat muxer name or alias: "mp4", "mov", "matroska", "webm", "image2",
     * "y4m" (yuv4mpegpipe), "raw" (rawvideo), ... NULL (default): from the file
     * extension. Required when the path is "-" (standard output).
     */
    const char *format;
    /**
     * libavcodec encoder name: "libx264", "libx265", "h264_nvenc", "hevc_nvenc",
     * "prores_ks", "libvpx-vp9", "png", "rawvideo", ...; or "h264" / "hevc" (also "avc",
     * "h265"): H.264 / HEVC with the encoder keyer chooses. NULL (default): H.264 with the
     * encoder keyer chooses for MP4/MOV/MKV (prores_ks with alpha in MOV), libvpx-vp9 for
     * WebM, png for image sequences, the muxer's own for y4m and raw.
     * keyer chooses h264_nvenc / hevc_nvenc when @ref encoder_probe says NVENC opens on its
     * device, else libx264 / libx265 (libavcodec's own encoder when those are missing), and
     * logs the choice at info level: "OUT: encoder: hevc_nvenc on cuda:0" or
     * "OUT: encoder: libx265 (NVENC unavailable: <reason>)". An NVENC encoder named here that
     * cannot open (no GPU, no NVENC engine) is replaced by libx264/libx265 with a warning.
     */
    const char *codec;
    /** Encoder preset ("medium", "slow", "p4" for NVENC); NULL: the encoder's default (p5 for
     *  NVENC). On NVENC, x264 names map to p1..p7 (ultrafast p1 ... medium p5, slow p6,
     *  slower p7); on x264/x265, p1..p7 are dropped when NVENC was replaced. */
    const char *preset;
    /** Constant-quality level: CRF for x264/x265/VP9, CQ for NVENC, qscale for ProRes; -1 (default): encoder default (x264 CRF 23, NVENC CQ 23). */
    int quality;
    /**
     * libav pixel format of the encoded stream ("yuv420p", "yuv444p", "yuva444p10le",
     * "yuva420p", "rgba", "rgb24", ...). NULL (default): yuv420p, or with @ref alpha
     * yuva444p10le (ProRes), yuva420p (VP9), rgba (PNG).
     */
    const char *pixel_format;
    int alpha;                   /**< keep the alpha of RGBA frames (needs an alpha-capable codec) */
    keyer_color_matrix matrix;   /**< matrix of the encoded YUV; UNSPECIFIED: BT.709 from 720 lines, else BT.601 */
    keyer_color_range range;     /**< range of the encoded YUV; UNSPECIFIED: limited */
    int rotation;                /**< clockwise display rotation stored in the stream (0, 90, 180, 270) */
    /**
     * Copy this reader's audio and subtitle streams (unchanged; audio is re-encoded to AAC,
     * or the container's audio codec, only when the container cannot hold the codec),
     * its chapters and its metadata. The reader must stay open until keyer_writer_close().
     */
    keyer_reader *copy_from;
    /**
     * MP4/MOV: write a fragmented file (fragments of at most one second, starting with an
     * empty moov) that is valid at every fragment boundary, so a run that fails (disk full)
     * or is killed leaves a playable file. Default 1. 0: one moov written by close.
     */
    int fragmented;
    /**
     * Extra encoder options "key=value:key=value" (e.g. "x264-params=keyint=60"); NULL: none.
     * They replace keyer's own settings of the same name, such as NVENC's defaults for
     * offline transcoding: preset p5, tune hq, rc vbr, cq 23, rc-lookahead 20, spatial-aq 1,
     * bf 3 with b_ref_mode middle (fewer B-frame features on GPUs without them), e.g.
     * "rc-lookahead=32:multipass=qres:bf=0".
     */
    const char *codec_options;
    /**
     * Receives the writer's messages and FFmpeg's (see "Logging" above); must stay valid
     * until keyer_writer_destroy(). NULL: warnings and errors to stderr.
     */
    const keyer_logger *logger;
    /**
     * Answers whether NVENC opens, for a codec left to keyer (see @ref codec), and gives
     * NVENC's device; must outlive the writer. NULL (default): the writer probes device 0
     * itself when it needs to.
     */
    keyer_encoder_probe *encoder_probe;
    void *reserved[3];          /**< zero */
} keyer_writer_params;

/** Default writer parameters (see each field; width, height and frame_rate must be set). */
keyer_writer_params keyer_writer_params_defaults(void);

/**
 * Creates the output @p path ("-": standard output, with params->format) and writes its
 * header. Errors (naming @p path): INVALID_ARGUMENT (bad parameters), UNSUPPORTED
 * (unknown container or encoder, a codec the container cannot hold, alpha with a codec
 * without alpha), IO (cannot create the file), OUT_OF_MEMORY. Nothing is left on disk
 * on failure. On failure *out is NULL.
 */
keyer_status keyer_writer_open(const char *path, const keyer_writer_params *params,
                               keyer_writer **out, keyer_error *err);

/**
 * Encodes @p frame (host frame in any keyer format, or a CUDA frame: NVENC takes it
 * directly, CPU encoders after a download) of the writer's size. Its pts is rescaled
 * from frame->time_base (the writer's time base if {0,1}) to the stream's; frames
 * without pts get consecutive ones. Audio/subtitle packets the copied reader has read
 * so far are written too. The frame stays the caller's.
 * Errors: INVALID_ARGUMENT (size or format mismatch, pts not increasing), IO (write
 * failed: disk full, broken pipe; the output stays valid up to the last complete
 * fragment or is finalised by close), UNSUPPORTED (a device frame without CUDA), and
 * any status from encoding. After an error the writer only accepts close().
 */
keyer_status keyer_writer_write(keyer_writer *writer, const keyer_frame *frame, keyer_error *err);

/**
 * Makes @p writer copy its audio, subtitles and metadata packets from @p reader from now on,
 * instead of its keyer_writer_params::copy_from (which it no longer reads): a reader of the
 * same file (the same streams), for instance one opened again and seeked to where the first
 * one stopped. Packets that do not go forward in time from what was written are dropped,
 * so an overlap after the seek is harmless. Writers that copy nothing ignore the call.
 * @p reader must stay open until keyer_writer_close(). Not thread-safe with a write on the
 * same writer. Errors: INVALID_ARGUMENT (NULL arguments).
 */
keyer_status keyer_writer_set_copy_source(keyer_writer *writer, keyer_reader *reader,
                                          keyer_error *err);

/**
 * Finalises the output: flushes the encoders, writes the remaining copied packets and
 * the trailer (also after a failed write, as far as the disk allows) and closes the file.
 * Calling it again returns the first call's status. Errors: IO (flush or trailer failed;
 * what reached the disk is still a valid file when fragmented).
 */
keyer_status keyer_writer_close(keyer_writer *writer, keyer_error *err);

/** Name of the video encoder in use (after any NVENC fallback). "" for NULL. */
const char *keyer_writer_codec(const keyer_writer *writer);

/** Frames encoded so far (written to the output or queued in the encoder). 0 for NULL. */
int64_t keyer_writer_frames(const keyer_writer *writer);

/**
 * Closes the writer if keyer_writer_close() was not called (errors are logged) and frees
 * it; accepts NULL and *writer == NULL; sets it NULL.
 */
void keyer_writer_destroy(keyer_writer **writer);

/* ---- sample media ----------------------------------------------------------------------- */

/** Parameters of keyer_video_write_sample(). Initialise with keyer_sample_params_defaults(). */
typedef struct keyer_sample_params {
    int width, height;          /**< output size; default 320x240 */
    int frames;                 /**< number of frames; default 48 */
    keyer_rational frame_rate;  /**< default 24/1 */
    const char *codec;          /**< video encoder; default "libx264" */
    const char *pixel_format;   /**< encoded pixel format; default "yuv420p" */
    const char *preset;         /**< encoder preset; NULL (default): the encoder's own ("medium" for libx264) */
    int keyint;                 /**< frames between keyframes; default 12; 0: encoder default */
    int bframes;                /**< B-frames (x264/x265); default 2, -1: encoder default */
    /** Audio encoder ("aac", "pcm_s16le", "libopus", ...) for a 440 Hz sine at 48 kHz stereo; NULL: no audio. Default "aac". */
    const char *audio_codec;
    const char *format;         /**< muxer; NULL (default): from the extension */
    /** Extra encoder options "key=value:key=value" (e.g. "x264-params='open-gop=1'"); NULL: none. */
    const char *codec_options;
    /** Amplitude (0..64) of deterministic per-pixel noise added to every frame, so the
     *  bitrate resembles camera footage; default 0. */
    int noise;
    void *reserved[4];          /**< zero */
} keyer_sample_params;

/** Default sample parameters. */
keyer_sample_params keyer_sample_params_defaults(void);

/**
 * Writes a short, real video for tests, demos and benchmarks: a slow pan and zoom over
 * the still image @p image_path (e.g. a photo; any format keyer_image_read() reads)
 * encoded with libavcodec, plus a sine-tone audio track, with frame i at pts i in time
 * base 1/frame_rate. FFmpeg's warnings and errors meanwhile go to stderr through the
 * default logger (see "Logging" above). Errors: from keyer_image_read(), UNSUPPORTED (encoder
 * or muxer missing), IO, INVALID_ARGUMENT; no file is left on failure.
 */
keyer_status keyer_video_write_sample(const char *path, const char *image_path,
                                      const keyer_sample_params *params, keyer_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_IO_H */
