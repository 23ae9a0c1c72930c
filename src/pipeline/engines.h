/*
 * Sessions over several devices (internal, prefix kr_): engines.c, which also holds the public
 * keyer_session_* calls (a session on one device forwards them to its one engine). See
 * keyer_session_params::cuda_devices for what a user sees.
 */
#ifndef KEYER_PIPELINE_ENGINES_H
#define KEYER_PIPELINE_ENGINES_H

#include "pipeline/session.h"

/** Most engines of one session: every ordinal keyer_device_parse_list() reads. */
#define KR_MAX_ENGINES 64

/**
 * Creates a session over @p count engines, engine i computing on @p kinds[i] (CUDA device
 * @p ordinals[i] for KEYER_DEVICE_CUDA), in that order (placement ties go to the lowest
 * index). keyer_session_create() calls it with the GPUs of params->cuda_devices, all CUDA;
 * tests call it with CPU engines to run the several-engine machinery without a GPU.
 * params->cuda_devices is not read. With @p count 1 the session is one engine, as for one
 * device. Errors: INVALID_ARGUMENT (bad arguments), and those of keyer_session_create().
 */
keyer_status kr_session_create_engines(const keyer_session_params *params,
                                       const keyer_device_kind *kinds, const int *ordinals,
                                       int count, keyer_session **out, keyer_error *err);

/** The engines of a session over several devices (cuda_devices) into @p out, at most @p max
 *  of them (owned by the session); their count, 0 for a session on one device. For the
 *  statistics file's per-device tables. */
int kr_session_engines(keyer_session *session, keyer_session **out, int max);

/** Index of the engine stream @p stream_id runs on (0 for a session on one device); -1 for
 *  a bad id, and for an input split over every engine (split_gpus). For tests and reports. */
int kr_session_stream_engine(const keyer_session *session, int stream_id);

/**
 * Marks engine @p engine's device failed while the session runs, as a CUDA error does
 * (kr_engine_mark_failed): its file streams move to the least loaded healthy engine
 * (GPU-to-GPU failover), else go on on the CPU. For the tests of the failover on CPU
 * engines; KEYER_FAIL_CUDA_AT_FRAME=cuda:K@N is the switch on GPUs. Bad arguments are
 * ignored.
 */
void kr_session_fail_engine(keyer_session *session, int engine);

/** Engine index where the rest of session stream @p stream_id runs after its GPU failed;
 *  -1 when it did not move (or a bad id). For tests and reports. */
int kr_session_stream_moved_to(const keyer_session *session, int stream_id);

#endif
