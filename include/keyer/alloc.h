/**
 * @file keyer/alloc.h
 * @brief Aligned host allocation through an optional caller-supplied allocator.
 *
 * Objects that allocate host memory take a `const keyer_allocator *` in their
 * parameters; NULL selects the system allocator (aligned_alloc/free). Tests
 * use a custom allocator to inject allocation failures.
 */
#ifndef KEYER_ALLOC_H
#define KEYER_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Default alignment of keyer host buffers: one cache line, enough for AVX-512. */
#define KEYER_ALIGNMENT 64

/** A host allocator. Both callbacks are required. The struct is copied by users. */
typedef struct keyer_allocator {
    /** Returns @p size bytes aligned to @p alignment (a power of two), or NULL. */
    void *(*alloc)(void *opaque, size_t size, size_t alignment);
    /** Frees memory returned by alloc; accepts NULL. */
    void (*free)(void *opaque, void *ptr);
    void *opaque; /**< passed to both callbacks */
} keyer_allocator;

/**
 * Allocates @p size bytes aligned to @p alignment (power of two, >= sizeof(void*))
 * with @p a (NULL: system allocator). Returns NULL on failure, on size 0 or on a
 * bad alignment. Free with keyer_free() and the same allocator.
 */
void *keyer_alloc(const keyer_allocator *a, size_t size, size_t alignment);

/** Like keyer_alloc() and zero-fills the memory. */
void *keyer_calloc(const keyer_allocator *a, size_t size, size_t alignment);

/** Frees memory from keyer_alloc()/keyer_calloc(); NULL is accepted. */
void keyer_free(const keyer_allocator *a, void *ptr);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_ALLOC_H */
