#include "keyer/version.h"

#include "core/device.h"

const char *keyer_version(void) { return KEYER_VERSION; }

int keyer_built_with_cuda(void) { return kr_device_cuda() != NULL; }
