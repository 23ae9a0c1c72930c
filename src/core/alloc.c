#include "keyer/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int valid_alignment(size_t alignment)
{
    return alignment >= sizeof(void *) && (alignment & (alignment - 1)) == 0;
}

void *keyer_alloc(const keyer_allocator *a, size_t size, size_t alignment)
{
    if (size == 0 || !valid_alignment(alignment))
        return NULL;
    if (a)
        return a->alloc(a->opaque, size, alignment);
    /* aligned_alloc wants a size that is a multiple of the alignment. */
    if (size > SIZE_MAX - alignment)
        return NULL;
    size_t rounded = (size + alignment - 1) & ~(alignment - 1);
    return aligned_alloc(alignment, rounded);
}

void *keyer_calloc(const keyer_allocator *a, size_t size, size_t alignment)
{
    void *p = keyer_alloc(a, size, alignment);
    if (p)
        memset(p, 0, size);
    return p;
}

void keyer_free(const keyer_allocator *a, void *ptr)
{
    if (!ptr)
        return;
    if (a)
        a->free(a->opaque, ptr);
    else
        free(ptr);
}
