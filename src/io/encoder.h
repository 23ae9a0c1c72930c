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
} kr_encoder_config;

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
 * Creates and opens encoder @p c into @p e (zeroed, or left by a failed open) for @p cfg,
 * with @p params' pixel format, alpha, quality, codec options and (when @p use_preset)
 * preset. An NVENC encoder in a CUDA build takes CUDA frames (a frames context on device 0's
 * primary context). On failure e->ctx stays NULL, except when a buffer for the opened
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
