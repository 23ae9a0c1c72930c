/*
 * One file split over several engines (internal, prefix kr_): keyer_session_params::split_gpus.
 *
 * The file is cut at keyframes into chunks of whole GOPs (keyer_reader_plan_chunks, the plan
 * of the split decode); chunk k goes to engine k mod N. Each engine gets one pushed stream
 * (pulled, no output of its own) and one producer thread with its own reader (NVDEC of that
 * GPU), which seeks to each of its chunks in turn, reads the chunk's frames (pts in
 * [start_k, start_k+1)), marks the first one KEYER_FRAME_FLAG_DISCONTINUITY (the matte's
 * temporal smoothing restarts: as at the start of a file) and sends them. One writer (the
 * thread of kr_split_gpus_run) receives chunk 0 from engine 0, chunk 1 from engine 1, ...,
 * so frames leave in the file's order; a frame of a later chunk received while looking for
 * the end of the current one (its pts says so) is kept for its turn. The writer downloads
 * device frames and encodes them with one keyer_writer, or drops them (no output).
 *
 * Engine g may run ahead by what its stream's pool holds (a send that finds the pool full
 * waits for the writer): chunks shorter than the pool keep every GPU busy.
 */
#ifndef KEYER_PIPELINE_SPLIT_GPUS_H
#define KEYER_PIPELINE_SPLIT_GPUS_H

#include "keyer/pipeline.h"
#include "pipeline/session.h"

typedef struct kr_split_gpus kr_split_gpus;

/**
 * Plans the split of @p fp->input over @p parts engines and copies what the run needs (the
 * paths and the writer's strings are copied). Errors: UNSUPPORTED (the file cannot be
 * split: not seekable, no keyframe index, fewer than two chunks; the caller then runs it
 * as one stream), IO / BAD_DATA (cannot open), OUT_OF_MEMORY.
 */
keyer_status kr_split_gpus_create(const keyer_file_stream_params *fp, int parts,
                                  const keyer_logger *logger, kr_split_gpus **out,
                                  keyer_error *err);

/** Pixels per second of the input (for the report); 0 when unknown. */
double kr_split_gpus_load(const kr_split_gpus *sp);

/**
 * Runs the split on @p engines[0..count-1] (not started, holding no file stream) and
 * returns when every chunk is written (or dropped) and the output finalised; calls
 * @p params->progress every params->progress_interval_ms. Errors: the first error of a
 * producer, an engine or the writer (the message names the input or the output);
 * INTERRUPTED after kr_split_gpus_cancel() (the output holds every frame written so far).
 */
keyer_status kr_split_gpus_run(kr_split_gpus *sp, keyer_session *const *engines, int count,
                               const keyer_session_params *params, keyer_error *err);

/** Stops the readers and the writer (async-signal-safe). NULL accepted. */
void kr_split_gpus_cancel(kr_split_gpus *sp);

/** The split input as one stream's report (device: the engines' devices and "split"). */
void kr_split_gpus_report(kr_split_gpus *sp, keyer_session *const *engines, int count,
                          keyer_stream_report *out);

/** The split's first error (KEYER_OK when none), its message in *@p err (may be NULL). */
keyer_status kr_split_gpus_status(kr_split_gpus *sp, keyer_error *err);

/** Frees everything; accepts NULL and sets *@p sp to NULL. */
void kr_split_gpus_destroy(kr_split_gpus **sp);

#endif
