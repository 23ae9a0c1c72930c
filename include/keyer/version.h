/**
 * @file keyer/version.h
 * @brief Library version and build capabilities.
 */
#ifndef KEYER_VERSION_H
#define KEYER_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

/** The library's version, "MAJOR.MINOR.PATCH". Never NULL. */
const char *keyer_version(void);

/** Non-zero when the library was built with its CUDA backends. */
int keyer_built_with_cuda(void);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_VERSION_H */
