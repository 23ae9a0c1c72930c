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

#include "keyer/effects.h"
#include "keyer/nn.h"
#include "keyer/options.h"
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
    KEYER_TASK_POSE_DETECTION,   /**< SSD person boxes + 4 keypoints (hip centre, full-body
                                      size/rotation, shoulder centre, upper-body size) */
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
    /** Per-channel standardisation after input_scale/offset, in the tensor's channel order:
     *  value = (v - input_mean[c]) / input_std[c]. All zero (the TFLite models): none. */
    float input_mean[3], input_std[3];
    keyer_tensor_layout layout; /**< the file's image layout: NHWC (TFLite) or NCHW (ONNX) */
} keyer_model_entry;

/**
 * The precision a model runs in when @p requested is asked for on a CUDA backend (@p cuda
 * non-zero) or another: F32 and F16 stay as they are on CUDA; AUTO gives F16 on CUDA for an
 * entry with half_ok, F32 otherwise (also for @p entry NULL: a model outside the registry);
 * anything other than CUDA gives F32 (the CPU backends compute in float32 only).
 */
keyer_precision keyer_registry_precision(const keyer_model_entry *entry, keyer_precision requested,
                                         int cuda);

/* ---- model descriptions ------------------------------------------------------------------- */

/** What the chosen output of a segmentation model holds (keyer_model_desc::output_kind). */
typedef enum keyer_mask_kind {
    KEYER_MASK_PROBABILITY = 0, /**< the person's probability in [0,1] (a sigmoid in the graph) */
    KEYER_MASK_LOGITS,          /**< logits: keyer applies 1 / (1 + exp(-v)) */
    KEYER_MASK_ALPHA,           /**< an alpha matte in [0,1] (clamped to it) */
    KEYER_MASK_CLASSES,         /**< one score per class on the channel axis (a multi-class
                                 *   segmenter): the mask is the softmax probability of
                                 *   keyer_model_desc::person_class */
} keyer_mask_kind;
KEYER_OPTION_ENUM_CHECK(keyer_mask_kind);

/** Order of the colour channels in a model's input. */
typedef enum keyer_color_order {
    KEYER_COLOR_RGB = 0, /**< red, green, blue (TFLite, PyTorch) */
    KEYER_COLOR_BGR,     /**< blue, green, red (OpenCV-trained models, Caffe) */
} keyer_color_order;
KEYER_OPTION_ENUM_CHECK(keyer_color_order);

/** Longest tensor name a description holds, with its terminating zero. */
#define KEYER_MODEL_DESC_NAME_MAX 256

/**
 * How to feed a segmentation model and read its mask: what the registry says for a shipped
 * model (keyer_model_desc_from_entry()), or what a user says for their own ONNX or TFLite file
 * with `--model-config FILE.yaml` (keyer_model_desc_read()) or options
 * (keyer_model_desc_options(): each field below is an option of the same name).
 *
 * The input tensor is value_c = (pixel_c / 255 * scale + offset - mean[c]) / std[c] for the
 * three colour channels in @ref color_order; a zero std[c] means 1 (and its mean is ignored).
 *
 * @code
 * keyer_model_desc d = keyer_model_desc_defaults();
 * if (keyer_model_desc_read("mynet.yaml", &d, &err) == KEYER_OK) ...
 * // mynet.yaml:
 * //   input: image          # the input tensor's name
 * //   size: [512, 288]      # width, height of dynamic dimensions
 * //   layout: nchw
 * //   range: unit           # pixels in [0,1] before mean/std
 * //   mean: [0.485, 0.456, 0.406]
 * //   std: [0.229, 0.224, 0.225]
 * //   output: mask
 * //   output_kind: logits
 * @endcode
 *
 * A plain struct: copy it freely; it holds no pointers.
 */
typedef struct keyer_model_desc {
    char input[KEYER_MODEL_DESC_NAME_MAX];  /**< the input tensor's name; "" (default): the
                                             *   model's only image input */
    int width, height;            /**< input size for dynamic dimensions; 0 (default): the
                                   *   model's own (required when the model's are dynamic) */
    keyer_tensor_layout layout;   /**< the file's input layout (default NCHW, ONNX's) */
    keyer_color_order color_order; /**< default RGB */
    float scale, offset;          /**< value = pixel / 255 * scale + offset before mean/std
                                   *   (default 1, 0: [0,1]); option "range" sets both */
    float mean[3], std[3];        /**< per-channel standardisation (default 0: none) */
    int letterbox;                /**< 1: keep the frame's aspect ratio (padding); 0 (default):
                                   *   stretch the frame over the input */
    char output[KEYER_MODEL_DESC_NAME_MAX]; /**< the mask output's name; "" (default): output
                                             *   @ref output_index */
    int output_index;             /**< the mask output when @ref output is "" (default 0) */
    keyer_mask_kind output_kind;  /**< default PROBABILITY */
    int person_class;             /**< CLASSES: the person's class (channel), 0..4095
                                   *   (default 15, the person of Pascal VOC's 21 classes) */
    void *reserved[4];            /**< zero */
} keyer_model_desc;

/** The defaults documented in ::keyer_model_desc. */
keyer_model_desc keyer_model_desc_defaults(void);

/**
 * Option table over ::keyer_model_desc: input, size (WxH, or width and height), width, height,
 * layout (nchw, nhwc), color_order (rgb, bgr), range (unit [0,1], signed [-1,1], byte
 * [0,255]: sets scale and offset), scale, offset, mean and std (one value, or three separated
 * by commas, or by slashes inside an option list), fit (stretch, letterbox), output,
 * output_index, output_kind (probability, logits, alpha, classes), person_class. Help text
 * comes from it (keyer models, --help).
 */
const keyer_option *keyer_model_desc_options(void);

/**
 * Checks a description: every field in its range, std not negative, person_class only read by
 * CLASSES. Errors: INVALID_ARGUMENT naming the field and its value.
 */
keyer_status keyer_model_desc_validate(const keyer_model_desc *desc, keyer_error *err);

/**
 * Reads a model description from the YAML file @p path into @p desc (start it with
 * keyer_model_desc_defaults(); the file's keys set the fields of the same name, lists give
 * mean/std/size), then validates it. Errors: IO (cannot open), BAD_DATA (not YAML),
 * INVALID_ARGUMENT ("FILE:LINE: ..." for an unknown key or a bad value), UNSUPPORTED (built
 * without libyaml). On error @p desc may be partly set.
 */
keyer_status keyer_model_desc_read(const char *path, keyer_model_desc *desc, keyer_error *err);

/** The description a registry entry stands for (input size, normalisation, mask output). */
keyer_model_desc keyer_model_desc_from_entry(const keyer_model_entry *entry);

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
 * models_dir/file; anything containing '/' or ending in ".tflite" or ".onnx" is taken as a
 * path.
 * Errors: INVALID_ARGUMENT (unknown name: the message lists the known names; buffer too small),
 * IO (the file does not exist: the message says to run scripts/setup.sh).
 */
keyer_status keyer_registry_resolve(const char *name_or_path, char *buf, size_t size,
                                    keyer_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_REGISTRY_H */
