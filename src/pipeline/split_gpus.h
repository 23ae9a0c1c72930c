/*
 * One file split over several engines (internal, prefix kr_): keyer_session_params::split_gpus.
 *
 * The file is cut at keyframes into chunks of whole GOPs (keyer_reader_plan_chunks gives the
 * GOPs): lanes x c chunks of at most about KR_SPLIT_CHUNK_FRAMES frames, each lane the same
 * share of the file within a GOP (kr_split_gpus_balance). Each of the N engines runs C *lanes* (C chunks in flight per engine,
 * keyer_session_params::split_chunks), L = N x C lanes in all; lane l runs on engine l mod N
 * and takes chunks l, l + L, l + 2L, ... (consecutive chunks go to different GPUs, then to
 * the same GPU's other lanes). A lane is one pushed stream of its engine (pulled, no output
 * of its own) and one producer thread with its own reader: a decoder session of its own
 * (NVDEC of that GPU; a GPU has several NVDEC engines and one session keeps one busy), which
 * seeks to each of its chunks in turn (the file's first chunk is read where the reader's
 * opening left it: a seek back would flush the decoder and, on NVDEC, set its session up
 * again), reads the chunk's frames (pts in [start_k, start_k+1); where the plan counts them
 * exactly, that many: its decoder then takes only its reorder delay's pictures of the next
 * chunk, not the next chunk's first frame as well), marks the first one
 * KEYER_FRAME_FLAG_DISCONTINUITY (the matte's temporal smoothing restarts: as at the start of
 * a file) and sends them. One writer (the
 * thread of kr_split_gpus_run) receives chunk 0 from lane 0, chunk 1 from lane 1, ..., so
 * frames leave in the file's order; a frame of a later chunk received while looking for the
 * end of the current one (its pts says so) is kept for its turn. The writer downloads device
 * frames and encodes them with one keyer_writer, or drops them (no output).
 *
 * The bounded buffer of a lane is its pushed stream's pool: a lane runs ahead of the writer
 * by what that pool holds (a send that finds it full waits; about 85 frames in throughput
 * mode), more than a chunk, so every lane decodes and processes its next chunk while the
 * writer takes the others' in turn. With one engine and C >= 2 the file is split over several
 * decoder sessions of one GPU.
 */
#ifndef KEYER_PIPELINE_SPLIT_GPUS_H
#define KEYER_PIPELINE_SPLIT_GPUS_H

#include "keyer/pipeline.h"
#include "pipeline/session.h"

typedef struct kr_split_gpus kr_split_gpus;

/** Chunks in flight per engine when keyer_session_params::split_chunks is 0. */
#define KR_SPLIT_DEFAULT_CHUNKS 2
/** Most chunks in flight per engine (the option's maximum), and most lanes in all. */
#define KR_SPLIT_MAX_CHUNKS 16
#define KR_SPLIT_MAX_LANES 128
/** Frames a chunk holds at most (about: whole GOPs), so that it fits a lane's pool of about
 *  85 frames and the lane runs a whole chunk ahead of the writer. */
#define KR_SPLIT_CHUNK_FRAMES 72

/** Lanes of a split over @p parts engines with @p per_engine chunks in flight each (0: the
 *  default; clamped to KR_SPLIT_MAX_CHUNKS and to KR_SPLIT_MAX_LANES in all); 0 for
 *  @p parts outside 1..64. A pure function, for the unit tests. */
int kr_split_gpus_lanes(int parts, int per_engine);

/**
 * The chunks of a split over @p lanes lanes, from the @p n GOP starts @p gops (increasing
 * pts; the file ends at @p end): lanes x c chunks, c the fewest that keep each within about
 * @p max_span (pts units), cut at the GOP starts nearest to equal shares of the file, so that
 * every lane (chunks l, l + lanes, ...) gets the same share within a GOP: the run ends with
 * its slowest lane (the 240-frame 4K file on 4 lanes: chunks of 60 frames, 60 each; before,
 * 10 chunks of 24 frames gave two lanes 72 and two 48). Fewer chunks when there are fewer
 * GOPs. Writes the chunk starts (a subset of @p gops, the first one first) to @p out (room
 * for @p n) and returns their count; @p gops as they are for a bad @p end, @p lanes or
 * @p max_span. A pure function, for the unit tests.
 */
int kr_split_gpus_balance(const int64_t *gops, int n, int64_t end, int lanes,
                          int64_t max_span, int64_t *out);

/**
 * Plans the split of @p fp->input over @p parts engines with @p per_engine chunks in flight
 * on each (kr_split_gpus_lanes) and copies what the run needs (the paths and the writer's
 * strings are copied). Errors: UNSUPPORTED (fewer than two lanes, or the file cannot be
 * split: not seekable, no keyframe index, fewer than two chunks; the caller then runs it as
 * one stream), INVALID_ARGUMENT (@p parts outside 1..64), IO / BAD_DATA (cannot open),
 * OUT_OF_MEMORY.
 */
keyer_status kr_split_gpus_create(const keyer_file_stream_params *fp, int parts, int per_engine,
                                  const keyer_logger *logger, kr_split_gpus **out,
                                  keyer_error *err);

/** Pixels per second of the input (for the report); 0 when unknown. */
double kr_split_gpus_load(const kr_split_gpus *sp);

/**
 * Runs the split on @p engines[0..count-1] (not started, holding no file stream) and
 * returns when every chunk is written (or dropped) and the output finalised; calls
 * @p params->progress every params->progress_interval_ms. After a run without error the
 * timeline goes to the logger (info: first and last frame out, the writer's waits, per
 * engine when its lanes read their last frame and how long they waited for room; debug: per
 * chunk). Errors: the first error of a
 * producer, an engine or the writer (the message names the input or the output);
 * INTERRUPTED after kr_split_gpus_cancel() (the output holds every frame written so far).
 */
keyer_status kr_split_gpus_run(kr_split_gpus *sp, keyer_session *const *engines, int count,
                               const keyer_session_params *params, keyer_error *err);

/** Stops the readers and the writer (async-signal-safe). NULL accepted. */
void kr_split_gpus_cancel(kr_split_gpus *sp);

/** The split input as one stream's report (device: the engines' devices and " (split)",
 *  "cuda:0 + cuda:1 (split)"; frames, decoder set-ups and decoded pictures summed over the
 *  lanes, each lane's counted after each of its chunks). */
void kr_split_gpus_report(kr_split_gpus *sp, keyer_session *const *engines, int count,
                          keyer_stream_report *out);

/** The split's first error (KEYER_OK when none), its message in *@p err (may be NULL). */
keyer_status kr_split_gpus_status(kr_split_gpus *sp, keyer_error *err);

/** Frees everything; accepts NULL and sets *@p sp to NULL. */
void kr_split_gpus_destroy(kr_split_gpus **sp);

#endif
