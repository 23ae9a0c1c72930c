/**
 * @file keyer/registry.h
 * @brief The models keyer ships: short names, files, input normalisation, output meaning.
 *
 * The setup script fetches the files (models/manifest.tsv); this registry maps a short name
 * such as "selfie" to its file and says how to feed it and read it.
 *
 * @code
 * char path[4096];
 * const keyer_model_entry *e = keyer_registry_find("selfie");
 * if (keyer_registry_resolve("selfie", path, sizeof(path), &err) == KEYER_OK)
 *     keyer_model_load_file(path, &model, &err);
 * @endcode
 */
#ifndef KEYER_REGISTRY_H
#define KEYER_REGISTRY_H

#include <stddef.h>

#include "keyer/nn.h"
#include "keyer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What a model does. */
typedef enum keyer_model_task {
    KEYER_TASK_SEGMENTATION = 0, /**< person mask */
    KEYER_TASK_FACE_DETECTION,   /**< SSD boxes + 6 keypoints (needs anchor decoding) */
    KEYER_TASK_POSE_LANDMARKS,   /**< 39 landmarks, body mask logits, heatmaps, world landmarks */
    KEYER_TASK_FACE_LANDMARKS,   /**< 468 face-mesh points */
} keyer_model_task;

/** One shipped model. All strings are static. */
typedef struct keyer_model_entry {
    const char *name;        /**< short name: "selfie", "face-short", ... */
    const char *file;        /**< file name in the models directory */
    const char *package;     /**< npm package@version it comes from */
    keyer_model_task task;
    int input_width, input_height;
    float input_scale;       /**< tensor value = pixel / 255 * input_scale + input_offset */
    float input_offset;      /**< ([0,1]: scale 1, offset 0; [-1,1]: scale 2, offset -1) */
    int letterbox;           /**< 1: keep aspect ratio with padding (MediaPipe's graphs); 0: stretch */
    int mask_output;         /**< index of the person-mask output, or -1 */
    int mask_is_logit;       /**< 1: apply a sigmoid to the mask output; 0: already a probability */
    const char *description; /**< one line: what it is for and what it outputs */
    /** 1: on CUDA, half precision meets keyer's bounds for this model on the test photos and
     *  clip frames (masks agree at 0.5 on >= 99.5% of pixels with mean absolute difference
     *  <= 5e-3 to float32; the same faces after decoding), so KEYER_PRECISION_AUTO runs it in
     *  f16; 0: AUTO keeps float32. tests/unit/test_precision_gpu.c measures it. */
    int half_ok;
} keyer_model_entry;

/**
 * The precision a model runs in when @p requested is asked for on a CUDA backend (@p cuda
 * non-zero) or another: F32 and F16 stay as they are on CUDA; AUTO gives F16 on CUDA for an
 * entry with half_ok, F32 otherwise (also for @p entry NULL: a model outside the registry);
 * anything other than CUDA gives F32 (the CPU backends compute in float32 only).
 */
keyer_precision keyer_registry_precision(const keyer_model_entry *entry, keyer_precision requested,
                                         int cuda);

/** The registry: *count entries (static, never NULL). */
const keyer_model_entry *keyer_registry_list(int *count);

/** The entry named @p name, or NULL. */
const keyer_model_entry *keyer_registry_find(const char *name);

/**
 * The directory models are read from: $KEYER_MODELS_DIR if set, else the directory the build
 * was configured with (the repository's models/). Static or environment storage; never NULL.
 */
const char *keyer_registry_models_dir(void);

/**
 * Resolves @p name_or_path to a model file path in @p buf: a registry name gives
 * models_dir/file; anything containing '/' or ending in ".tflite" is taken as a path.
 * Errors: INVALID_ARGUMENT (unknown name: the message lists the known names; buffer too small),
 * IO (the file does not exist: the message says to run scripts/setup.sh).
 */
keyer_status keyer_registry_resolve(const char *name_or_path, char *buf, size_t size,
                                    keyer_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_REGISTRY_H */
