/*
 * Which video encoder a writer opens when the codec is left to keyer (internal to io, prefix
 * kr_): the choice between NVENC and x264/x265 from the answer of a keyer_encoder_probe
 * (public, keyer/io.h), and the probe's remembered B-frame setup. The choice is a function of
 * its arguments, so it is tested without NVENC hardware (tests/unit/test_io_encoder_choice.c).
 */
#ifndef KEYER_IO_ENCODER_PROBE_H
#define KEYER_IO_ENCODER_PROBE_H

#include "io/encoder.h"
#include "keyer/io.h"

/** What a writer's codec setting asks for. */
typedef enum kr_encoder_family {
    KR_ENCODER_NAMED = 0, /* an encoder named by the caller (or a container default that is not
                           * H.264/HEVC): opened as it is */
    KR_ENCODER_H264,      /* H.264, encoder left to keyer */
    KR_ENCODER_HEVC,      /* HEVC, encoder left to keyer */
} kr_encoder_family;

/**
 * The family of codec setting @p requested (the writer's codec; NULL: none given) with
 * @p container_default the container's default encoder name (used when @p requested is NULL;
 * may be NULL). "h264"/"avc" and a default of libx264 or h264_nvenc give H264; "hevc"/"h265"
 * and a default of libx265 or hevc_nvenc give HEVC (names compared without case); anything
 * else is NAMED.
 */
kr_encoder_family kr_encoder_family_of(const char *requested, const char *container_default);

/** "h264_nvenc" or "hevc_nvenc" for @p f; NULL for NAMED. */
const char *kr_encoder_nvenc_name(kr_encoder_family f);

/** The encoder to open for family @p f (not NAMED): "h264_nvenc"/"hevc_nvenc" when
 *  @p nvenc_opens, else "libx264"/"libx265". NULL for NAMED. */
const char *kr_encoder_pick(kr_encoder_family f, int nvenc_opens);

/** The B-frame setup that opened on the probe's device for @p codec (after a successful
 *  keyer_encoder_probe_nvenc); KR_NVENC_BFRAMES_MIDDLE_REF when unknown. */
kr_nvenc_bframes kr_encoder_probe_bframes(keyer_encoder_probe *probe, const char *codec);

/** Test encoders the probe has opened so far (each answer is probed once). */
int kr_encoder_probe_opens(keyer_encoder_probe *probe);

#endif /* KEYER_IO_ENCODER_PROBE_H */
