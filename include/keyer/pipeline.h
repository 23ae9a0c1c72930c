/**
 * @file keyer/pipeline.h
 * @brief The keying pipeline: a session that turns videos or pushed frames into composited
 *        frames (background blurred, replaced, keyed out) as fast as the hardware allows.
 *
 * A ::keyer_session holds the effect settings (model, device, refinement, compositing) and
 * runs the stages
 *
 *     read → prepare → infer → refine → composite → write
 *
 * as concurrent threads joined by bounded queues. Frames of every stream of the session
 * share the inference batches (a batch leaves when it is full or when its oldest frame has
 * waited its budget), each stream keeps its own temporal state, and frames leave every stream
 * in input order. Frame pools and device buffers are allocated when a stream starts, never
 * per frame.
 *
 * Two ways to feed it:
 *  - files and URLs: keyer_session_add_file() for each input (with its output path), then
 *    keyer_session_run(), which returns when every output is finalised (audio copied);
 *  - frames from memory, for embedding: keyer_session_open_stream(), then
 *    keyer_session_send_frame() / keyer_session_receive_frame() (host or CUDA frames),
 *    keyer_session_close_stream() to flush.
 *
 * @code
 * keyer_error err = {0};
 * keyer_session *s = NULL;
 * keyer_session_params sp = keyer_session_params_defaults();
 * sp.composite.mode = KEYER_COMPOSITE_BLUR;
 * keyer_file_stream_params fp = keyer_file_stream_params_defaults();
 * fp.input = "in.mp4";
 * fp.output = "out.mp4";
 * if (keyer_session_create(&sp, &s, &err) || keyer_session_add_file(s, &fp, NULL, &err) ||
 *     keyer_session_run(s, &err))
 *     fprintf(stderr, "keyer: %s\n", err.message);
 * keyer_session_report rep;
 * keyer_session_get_report(s, &rep);        // frames, fps, per-stage latency, device used
 * keyer_session_destroy(&s);
 * @endcode
 *
 * Devices: KEYER_DEVICE_AUTO uses CUDA when keyer was built with it, a GPU is present and a
 * runtime can be created on it, else the CPU. With CUDA, frames stay on the GPU from NVDEC
 * to the encoder (NVENC takes them directly; CPU encoders get a download). Out of device
 * memory at start: the batch is halved until it fits, then the CPU is used (logged as a
 * warning). A GPU error while running: the frame that hit it and every later frame are
 * processed on the CPU; frames already on the GPU are downloaded first, so no frame is lost
 * as long as the GPU can still copy memory (a frame whose download fails is counted as lost
 * and reported). For tests, the environment variable KEYER_FAIL_CUDA_AT_FRAME=N (read by
 * keyer_session_create) makes the CUDA inference fail on the first batch holding a frame
 * numbered N (0-based) of any stream; KEYER_FAIL_CUDA_AT_FRAME=cuda:K@N does so only on CUDA
 * device K, and a comma-separated list of those ("cuda:1@10,cuda:0@30") gives each device its
 * own frame (several GPUs: see keyer_session_params::cuda_devices). With several GPUs the
 * frame numbers of a stream moved to another GPU start again at 0 there.
 *
 * Stopping: keyer_session_cancel() (async-signal-safe, e.g. from a SIGINT handler) stops
 * reading; the frames already read are still processed and written and the outputs are
 * finalised, so an interrupted run leaves valid files holding every frame read so far.
 *
 * Thread safety: a session's functions may be called from one thread at a time, except
 * keyer_session_cancel() (any thread, signal handlers) and the send/receive pair, which may
 * run on two different threads (a producer and a consumer) for the same stream.
 */
#ifndef KEYER_PIPELINE_H
#define KEYER_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "keyer/config.h"
#include "keyer/detect.h"
#include "keyer/effects.h"
#include "keyer/faces.h"
#include "keyer/frame.h"
#include "keyer/io.h"
#include "keyer/log.h"
#include "keyer/options.h"
#include "keyer/overlay.h"
#include "keyer/pose.h"
#include "keyer/registry.h"
#include "keyer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- devices and modes ------------------------------------------------------------------ */

/* keyer_device_kind and keyer_device_parse() ("auto", "cpu", "cuda:N") are in keyer/config.h. */

/** Latency or throughput trade-off. */
typedef enum keyer_pipeline_mode {
    KEYER_PIPELINE_THROUGHPUT = 0, /**< files: large batches, deep queues */
    KEYER_PIPELINE_LATENCY,        /**< live/VR: batch 1, shallow queues, no batch waiting */
} keyer_pipeline_mode;
KEYER_OPTION_ENUM_CHECK(keyer_pipeline_mode);

/* ---- session parameters ----------------------------------------------------------------- */

/** Called on the thread inside keyer_session_run() about every progress_interval_ms. */
typedef struct keyer_session_progress {
    int64_t frames_done;   /**< frames written (all streams) */
    int64_t frames_total;  /**< frames expected (sum of the inputs' counts; 0 if unknown) */
    int64_t frames_read;   /**< frames read */
    double elapsed;        /**< seconds since the run started */
    double fps;            /**< frames written per second so far */
    double remaining;      /**< estimated seconds left; negative when unknown */
} keyer_session_progress;

/** Progress callback (see keyer_session_params::progress). */
typedef void (*keyer_progress_fn)(void *opaque, const keyer_session_progress *progress);

/**
 * Per-frame callback (see keyer_session_params::frame_fn), called on a stream's writer thread
 * for each frame of a stream that has an output or none (file streams; not pushed streams read
 * with keyer_session_receive_frame), in the stream's order, just before the frame is written.
 * Each stream has its own writer thread: the calls for different streams may run at the same
 * time, so state that one callback shares across streams needs its own synchronisation. @p input is the decoded frame, @p output the frame about to be written (the
 * composite, or a copy of the input when keyer_session_params::passthrough is set); both are
 * in host memory (frames computed on the GPU are downloaded first) and valid only during the
 * call. The callback may change @p output's pixels (for example draw on it) but not its
 * format, size or buffers. @p frame_index counts the stream's frames from 0. A non-OK return,
 * with @p err set, fails the stream as a write error would: its output is finalised with the
 * frames written so far.
 */
typedef keyer_status (*keyer_frame_fn)(void *opaque, int stream_id, int64_t frame_index,
                                       const keyer_frame *input, keyer_frame *output,
                                       keyer_error *err);

/** Detection run by the session itself (keyer_session_params::detect). */
typedef enum keyer_session_detect {
    KEYER_SESSION_DETECT_NONE = 0,       /**< none (default) */
    KEYER_SESSION_DETECT_FACES,          /**< faces, BlazeFace short range ("face-short") */
    KEYER_SESSION_DETECT_FACES_FULL,     /**< faces, BlazeFace full range ("face-full") */
} keyer_session_detect;
KEYER_OPTION_ENUM_CHECK(keyer_session_detect);

/** Most detections handed to keyer_detect_fn per frame (the best ones). */
#define KEYER_SESSION_MAX_DETECTIONS 32
/** Primitives a keyer_detect_fn may add to a frame's overlay. */
#define KEYER_SESSION_OVERLAY_CAPACITY 4096

/**
 * Detection callback (see keyer_session_params::detect), called on a stream's writer thread
 * for each frame, in the stream's order, before keyer_frame_fn and before the frame is
 * written (so, as keyer_frame_fn, concurrently for different streams); for pushed streams
 * read with keyer_session_receive_frame, on the thread calling it, for the frame it is about
 * to return (what the callback draws is on that frame; in passthrough on the stream's copy of
 * it, which the stream's next keyer_session_receive_frame reuses). @p dets holds @p count
 * detections in frame pixels (box corners and keypoints;
 * best first; at most KEYER_SESSION_MAX_DETECTIONS), valid only during the call. @p frame is
 * the decoded frame: its size, pts and time base may be read; its pixels may be in CUDA
 * memory. @p overlay is the stream's overlay (room for KEYER_SESSION_OVERLAY_CAPACITY
 * primitives; adding more returns OUT_OF_MEMORY), cleared before the call: what the callback
 * adds is drawn on the output frame by the session, on the GPU when the frame is there (the
 * overlay belongs to the session; do not render or destroy it). A non-OK return, with @p err
 * set, fails the stream as keyer_frame_fn's does.
 */
typedef keyer_status (*keyer_detect_fn)(void *opaque, int stream_id, int64_t frame_index,
                                        const keyer_frame *frame, const keyer_detection *dets,
                                        int count, keyer_overlay *overlay, keyer_error *err);

/**
 * Face callback (see keyer_session_params::mesh), called instead of keyer_detect_fn, on the
 * same thread, in the same order and with the same @p frame and @p overlay rules: @p faces
 * holds the frame's @p count faces as keyer_faces_run() gives them (faces followed from the
 * previous frame first, then new detections; landmarks in frame pixels; tracker ids), valid
 * only during the call. A non-OK return, with @p err set, fails the stream.
 */
typedef keyer_status (*keyer_faces_fn)(void *opaque, int stream_id, int64_t frame_index,
                                       const keyer_frame *frame, const keyer_face *faces,
                                       int count, keyer_overlay *overlay, keyer_error *err);

/**
 * Pose callback (see keyer_session_params::pose), called instead of keyer_detect_fn (and
 * keyer_faces_fn), on the same thread, in the same order and with the same @p frame and
 * @p overlay rules: @p dets and @p count are the frame's detections as keyer_detect_fn
 * receives them, @p pose the frame's body pose as keyer_pose_run() gives it (found 0 when no
 * person), both valid only during the call. A non-OK return, with @p err set, fails the
 * stream.
 */
typedef keyer_status (*keyer_pose_fn)(void *opaque, int stream_id, int64_t frame_index,
                                      const keyer_frame *frame, const keyer_detection *dets,
                                      int count, const keyer_pose_result *pose,
                                      keyer_overlay *overlay, keyer_error *err);

KEYER_OPTION_ENUM_CHECK(keyer_reconnect);

/** How the host threads of a session on CUDA wait for the GPU (keyer_session_params::cuda_sync).
 *  The setting is the device's (its primary context's scheduling flags): it applies to every
 *  user of that GPU in the process from the session's start on. */
typedef enum keyer_cuda_sync {
    /** CUDA's default: spin while the process has fewer CUDA contexts than cores */
    KEYER_CUDA_SYNC_AUTO = 0,
    KEYER_CUDA_SYNC_SPIN,  /**< spin: the lowest wake-up latency, a core per waiting thread */
    KEYER_CUDA_SYNC_YIELD, /**< spin, yielding the core to other threads between checks */
    /** sleep until the GPU signals (also the frames' completion events): frees the cores of
     *  the waiting threads (readers waiting for NVDEC, writers for their frames) for work */
    KEYER_CUDA_SYNC_BLOCK,
} keyer_cuda_sync;

KEYER_OPTION_ENUM_CHECK(keyer_cuda_sync);

/**
 * Parameters of a session. Initialise with keyer_session_params_defaults(); the integer
 * fields are described by keyer_session_options() as well (for command lines and
 * configuration files).
 */
typedef struct keyer_session_params {
    /** Model: a registry name ("selfie", "selfie-landscape", "u2netp", "pose-lite", ...) or a
     *  .tflite or .onnx path of a segmentation model (see @ref model_desc). NULL (default):
     *  chosen by aspect ratio when the stages start: "selfie-landscape" (256x144) when every
     *  stream's display width/height is at least 1.5, else "selfie" (256x256). */
    const char *model;
    keyer_device_kind device;  /**< where to compute (default AUTO) */
    /** Of the networks on CUDA (default AUTO: per model, keyer_registry_precision(); the CPU
     *  computes in float32). */
    keyer_precision precision;
    int cuda_device;           /**< CUDA ordinal (default 0) */
    keyer_pipeline_mode mode;  /**< latency or throughput (default THROUGHPUT) */
    /** Frames per inference, 1..64. 0 (default): 16 on CUDA in throughput mode, else 1 (the
     *  CPU backend's time per frame does not drop with the batch). */
    int batch;
    /** Microseconds the oldest frame may wait for its batch to fill. -1 (default): 0 in
     *  latency mode, else 20000 on the CPU and 4000 on CUDA. */
    int batch_wait_us;
    /** Frames each queue between stages holds, 1..1024. 0 (default): 1 in latency mode,
     *  else twice the batch for the shared stages' queues, and for each stream's own input
     *  queue 4 batches shared out over the file streams known at the start (between 2 and
     *  twice the batch), so that frames waiting in many streams' queues do not add up to a
     *  long latency. Each stream's frame pool is sized from its queue. */
    int queue_depth;
    /** CPU threads inside each stage (inference, prepare, refine, composite). 0 (default):
     *  1 in throughput mode, where the stages running side by side fill the cores; half the
     *  cores (at least 1, and 1 below 4 cores) in latency mode. */
    int threads;
    /** Composite workers, each on its own frame. 0 (default): one per core on the CPU in
     *  throughput mode, else 1. */
    int composite_workers;
    /** Refine workers, 1..8: stream s is refined by worker s % W (its frames in order). 0
     *  (default): on CUDA one per 4 file streams known at the start (1 to 4); on the CPU 2
     *  when there are 8 cores or more and several streams, else 1. */
    int refine_workers;
    int max_streams;        /**< streams a session may hold, 1..1024 (default 64) */
    /** Live inputs (cameras, network streams) drop their oldest unprocessed frames when the
     *  pipeline falls behind: -1 (default) for inputs that look live (URLs with "://" other
     *  than file://, /dev/video*), 1 for every input, 0 never. Drops are counted. */
    int live;
    /** 1: file inputs are read at their frame rate, to simulate live sources and measure the
     *  latency a live input would see: frame i is released at i / frame rate after the first
     *  (as a camera delivers it) and decoded then, so its latency counts decoding; inputs
     *  without a known rate release each frame at its timestamp after decoding it.
     *  Default 0: as fast as the pipeline takes them. */
    int realtime;
    /** Reconnection of the network inputs of file streams (keyer_reader_params::reconnect):
     *  AUTO (default) for live network URLs, ON for every network input, OFF. */
    keyer_reconnect reconnect;
    /** Seconds a broken network input keeps trying to reconnect before its stream fails
     *  (keyer_reader_params::reconnect_max; default 30, 0: no attempt). */
    float reconnect_max;
    /** Seconds without data after which a network operation fails (open or read; a read
     *  that times out is a break, see reconnect) (keyer_reader_params::timeout; default 10,
     *  0: none). */
    float input_timeout;
    /** Image (JPEG, PNG, ...) or video path for composite mode IMAGE; a video's frames are
     *  used in step with the stream's frames and loop when it ends. NULL: none. */
    const char *background;
    keyer_refine_params refine;       /**< mask refinement (max_streams is set by the session) */
    keyer_composite_params composite; /**< compositing: mode, blur radius, colours */
    /** Record a Chrome/Perfetto trace with room for this many events (0, default: off);
     *  write it with keyer_session_write_trace(). */
    int trace_events;
    /** 1: no keying. Frames go unchanged from the input to frame_fn and the output; no model
     *  is loaded and the GPU is not used (default 0). */
    int passthrough;
    /** keyer_session_detect: a detector run on every frame of every stream, batched across
     *  streams with the inference (on the GPU when the session computes there, from the
     *  frames where the decoder left them), its detections given to detect_fn and what
     *  detect_fn draws rendered on the frame's device. Works with keying and with
     *  passthrough; needs detect_fn. Default NONE. */
    keyer_session_detect detect;
    float detect_min_score;      /**< detection threshold; <= 0 (default): the model's */
    keyer_detect_fn detect_fn;   /**< required with detect, unless mesh */
    void *detect_opaque;         /**< passed to detect_fn */
    keyer_frame_fn frame_fn;     /**< NULL (default): none */
    void *frame_opaque;          /**< passed to frame_fn */
    keyer_progress_fn progress;  /**< NULL: none */
    void *progress_opaque;
    int progress_interval_ms;    /**< default 200 */
    const keyer_logger *logger;  /**< NULL: warnings and errors to stderr */
    /** How to feed @ref model and read its mask (keyer/registry.h), copied at create: for a
     *  user's ONNX or TFLite file (input name and size, layout, colour order, normalisation,
     *  the mask output and its kind). NULL (default): the registry's description of a shipped
     *  model, keyer_model_desc_defaults() for another file. */
    const keyer_model_desc *model_desc;
    /** 1 (with detect): the face mesh (468 landmarks, "face-mesh") runs on the faces as a
     *  model stage after the detector, batched across faces and streams (crops made where
     *  the frames are, on the GPU when the session computes there; only the landmarks come
     *  to the host), with keyer_faces_run()'s tracking: faces followed by their landmarks from
     *  frame to frame, the detections used when no face is followed, one was lost, or every
     *  mesh_detect_interval frames; tracker ids. faces_fn receives the faces instead of
     *  detect_fn receiving the detections. Default 0. */
    int mesh;
    int mesh_max_faces;          /**< faces followed per stream, 1..KEYER_FACES_MAX (default 4) */
    int mesh_detect_interval;    /**< as keyer_faces_params::detect_interval (default 0) */
    keyer_faces_fn faces_fn;     /**< required with mesh */
    void *faces_opaque;          /**< passed to faces_fn */
    /**
     * Several GPUs in one session ("--device cuda:all", "cuda:0,2"; keyer_device_parse_list()):
     * bit N set means CUDA ordinal N; KEYER_CUDA_DEVICES_ALL means every CUDA device present.
     * 0 (default): one device, chosen by @ref device and @ref cuda_device as before.
     * Precedence: when nonzero, this field decides the GPUs and @ref cuda_device is ignored;
     * @ref device must then be AUTO or CUDA. keyer_session_create() checks the list against
     * the devices present: INVALID_ARGUMENT names an ordinal that does not exist, and a
     * machine without a CUDA device (or a build without CUDA) gives INVALID_ARGUMENT saying
     * so. A list that resolves to one GPU is the same as cuda_device = that ordinal.
     *
     * With two or more GPUs the session keeps one engine per GPU (its own decoders, batcher,
     * model runtimes, detector, refine and composite workers); each stream runs on one of
     * them from NVDEC to the encoder. A file input is placed when it is added
     * (keyer_session_add_file: its width x height x frame rate, read from a probe of the
     * file on the CPU; network inputs, devices and forced demuxers are not probed and count
     * as 1920x1080 at 30 fps), a pushed stream when it is opened (its width x height x
     * frame_rate, 30 fps when unset): on the GPU with the least load so far, the lowest
     * ordinal on a tie (see also @ref split_gpus). Stream ids stay
     * the session's (0, 1, ... in the order added). The keying model chosen by aspect
     * ratio (@ref model NULL) is chosen over every stream of every GPU. The reports sum the
     * GPUs (keyer_session_report::device lists them; keyer_stream_report::device names each
     * stream's); progress calls come from the GPUs' run threads, one at a time.
     * keyer_session_write_trace() is UNSUPPORTED with several GPUs.
     *
     * A GPU that fails while running (KEYER_FAIL_CUDA_AT_FRAME=cuda:N@F injects it, a list
     * "cuda:1@10,cuda:0@30" one frame per GPU) moves its streams to another GPU: the frames
     * its pipeline holds are downloaded and finished on the CPU as in a one-GPU session, and
     * the rest of each of its file streams (from the frame after the last one its reader
     * read) is read again by NVDEC of the least loaded GPU that is healthy, keyed there and
     * written to the same output, in order, nothing lost (audio copied on). A GPU with no
     * stream of its own stands by for this (its stages start with the others'), and a GPU
     * whose own streams are done stays open to moved streams while another GPU works. A
     * moved stream whose new GPU fails moves again. A live input is opened again on the new
     * GPU and read from where the source is then: the frames of the switch are counted as
     * missed (keyer_stream_report::missed_frames, one more reconnect) and the output's
     * timestamps go on after the gap; its audio is not copied after the switch. A pushed
     * stream moves at its next keyer_session_send_frame(): that frame and the later ones go
     * to the new GPU, the frames already sent come out (or are written) first. Such a
     * stream reports "cuda:N, then cuda:M (GPU failure)" ("cuda:N, then cuda:M, then cuda:L
     * (GPU failures)" after two moves), the session "cuda:N (failed: K streams moved to
     * other GPUs)" (or "cuda:N (failed, K moved)" where the long form does not fit). Only
     * when no GPU is left (or for file inputs without timestamps) do they go on on the CPU
     * as before ("cuda:N, then cpu (GPU failure)"). The other GPUs' streams go on unchanged.
     */
    uint64_t cuda_devices;
    /**
     * 1: with several GPUs (@ref cuda_devices) and one file input, that file is split over
     * the GPUs: cut at keyframes into chunks of whole GOPs (keyer_reader_plan_chunks gives
     * the GOPs; each lane gets the same share of the file within a GOP, in chunks of at most
     * about 72 frames), @ref split_chunks chunks
     * in flight on each GPU (N x split_chunks lanes; lane l on GPU l mod N takes chunks l,
     * l + lanes, ...: its own decoder session, batcher and stages), the frames written back
     * in the file's order by one writer (device frames downloaded; video only: audio,
     * subtitles and metadata are not copied). With one GPU the file is split over that GPU's
     * decoder sessions (split_chunks of them). The matte's
     * temporal smoothing restarts at each chunk (KEYER_FRAME_FLAG_DISCONTINUITY), as at the
     * start of a file. frame_fn and detect_fn are not called (INVALID_ARGUMENT with them), a
     * second input is INVALID_ARGUMENT, and a file that cannot be split (not seekable, no
     * keyframe index, too short) runs on one GPU (logged). Default 0: each input on one GPU.
     */
    int split_gpus;
    /** 1 (with detect FACES_FULL, without mesh): the BlazePose landmark model (@ref pose_model)
     *  runs as a model stage after the detector, batched across streams (crops made where the
     *  frames are, on the GPU when the session computes there; the landmarks refined from the
     *  heatmaps there; only the landmarks come to the host), with keyer_pose_run()'s
     *  tracking (default parameters): seeded from the frame's best face, else the whole
     *  frame, then followed by its auxiliary landmarks. pose_fn receives the frame's pose
     *  instead of detect_fn receiving the detections. Default 0. */
    int pose;
    keyer_pose_model pose_model; /**< landmark model of pose (default LITE) */
    keyer_pose_fn pose_fn;       /**< required with pose */
    void *pose_opaque;           /**< passed to pose_fn */
    /**
     * With @ref split_gpus: chunks in flight on each GPU, 1..16, each read by a decoder
     * session of its own (a GPU has several NVDEC engines, one session keeps one busy) into a
     * stream of its own on that GPU, so several chunks are decoded and processed at once
     * while the writer takes them in order. N GPUs run N x split_chunks chunks at a time (at
     * most 128). With one GPU (@ref cuda_devices unset, device CUDA or AUTO) and
     * split_chunks >= 2, split_gpus splits the file over that GPU's decoder sessions. Memory:
     * each of them holds a stream's frame pool. 0 (default): 2.
     */
    int split_chunks;
    /**
     * File streams on NVDEC: decoder sessions per stream (keyer_reader_params::segments, when
     * the stream's own reader parameters leave it 0): 2..16 split each file at keyframes over
     * that many concurrent decoders, its frames still in order. 0 or 1: one. -1 (default,
     * auto): two for each file stream when the caller said how many file inputs it adds
     * (@ref expected_files) and a GPU gets fewer than 16 of them (with several GPUs: the
     * count shared out over them), decided when the stream is added, before its reader
     * opens (keyer_reader_params::segments_auto: files too short for two chunks per session,
     * whose chunks would not start with H.264 IDR pictures, or that cannot be split keep
     * one); one otherwise, and for live inputs, with
     * @ref realtime, in latency mode and when decoding on the CPU. One session per stream
     * leaves the GPU's decoder engines idle part of the time when there are few streams.
     */
    int decode_segments;
    /** File streams on NVDEC: extra decoder surfaces per session
     *  (keyer_reader_params::hw_surfaces when that is 0), 0..16; default 0: libavcodec's. */
    int decode_surfaces;
    /** File streams on NVDEC: 1 puts every decoder's copies on the device's shared default
     *  stream, as keyer did before each decoder had a CUDA stream of its own
     *  (keyer_reader_params::hw_shared_stream); for comparisons. Default 0. */
    int decode_shared_stream;
    /** How its threads wait for the GPU (default AUTO: CUDA's own choice); see
     *  keyer_cuda_sync. */
    keyer_cuda_sync cuda_sync;
    /** Streams on NVDEC: pictures each decoder session decodes ahead of the one returned
     *  (keyer_reader_params::decode_ahead, when the stream's own reader parameters leave it
     *  0), 0..8, or -1: 4 for file streams, none for live inputs, with realtime or in
     *  latency mode (it delays each frame by that many frames). Default 0. */
    int decode_ahead;
    /**
     * The number of file inputs the caller is going to add with keyer_session_add_file(),
     * when it knows it before the first (the keyer program: its inputs); 0 (default): not
     * said. Read only by @ref decode_segments -1.
     */
    int expected_files;
    void *reserved[1];           /**< zero (mesh .. faces_opaque took 4 of 8, cuda_devices and
                                  *   split_gpus 2, expected_files 1; pose .. pose_opaque and
                                  *   split_chunks .. cuda_sync were added before them: the
                                  *   struct grew, callers rebuild) */
} keyer_session_params;

/** Default session parameters (see each field). */
keyer_session_params keyer_session_params_defaults(void);

/** Option table over keyer_session_params: device, cuda_device, cuda_devices ("all",
 *  "0,2", "none"), split_gpus, split_chunks, mode, batch, batch_wait_us, queue_depth,
 *  threads, composite_workers, refine_workers, max_streams, live, realtime, reconnect (auto,
 *  on, off), reconnect_max, input_timeout, decode_segments, expected_files, decode_surfaces,
 *  decode_ahead, decode_shared_stream, cuda_sync (auto, spin, yield, block), trace_events,
 *  progress_interval_ms. */
const keyer_option *keyer_session_options(void);

/* ---- the session ------------------------------------------------------------------------ */

/** A keying session. Opaque. */
typedef struct keyer_session keyer_session;

/**
 * Creates a session: validates and copies the parameters (strings are copied; refinement
 * and compositing parameters are checked by creating the effects once), checks that a named
 * model's file exists and reads a still background image. The model is loaded (or chosen by
 * aspect ratio) and devices, runtimes and threads are set up when the first stream starts
 * (keyer_session_run or keyer_session_open_stream). Reads the environment variable
 * KEYER_FAIL_CUDA_AT_FRAME (see the file comment).
 * Errors: INVALID_ARGUMENT (a parameter out of range), IO / BAD_DATA (model or background
 * file), UNSUPPORTED, OUT_OF_MEMORY.
 */
keyer_status keyer_session_create(const keyer_session_params *params, keyer_session **out,
                                  keyer_error *err);

/**
 * Stops the workers (as keyer_session_cancel, then waits), finalises any output still open,
 * and frees the session. Frames handed out by keyer_session_receive_frame() stay valid.
 * Accepts NULL and *session == NULL; sets *session to NULL.
 */
void keyer_session_destroy(keyer_session **session);

/**
 * Asks the session to stop reading: file readers stop at the next frame (blocking network
 * reads are abandoned), sends return INTERRUPTED; every frame already read is still
 * processed and written, and keyer_session_run() then returns KEYER_STATUS_INTERRUPTED after
 * finalising the outputs. Async-signal-safe; any thread; NULL accepted.
 */
void keyer_session_cancel(keyer_session *session);

/* ---- files ------------------------------------------------------------------------------ */

/** One input file/URL and its output. Initialise with keyer_file_stream_params_defaults(). */
typedef struct keyer_file_stream_params {
    const char *input;  /**< path or URL (anything keyer_reader_open() opens); required */
    /** Output path (anything keyer_writer_open() creates: .mp4, .mov, .mkv, .webm,
     *  frame_%05d.png, "-" with writer.format); NULL: frames are processed and discarded
     *  (benchmarks). */
    const char *output;
    /** Reader settings. The session sets device (NVDEC when it computes on CUDA, else the
     *  CPU), cuda_device, and reconnect, reconnect_max and timeout (from its reconnect,
     *  reconnect_max and input_timeout); the rest is the caller's. */
    keyer_reader_params reader;
    /** Writer settings: codec, preset, quality, pixel_format, format, codec_options,
     *  fragmented. The session sets width, height, frame_rate, time_base, rotation, colour,
     *  alpha (ALPHA modes) and copy_from. */
    keyer_writer_params writer;
    int copy_streams; /**< copy the input's audio, subtitles and metadata (default 1) */
    int live;         /**< -1 (default): the session's rule; 0/1 override it for this input */
    /** 1: an input that cannot be opened (an error of keyer_reader_open() other than
     *  INVALID_ARGUMENT and OUT_OF_MEMORY) does not fail keyer_session_add_file(): the stream
     *  is added in the failed state (keyer_session_stream_status() returns the error), writes
     *  nothing, and keyer_session_run() runs the other streams and then returns that error.
     *  0 (default): keyer_session_add_file() returns the error and adds no stream. */
    int fail_alone;
    void *reserved[4];
} keyer_file_stream_params;

/** Default file-stream parameters. */
keyer_file_stream_params keyer_file_stream_params_defaults(void);

/**
 * Opens @p params->input (the reader decodes the first frame, so the input's size, rate and
 * frame count are known) and adds it as a stream whose output is opened by
 * keyer_session_run(). *@p stream_id (may be NULL) receives its id (0, 1, ...).
 * Errors: those of keyer_reader_open() (the message names the input and the reason:
 * missing file, not a video, no video stream, ...), INVALID_ARGUMENT (no input, too many
 * streams, called after keyer_session_run()). With @c params->fail_alone an input that
 * cannot be opened returns KEYER_OK instead and adds a failed stream (its id in
 * *@p stream_id; keyer_session_stream_status() has the error).
 */
keyer_status keyer_session_add_file(keyer_session *session, const keyer_file_stream_params *params,
                                    int *stream_id, keyer_error *err);

/**
 * Runs every added file stream to its end: opens the outputs, starts the stages, calls the
 * progress callback, waits, finalises the outputs. Frames leave each stream in input order
 * and every frame read is written (except frames a live input dropped, which are counted).
 * Returns KEYER_OK, KEYER_STATUS_INTERRUPTED after keyer_session_cancel() (outputs are valid
 * and complete up to the last frame read), or the first error of any stage (the message
 * names the stream and the stage).
 *
 * Streams fail alone: an error of one stream (its input cannot be opened with
 * keyer_file_stream_params::fail_alone, stops decoding, ends well before the duration its
 * container declares, its output cannot be created or written, its frame_fn or detect_fn
 * fails, a stage fails on one of its frames) stops that stream only: its output is
 * finalised with the frames before the error (a valid file) and the other streams go on to
 * their end; keyer_session_run() then returns the error of the first failed stream (in
 * stream order) and keyer_session_stream_status() and the stream reports tell each failed
 * stream's error. An error of the session itself (models, device, the stages' start) stops
 * every stream. Errors: INVALID_ARGUMENT (no streams, run twice), IO, BAD_DATA, DEVICE, ...
 */
keyer_status keyer_session_run(keyer_session *session, keyer_error *err);

/**
 * The first error of stream @p stream_id: KEYER_OK while it has none, else its status with
 * the message (naming the input and the reason) in *@p err (may be NULL). Callable at any
 * time, from one thread at a time with the other session calls. Errors: INVALID_ARGUMENT
 * (no such stream; the message says so).
 */
keyer_status keyer_session_stream_status(keyer_session *session, int stream_id,
                                         keyer_error *err);

/* ---- frames from memory ------------------------------------------------------------------ */

/** A pushed stream. Initialise with keyer_stream_params_defaults(). */
typedef struct keyer_stream_params {
    int width, height;          /**< size of every frame sent (required) */
    keyer_pixel_format format;  /**< NV12, P010, YUV420P, RGB24 or RGBA (required) */
    keyer_memory_type memory;   /**< where the frames sent are (default HOST) */
    keyer_rational frame_rate;  /**< nominal rate (needed with an output path); default {0,1} */
    keyer_rational time_base;   /**< of the frames' pts; default {0,1}: 1/frame_rate */
    int live;                   /**< 1: drop the oldest queued frames instead of returning AGAIN */
    /** NULL (default): processed frames are fetched with keyer_session_receive_frame().
     *  A path: they are encoded there instead (writer settings below). */
    const char *output;
    keyer_writer_params writer; /**< for @ref output: codec, preset, ... as for files */
    void *reserved[4];
} keyer_stream_params;

/** Default pushed-stream parameters. */
keyer_stream_params keyer_stream_params_defaults(void);

/**
 * Opens a stream fed by keyer_session_send_frame(), starting the session's stages if they
 * are not running. Errors: INVALID_ARGUMENT (size, format, too many streams), UNSUPPORTED
 * (CUDA frames without CUDA), OUT_OF_MEMORY, DEVICE, IO (output).
 */
keyer_status keyer_session_open_stream(keyer_session *session, const keyer_stream_params *params,
                                       int *stream_id, keyer_error *err);

/**
 * Queues @p frame (the stream's size and format) for processing. A frame with buffers
 * (keyer_frame::buf[0] != NULL) is taken by reference: its pixels must not change until it
 * comes out; a frame without buffers is copied. Frames in the other memory than the
 * session's device are copied across. Returns KEYER_OK, or KEYER_STATUS_AGAIN when the
 * stream's frames in flight fill its pool: receive frames, then send again (a live stream
 * drops its oldest queued frame instead). Errors: INVALID_ARGUMENT (bad id, closed stream,
 * a frame of another size or format), INTERRUPTED (cancelled), and the first error a stage
 * hit on this stream.
 */
keyer_status keyer_session_send_frame(keyer_session *session, int stream_id,
                                      const keyer_frame *frame, keyer_error *err);

/**
 * Gets the next processed frame of a stream without an output path, in input order:
 * @p out (made by keyer_frame_create; its previous contents are dropped) becomes a
 * reference to the session's frame (composite output: the input's format, RGBA for the
 * ALPHA modes, GRAY8 for MASK), with the input's pts. The session reuses that memory once
 * every reference is dropped, so unreference it promptly. @p timeout_us: 0 returns at once,
 * < 0 waits as long as needed. Returns KEYER_OK, KEYER_STATUS_AGAIN (nothing ready in
 * time), KEYER_STATUS_END (closed and every frame received). Errors: INVALID_ARGUMENT,
 * INTERRUPTED, and the first error a stage hit on this stream.
 */
keyer_status keyer_session_receive_frame(keyer_session *session, int stream_id, keyer_frame *out,
                                         int64_t timeout_us, keyer_error *err);

/**
 * Ends a pushed stream: frames sent so far are still processed (receive them until END);
 * with an output path, waits until they are written and finalises the file.
 * Errors: INVALID_ARGUMENT (bad id), IO (finalising the output).
 */
keyer_status keyer_session_close_stream(keyer_session *session, int stream_id, keyer_error *err);

/* ---- reports ---------------------------------------------------------------------------- */

/** Latency summary in milliseconds. */
typedef struct keyer_latency {
    int64_t count;
    double mean, p50, p95, p99, max;
} keyer_latency;

/** Statistics of one stage. */
typedef struct keyer_stage_report {
    char name[16];          /**< "read", "prepare", "infer", "refine", "composite", "write" */
    int workers;            /**< threads running it */
    int64_t frames;         /**< frames that went through */
    double busy;            /**< seconds of work, all workers */
    double utilization;     /**< busy / (wall time x workers), 0..1 */
    keyer_latency latency;  /**< per call (a whole batch for infer) */
    int queue_capacity;     /**< the queue in front of the stage (0: none) */
    double queue_mean;      /**< its time-weighted mean depth */
    int queue_max;          /**< its largest depth */
} keyer_stage_report;

#define KEYER_SESSION_MAX_STAGES 9

/**
 * The landmark stage's rounds (keyer_session_params::mesh or ::pose): the crops of a batch's
 * frames run in rounds of at most one frame per stream (tracking makes a stream's frames
 * depend on each other), each round in passes of crops that do not depend on each other; on
 * CUDA a pass's crops go through one runtime (padded to its batch) and the host waits once.
 * Counts over the run, all streams; all zero without a landmark stage.
 */
typedef struct keyer_rounds_report {
    int64_t batches;     /**< batches the stage took from its queue */
    int64_t rounds;      /**< rounds run (a retry on the CPU after a GPU failure counts again) */
    int64_t passes;      /**< passes with crops */
    int64_t runs;        /**< model runs */
    int64_t crops;       /**< crops run (padding not counted) */
    int64_t padded;      /**< padding crops of the CUDA runs */
    int64_t syncs;       /**< waits of the host for the stage's GPU work */
    /** runs by the runtime's batch: [0] batch 1, [1] batch 2, [2] 4, ... [6] 64 */
    int64_t runs_by_batch[7];
    double round_seconds; /**< time in rounds (crops, runs, the landmarks' tracking) */
    double wait_seconds;  /**< of it, the host waiting for the GPU */
    /** The CUDA schedule of the landmark model's runtimes by batch size, as
     *  keyer_session_report::model_schedule; "" on the CPU or without the stage. */
    char schedule[96];
} keyer_rounds_report;

/** A session's statistics; see keyer_session_get_report(). */
typedef struct keyer_session_report {
    int64_t frames_read;       /**< frames that entered (all streams) */
    int64_t frames_written;    /**< frames that left */
    int64_t frames_dropped;    /**< frames live inputs dropped under overload */
    int64_t frames_damaged;    /**< frames the decoders flagged as damaged (processed) */
    int64_t frames_lost;       /**< frames lost in a GPU failure (see the file comment) */
    int64_t frames_on_cpu;     /**< frames inferred on the CPU */
    int64_t frames_on_cuda;    /**< frames inferred on CUDA */
    double seconds;            /**< wall time from the start of the stages to the last frame */
    double fps;                /**< frames_written / seconds */
    char device[64];           /**< where it computed: "cpu", "cuda:0", "cuda:0 (inference on the cpu)" */
    char model[64];            /**< the model used ("none" in passthrough) */
    char detector[64];         /**< the session's detector (params.detect), "" when none */
    char model_precision[8];   /**< "f32" or "f16": the keying model's arithmetic ("" in passthrough) */
    char detector_precision[8]; /**< the detector's ("" when none) */
    /** The CUDA schedule of the keying model's runtimes by batch size (keyer_runtime_schedule:
     *  "per-node", "persistent", "persistent+cluster"), for example "persistent+cluster at
     *  batch 1-8, per-node at 16-64"; "" on the CPU and in passthrough. */
    char model_schedule[96];
    char detector_schedule[96]; /**< the detector's ("" when none or on the CPU) */
    int batch;                 /**< frames per inference in use */
    int fell_back;             /**< 1 when CUDA was asked for (or AUTO found a GPU) but the CPU ran */
    int warnings;              /**< warnings logged by the session */
    int64_t batches;           /**< inferences run */
    double batch_mean;         /**< mean frames per inference */
    int64_t batches_full;      /**< batches that left full (the rest left at their deadline) */
    keyer_latency latency;     /**< per frame, from entering (read/send) to leaving (write/receive) */
    int stage_count;
    keyer_stage_report stages[KEYER_SESSION_MAX_STAGES];
    int bottleneck;            /**< index into stages of the busiest stage per worker; -1 */
    /** GPU memory in use (bytes, whole device) and utilisation (percent, mean over the run)
     *  sampled through NVML when present; -1 when unknown. */
    int64_t gpu_memory_used, gpu_memory_total;
    double gpu_utilization;
    /** 1 when the model was chosen automatically (params.model NULL: a selfie model) and a
     *  stream whose frames show no one large switches to people mode (keyer/people.h) until
     *  someone large is back, on the CPU and on CUDA (where a switch acts 1 to 3 batches
     *  later: the masks are read while the next batches run). See
     *  keyer_stream_report::frames_people. */
    int auto_people;
    /** frames keyed in people mode, all streams (see keyer_stream_report::frames_people) */
    int64_t frames_people;
    keyer_rounds_report landmark_rounds; /**< the face mesh's or pose stage's rounds */
} keyer_session_report;

/** Per-stream counters. */
typedef struct keyer_stream_report {
    char input[256];        /**< input URL ("" for pushed streams) */
    char output[256];       /**< output path ("" when none) */
    int width, height;
    int64_t frames_read, frames_written, frames_dropped, frames_damaged, frames_lost;
    /** network inputs: reconnections, frames missed while disconnected, seconds disconnected
     *  (keyer_reader_stats); 0 for other streams */
    int64_t reconnects, missed_frames;
    double disconnected_seconds;
    /** file and network inputs: the video decoders' set-ups (keyer_reader_stats::
     *  decoder_setups; with NVDEC each one a decoder session); 0 for pushed streams */
    int64_t decoder_setups;
    /** file and network inputs: pictures the video decoders were given (keyer_reader_stats::
     *  decoded_pictures: more than frames_read where split decode reads into the next chunk
     *  at each chunk's end); 0 for pushed streams */
    int64_t decoded_pictures;
    int hw_decode;          /**< 1 when NVDEC decoded it */
    char encoder[32];       /**< video encoder in use ("" when none) */
    int has_audio;          /**< the input had audio (copied to the output) */
    keyer_status status;    /**< the stream's first error, KEYER_OK when it has none */
    char error[KEYER_ERROR_MESSAGE_MAX]; /**< its message ("" when none) */
    /** where it computed: "cpu", "cuda:1", "cuda:1, then cuda:0 (GPU failure)" (moved to
     *  another GPU), "cuda:1, then cpu (GPU failure)" */
    char device[64];
    /** frames keyed in people mode (keyer/people.h): every frame with model "people"; with the
     *  model chosen automatically (keyer_session_report::auto_people), the frames the stream
     *  spent in people mode because the selfie model's mask showed no one large (its largest
     *  region under 8% of the frame for 5 frames in a row; back to the selfie model after 15
     *  frames with one of at least 15%); else 0 */
    int64_t frames_people;
} keyer_stream_report;

/** Fills @p out with the session's statistics so far (callable during a run). */
void keyer_session_get_report(keyer_session *session, keyer_session_report *out);

/** Number of streams added or opened so far. */
int keyer_session_stream_count(const keyer_session *session);

/** Fills @p out for stream @p stream_id. Errors: INVALID_ARGUMENT (bad id). */
keyer_status keyer_session_get_stream_report(keyer_session *session, int stream_id,
                                             keyer_stream_report *out, keyer_error *err);

/**
 * Writes the statistics as JSON to @p path: the report fields, each stage (latency mean,
 * p50, p95, p99, max in ms, utilisation, queue depths), the bottleneck stage, each stream,
 * GPU memory and utilisation. Errors: IO naming the path.
 */
keyer_status keyer_session_write_stats(keyer_session *session, const char *path, keyer_error *err);

/**
 * Writes the recorded trace (keyer_session_params::trace_events > 0) to @p path in the
 * Chrome Trace Event Format (open it in ui.perfetto.dev or chrome://tracing): one track per
 * worker thread, one event per frame and stage (per batch for infer).
 * Errors: INVALID_ARGUMENT (tracing was off), IO naming the path.
 */
keyer_status keyer_session_write_trace(keyer_session *session, const char *path, keyer_error *err);

/* keyer_config_read() (YAML configuration files) is in keyer/config.h. */

#ifdef __cplusplus
}
#endif
#endif /* KEYER_PIPELINE_H */
