/*
 * The writer's video encoder (internal to io, prefix kr_): the libavcodec encoder a
 * keyer_writer feeds, with the pixel format and the options chosen for it, NVENC's CUDA input
 * frames when the encoder is NVENC in a CUDA build, and the conversion of keyer frames into
 * the encoder's input (host conversion with libswscale; device frames downloaded, or copied
 * device to device into NVENC's frames).
 */
#ifndef KEYER_IO_ENCODER_H
#define KEYER_IO_ENCODER_H

#include <libavcodec/avcodec.h>

#include "io/av.h"
#include "keyer/io.h"

/** What the encoder is opened for (the writer's resolved settings). */
typedef struct kr_encoder_config {
    const char *path;           /* the output, for messages; must outlive the encoder */
    const keyer_logger *logger; /* must outlive the encoder */
    int width, height;
    AVRational time_base;       /* the writer's time base */
    AVRational frame_tb;        /* 1 / frame rate */
    keyer_color_matrix matrix;  /* resolved: never UNSPECIFIED */
    keyer_color_range range;
    int global_header;          /* the container wants global headers */
    int cuda_device;            /* NVENC's device: its CUDA frames, or its "gpu" option */
    int nvenc_bframes;          /* kr_nvenc_bframes: the B-frame setup NVENC takes here */
} kr_encoder_config;

/** The B-frame setup of keyer's NVENC defaults, best first (GPUs without B-frames as
 *  references, or without B-frames at all (HEVC before Turing), take a later one). */
typedef enum kr_nvenc_bframes {
    KR_NVENC_BFRAMES_MIDDLE_REF = 0, /* 3 B-frames, the middle one a reference */
    KR_NVENC_BFRAMES_NO_REF,         /* 3 B-frames, none a reference */
    KR_NVENC_BFRAMES_NONE,           /* no B-frames */
    KR_NVENC_BFRAMES_COUNT
} kr_nvenc_bframes;

/** An encoder. Zero-initialise; free with kr_encoder_free. */
typedef struct kr_encoder {
    AVCodecContext *ctx;    /* NULL until opened */
    AVFrame *vframe;        /* host frame in the encoder's (software) format */
    AVFrame *hwframe;       /* NVENC input */
    AVBufferRef *hw_frames; /* NVENC's CUDA frames context */
    int hw_input;           /* device NV12 frames go to NVENC without a host round trip */
    int failed;             /* the encoder itself (or its CUDA frames) failed to open */
    kr_converter conv;
    keyer_frame *download;  /* host copy of a device frame for a CPU encoder */
    const char *path;
    int width, height;
    keyer_color_matrix matrix;
    char name[64];          /* the encoder's name once open */
} kr_encoder;

/** 1 when @p c is one of NVIDIA's NVENC encoders. */
int kr_encoder_is_nvenc(const AVCodec *c);

/**
 * NVENC preset for keyer's preset name @p preset: NULL gives "p5"; x264/x265 names map to
 * NVENC's p1 (fastest) .. p7 (best): ultrafast p1, superfast p2, veryfast and faster p3, fast
 * p4, medium p5, slow p6, slower, veryslow and placebo p7; any other name (p1..p7, NVENC's
 * own "hq", "ll", ...) is returned as given. Returns a static string or @p preset.
 */
const char *kr_nvenc_preset(const char *preset);

/**
 * keyer's NVENC setup for offline transcoding (NVIDIA's recommendations for high quality,
 * as FFmpeg's nvenc options) into @p opts: preset (kr_nvenc_preset of @p p->preset), tune hq,
 * rc vbr with cq @p p->quality (23 when < 0), rc-lookahead 20, spatial-aq 1, B-frames as
 * @p bframes says (bf 3 and b_ref_mode middle / disabled, or bf 0), and, when @p gpu >= 0,
 * "gpu" (the device FFmpeg opens when it gets host frames). The caller's codec_options are
 * applied after these by kr_encoder_options and win. Entries already in @p opts are replaced.
 * Errors: OUT_OF_MEMORY.
 */
keyer_status kr_nvenc_options(const keyer_writer_params *p, kr_nvenc_bframes bframes, int gpu,
                              AVDictionary **opts, keyer_error *err);

/**
 * The options encoder context @p e (of encoder @p c, pixel format set) is opened with for
 * @p cfg and @p p: quality, preset (when @p use_preset), each encoder's defaults (NVENC's from
 * kr_nvenc_options), then @p p->codec_options, which replace any of them; rate-control fields
 * of @p e are set too. Entries are added to @p opts (the caller frees it).
 * Errors: INVALID_ARGUMENT (codec options that do not parse), OUT_OF_MEMORY.
 */
keyer_status kr_encoder_options(AVCodecContext *e, const AVCodec *c, const kr_encoder_config *cfg,
                                const keyer_writer_params *p, int use_preset, AVDictionary **opts,
                                keyer_error *err);

/**
 * Creates and opens encoder @p c into @p e (zeroed, or left by a failed open) for @p cfg,
 * with @p params' pixel format, alpha, quality, codec options and (when @p use_preset)
 * preset. An NVENC encoder in a CUDA build takes CUDA frames (a frames context on the primary
 * context of device cfg->cuda_device); without CUDA it takes host frames that FFmpeg uploads. On failure e->ctx stays NULL, except when a buffer for the opened
 * encoder could not be allocated; e->failed says whether the encoder itself (or NVENC's CUDA
 * frames) failed, where the caller may try another encoder.
 * Errors: INVALID_ARGUMENT (pixel format name, codec options), UNSUPPORTED (pixel format or
 * alpha the encoder cannot take, no CUDA), OUT_OF_MEMORY, DEVICE, or libavcodec's error.
 */
keyer_status kr_encoder_open(kr_encoder *e, const AVCodec *c, const kr_encoder_config *cfg,
                             const keyer_writer_params *params, int use_preset,
                             keyer_error *err);

/**
 * Fills the encoder's input from @p f (checked by the caller: the encoder's size, not
 * GRAYF32) and sets *@p in to it (owned by the encoder, valid until the next call). Host
 * frames are converted into e->vframe (and uploaded into NVENC's frames); CUDA frames are
 * copied straight into NVENC's frames when both are NV12, else downloaded first.
 * Errors: UNSUPPORTED (a CUDA frame without CUDA; a conversion libswscale cannot do),
 * OUT_OF_MEMORY, DEVICE, or libav's error; messages name the output.
 */
keyer_status kr_encoder_input(kr_encoder *e, const keyer_frame *f, AVFrame **in,
                              keyer_error *err);

/** Frees everything the encoder holds and zeroes it; accepts a zeroed encoder. */
void kr_encoder_free(kr_encoder *e);

#endif /* KEYER_IO_ENCODER_H */
