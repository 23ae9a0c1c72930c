/*
 * Several GPUs in one session: the arithmetic (internal, prefix kr_). Pure functions of their
 * arguments, so the unit tests check them without a GPU.
 *
 * A stream's load is the pixels per second it brings: width x height x frame rate (30 when
 * the rate is unknown). Streams are placed one at a time, when they are added, on the GPU
 * with the least load so far (greedy); a tie goes to the lowest index, and the engines are
 * kept in ordinal order, so to the lowest ordinal.
 */
#ifndef KEYER_PIPELINE_PLACEMENT_H
#define KEYER_PIPELINE_PLACEMENT_H

#include <stdint.h>

#include "keyer/config.h"
#include "keyer/frame.h"
#include "keyer/pipeline.h"

/** Frame rate a stream counts with when its own is unknown. */
#define KR_PLACE_DEFAULT_FPS 30.0

/** Pixels per second of a @p width x @p height stream at @p rate ({0,1}: unknown, 30). */
double kr_place_load(int width, int height, keyer_rational rate);

/** Index of the smallest of @p load[0..n-1] (the first on a tie); -1 when n < 1. */
int kr_place_pick(const double *load, int n);

/**
 * Places @p count streams (loads @p stream_load, in the order they are added) on @p gpus
 * GPUs whose loads start at @p gpu_load (updated): @p out[i] receives stream i's GPU index.
 * Returns 0, or -1 for bad arguments (gpus < 1, count < 0, NULL with count > 0).
 */
int kr_place_streams(const double *stream_load, int count, double *gpu_load, int gpus,
                     int *out);

/**
 * GPU-to-GPU failover: the engine a stream of a failed GPU moves to, the least loaded of
 * those with @p healthy[i] non-zero (running, GPU not failed; the failed one is marked 0),
 * the lowest index on a tie; -1 when there is none (the stream then goes on on the CPU).
 */
int kr_place_failover(const double *load, const int *healthy, int n);

/**
 * Parses the fault-injection switch KEYER_FAIL_CUDA_AT_FRAME: "F" (frame F on any device:
 * *@p ordinal = -1) or "cuda:K@F" (frame F on CUDA device K only). F in 0..2^30-1, K in
 * 0..63. Returns 0, or -1 for any other text (both outputs then untouched).
 */
int kr_fail_spec_parse(const char *text, int *ordinal, int *frame);

/**
 * The frame at which CUDA device @p ordinal fails under the switch @p text: a comma-separated
 * list of kr_fail_spec_parse() items ("cuda:1@10,cuda:0@30": each GPU its own frame; an item
 * "F" applies to every device; the first item naming the device, or applying to all, wins).
 * Returns that frame, or -1 when no item applies or the text is not such a list (NULL
 * included).
 */
int kr_fail_spec_frame(const char *text, int ordinal);

/**
 * Setter of the session table's cuda_devices option (keyer_session_params::cuda_devices):
 * "all" (KEYER_CUDA_DEVICES_ALL), "none" or "" (0), ordinals "0,2" (a single "1" lists one
 * GPU). Errors: INVALID_ARGUMENT naming the option and the value (as
 * keyer_device_parse_list()); the field is then unchanged.
 */
keyer_status kr_set_cuda_devices(const keyer_option *option, void *obj, const char *value,
                                 keyer_error *err);

#endif
