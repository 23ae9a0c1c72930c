#include "keyer/version.h"

const char *keyer_version(void) { return KEYER_VERSION; }

int keyer_built_with_cuda(void)
{
#ifdef KEYER_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}
