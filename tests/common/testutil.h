/*
 * Helpers shared by keyer's tests (include after <cmocka.h> prerequisites).
 *  - a counting allocator that can be told to fail (out-of-memory injection),
 *  - paths to models, test data and ../shared from the environment ctest sets,
 *  - whole-file reading and float comparison.
 */
#ifndef KEYER_TESTUTIL_H
#define KEYER_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "keyer/alloc.h"
#include "keyer/frame.h"

/** Counting allocator: fails the allocation numbered fail_at (1-based; 0 = never). */
typedef struct kt_alloc_state {
    long calls;     /* allocations attempted */
    long live;      /* allocations not yet freed */
    long fail_at;   /* which call fails; 0 = none */
} kt_alloc_state;

/** Returns an allocator backed by @p state. */
keyer_allocator kt_counting_allocator(kt_alloc_state *state);

/** State of the tests' small deterministic generators (xorshift32): kt_rng_next() of
 *  kt_graph.h and kt_next() of kt_effects.h. */
typedef struct kt_rng {
    uint32_t s;
} kt_rng;

/** $KEYER_MODELS_DIR/<name> into @p buf (size n). Returns buf. */
const char *kt_model_path(char *buf, size_t n, const char *file);
/** $KEYER_TEST_DATA/<name>. */
const char *kt_data_path(char *buf, size_t n, const char *file);
/** $KEYER_SHARED_DIR/<name> or NULL when ../shared is absent. */
const char *kt_shared_path(char *buf, size_t n, const char *file);
/** Non-zero if the file exists. */
int kt_exists(const char *path);

/** Reads a whole file into malloc'd memory; *size set. NULL on failure. */
void *kt_read_file(const char *path, size_t *size);
/** Reads a file of little-endian IEEE binary16 values into malloc'd floats (each converted
 *  exactly); *count set to the number of values. NULL on failure or an odd byte count. */
float *kt_read_f16_file(const char *path, size_t *count);
/** Writes bytes to a file; 0 on success. */
int kt_write_file(const char *path, const void *data, size_t size);

/** Largest |a[i] - b[i]|; NaN anywhere gives INFINITY. */
double kt_max_abs_diff(const float *a, const float *b, size_t n);

/**
 * Golden images: compares host frame @p got (GRAY8, RGB24 or RGBA) with
 * $KEYER_TEST_DATA/golden/<name>.png, sample by sample. The policy shared by keyer's golden
 * tests: every sample within @p tolerance code values (1), so rounding differences between
 * compilers and FMA contraction pass and any visible change fails. With KEYER_UPDATE_GOLDEN=1
 * in the environment the golden file is (re)written instead. On a mismatch the frame is also
 * written to ./<name>.got.png (the test's working directory) for inspection.
 * Returns 0 (match, or written), 1 (mismatch: size or samples) or -1 (golden unreadable, or a
 * write failed); @p msg (size n) receives a one-line description either way.
 */
int kt_golden_check(const keyer_frame *got, const char *name, int tolerance, char *msg, size_t n);

/** A per-test temporary directory path (created), under $TMPDIR or /tmp. */
const char *kt_tmpdir(char *buf, size_t n, const char *tag);

#endif
