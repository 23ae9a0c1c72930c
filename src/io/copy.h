/*
 * The writer's copied streams (internal to io, prefix kr_): the audio and subtitle streams of
 * a keyer_reader's input that a keyer_writer carries over (keyer_writer_params::copy_from),
 * copied packet by packet, or re-encoded when the container cannot hold the input's audio
 * codec (decoded, resampled and encoded again, AAC where the container takes it), with the
 * input's chapters and global metadata.
 */
#ifndef KEYER_IO_COPY_H
#define KEYER_IO_COPY_H

#include <libavformat/avformat.h>

#include "keyer/io.h"

typedef struct kr_copy_stream kr_copy_stream;

/** The copied streams of one writer. Zero-initialise; free with kr_copies_free. */
typedef struct kr_copies {
    const char *path;           /* the output, for messages */
    const keyer_logger *logger;
    AVFormatContext *oc;        /* the writer's output (not owned) */
    keyer_reader *src;          /* the reader copied from; NULL: nothing is copied */
    kr_copy_stream *streams;
    int count;
    int *map; /* input stream index -> streams index, -1: not copied */
    int nmap;
    AVPacket *pkt; /* the packet being copied */
} kr_copies;

/**
 * Adds to @p oc (whose header is not written yet) an output stream for each audio and
 * subtitle stream of @p src that the container can hold (or re-encode, for audio), copies
 * the chapters and metadata, and tells @p src that a consumer takes its packets from now on.
 * @p path and @p logger must outlive @p c. Streams the container cannot take are logged and
 * skipped. Errors: OUT_OF_MEMORY, UNSUPPORTED (no decoder or encoder for a re-encode), or
 * libav's error.
 */
keyer_status kr_copies_open(kr_copies *c, AVFormatContext *oc, keyer_reader *src,
                            const char *path, const keyer_logger *logger, keyer_error *err);

/** Writes (or re-encodes) every packet the reader has kept so far. Errors: libav's. */
keyer_status kr_copies_write_pending(kr_copies *c, keyer_error *err);

/** Number of output streams added. */
int kr_copies_count(const kr_copies *c);

/** At the end: drains re-encoded stream @p i (its decoder, resampler and encoder) into the
 *  output. Nothing for a stream copied as is or that never had a frame. Errors: libav's. */
keyer_status kr_copies_flush(kr_copies *c, int i, keyer_error *err);

/** Frees everything and zeroes @p c; accepts a zeroed struct. */
void kr_copies_free(kr_copies *c);

#endif /* KEYER_IO_COPY_H */
