/*
 * keyer devices: the GPUs keyer can use. The CUDA driver API is loaded at run time
 * (dlopen("libcuda.so.1")), so this works in CPU-only builds and on machines without a
 * driver. NVDEC and NVENC are checked by doing the work through keyer's public I/O API: a
 * tiny generated H.264 clip is decoded with NVDEC, and an NVENC encoder is opened (a GPU
 * without NVENC engines, such as the H100, fails that and is reported as such). In CUDA builds
 * each registry model found in the models directory is set up on each device (batches 1, 8 and
 * 16, the precision AUTO gives it) and its schedule printed (keyer_runtime_schedule): what the
 * runtime chose from the device's compute capability, or from the older class that
 * KEYER_CUDA_EMULATE_CC emulates.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "keyer/image.h"
#include "keyer/io.h"
#include "keyer/keyer.h"
#include "keyer/nn.h"
#include "keyer/registry.h"

/* The few driver API entry points used, with the driver's ABI (cuda.h). */
typedef int CUresult_;
typedef int CUdevice_;
typedef struct driver {
    void *lib;
    CUresult_ (*init)(unsigned int);
    CUresult_ (*driver_version)(int *);
    CUresult_ (*count)(int *);
    CUresult_ (*get)(CUdevice_ *, int);
    CUresult_ (*name)(char *, int, CUdevice_);
    CUresult_ (*total_mem)(size_t *, CUdevice_);
    CUresult_ (*attribute)(int *, int, CUdevice_);
    CUresult_ (*error_string)(CUresult_, const char **);
} driver;

#define CU_ATTR_MULTIPROCESSOR_COUNT 16
#define CU_ATTR_CC_MAJOR 75
#define CU_ATTR_CC_MINOR 76
#define CU_ATTR_SMEM_PER_SM 81
#define CU_ATTR_SMEM_PER_BLOCK_OPTIN 97
#define CU_ATTR_CLUSTER_LAUNCH 120

static void *sym(void *lib, const char *name)
{
    return dlsym(lib, name);
}

/* dlsym gives void *; a union turns it into a function pointer without a cast warning. */
#define LOAD(field, name)                                                                        \
    do {                                                                                         \
        union {                                                                                  \
            void *p;                                                                             \
            __typeof__(d->field) f;                                                              \
        } u_;                                                                                    \
        u_.p = sym(d->lib, name);                                                                \
        d->field = u_.f;                                                                         \
        if (!u_.p)                                                                               \
            return -1;                                                                           \
    } while (0)

static int load_driver(driver *d)
{
    memset(d, 0, sizeof(*d));
    d->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!d->lib)
        return -1;
    LOAD(init, "cuInit");
    LOAD(driver_version, "cuDriverGetVersion");
    LOAD(count, "cuDeviceGetCount");
    LOAD(get, "cuDeviceGet");
    LOAD(name, "cuDeviceGetName");
    LOAD(total_mem, "cuDeviceTotalMem_v2");
    LOAD(attribute, "cuDeviceGetAttribute");
    LOAD(error_string, "cuGetErrorString");
    return 0;
}

static keyer_logger quiet_logger(void)
{
    keyer_logger lg = keyer_logger_default();
    lg.level = KEYER_LOG_QUIET;
    return lg;
}

/* NVDEC: decode a generated clip on device @p ordinal; 1 when NVDEC decoded it. */
static int probe_nvdec(const char *clip, int ordinal, char *why, size_t n)
{
    keyer_logger lg = quiet_logger();
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CUDA;
    rp.cuda_device = ordinal;
    rp.logger = &lg;
    keyer_reader *r = NULL;
    keyer_error err = {0};
    if (keyer_reader_open(clip, &rp, &r, &err)) {
        snprintf(why, n, "%s", err.message);
        return 0;
    }
    int hw = keyer_reader_info(r)->hw_decode;
    if (!hw)
        snprintf(why, n, "the decoder fell back to the CPU");
    keyer_reader_destroy(&r);
    return hw;
}

/* NVENC: open @p codec on a scratch file; 1 when the NVENC encoder itself stayed in use. */
static int probe_nvenc(const char *dir, const char *codec, char *why, size_t n)
{
    keyer_logger lg = quiet_logger();
    char path[4096];
    snprintf(path, sizeof(path), "%s/nvenc.mp4", dir);
    keyer_writer_params wp = keyer_writer_params_defaults();
    wp.width = 256;
    wp.height = 144;
    wp.frame_rate = (keyer_rational){30, 1};
    wp.codec = codec;
    wp.logger = &lg;
    keyer_writer *w = NULL;
    keyer_error err = {0};
    if (keyer_writer_open(path, &wp, &w, &err)) {
        snprintf(why, n, "%s", err.message);
        return 0;
    }
    int ok = !strcmp(keyer_writer_codec(w), codec);
    if (!ok)
        snprintf(why, n, "cannot open an NVENC session");
    keyer_writer_destroy(&w);
    unlink(path);
    return ok;
}

/* Each registry model present in the models directory, set up on device @p ordinal at batches
 * 1, 8 and 16 in the precision AUTO gives it on CUDA: its precision and schedules. */
static void print_schedules(int ordinal)
{
    static const int batches[] = {1, 8, 16};
    keyer_logger lg = quiet_logger();
    int count = 0;
    const keyer_model_entry *e = keyer_registry_list(&count);
    printf("        models (precision, schedule at batch 1 / 8 / 16):\n");
    for (int m = 0; m < count; m++) {
        char path[4096];
        keyer_error err = {0};
        keyer_model *model = NULL;
        if (keyer_registry_resolve(e[m].name, path, sizeof(path), &err) ||
            keyer_model_load_file(path, &model, &err))
            continue; /* not fetched */
        keyer_runtime_params rp = keyer_runtime_params_defaults();
        rp.backend = KEYER_BACKEND_CUDA;
        rp.device = ordinal;
        rp.logger = &lg;
        rp.precision = keyer_registry_precision(&e[m], KEYER_PRECISION_AUTO, 1);
        printf("          %-18s %s ", e[m].name, keyer_precision_name(rp.precision));
        for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); b++) {
            rp.batch = batches[b];
            keyer_runtime *rt = NULL;
            if (keyer_runtime_create(model, &rp, &rt, &err))
                printf("%s(batch %d: %s)", b ? " / " : " ", batches[b], err.message);
            else
                printf("%s%s", b ? " / " : " ", keyer_runtime_schedule(rt));
            keyer_runtime_destroy(&rt);
        }
        printf("\n");
        keyer_model_destroy(&model);
    }
}

typedef struct devices_args {
    int no_probe;
} devices_args;

static const keyer_option devices_options[] = {
    {"no_probe", "list the GPUs without checking NVDEC and NVENC", offsetof(devices_args, no_probe),
     KEYER_OPTION_BOOL, 0, 0, 1, NULL, NULL, NULL, NULL, 0, KEYER_OPTION_FLAG_VALUE_OPTIONAL},
    KC_OPTION_HELP,
    KEYER_OPTION_END,
};

int keyer_cmd_devices(int argc, char **argv)
{
    devices_args args = {0};
    kc_table table = {devices_options, &args};
    kc_args a = {
        .prog = "keyer devices",
        .tables = &table,
        .ntables = 1,
        .help_tables = 1,
        .usage = "usage: keyer devices [--no-probe]\n"
                 "Lists the CUDA GPUs (through the driver, loaded at run time), their memory and\n"
                 "whether keyer can decode with NVDEC and encode with NVENC on them (checked by\n"
                 "decoding and encoding a few generated frames; --no-probe skips that), and in\n"
                 "CUDA builds the precision and schedule each model gets on them (per-node,\n"
                 "persistent, persistent+cluster: chosen from the compute capability, or from\n"
                 "the older class KEYER_CUDA_EMULATE_CC=7.5|8.0|8.6|8.7|8.9 emulates).\n\n",
    };
    int rc = kc_args_parse(&a, argc, argv);
    if (rc)
        return rc == 1 ? 0 : rc;
    int probe = !args.no_probe;
    printf("keyer %s, CUDA backends %s\n", keyer_version(),
           keyer_built_with_cuda() ? "built" : "not built (CPU only)");
    driver d;
    if (load_driver(&d)) {
        printf("no CUDA device (the NVIDIA driver, libcuda.so.1, is not installed)\n");
        if (d.lib)
            dlclose(d.lib);
        return 0;
    }
    rc = 0;
    int count = 0, version = 0;
    CUresult_ e = d.init(0);
    if (e == 0)
        e = d.count(&count);
    if (e != 0 || count == 0) {
        const char *msg = NULL;
        if (e != 0)
            d.error_string(e, &msg);
        printf("no CUDA device%s%s%s\n", msg ? " (" : "", msg ? msg : "", msg ? ")" : "");
        dlclose(d.lib);
        return 0;
    }
    d.driver_version(&version);
    printf("CUDA driver %d.%d, %d device%s\n", version / 1000, version % 1000 / 10, count,
           count == 1 ? "" : "s");
    /* one small H.264 clip serves every NVDEC probe */
    char dir[] = "/tmp/keyer-devices-XXXXXX";
    char clip[4096] = "";
    if (probe && mkdtemp(dir)) {
        snprintf(clip, sizeof(clip), "%s/probe.mp4", dir);
        keyer_sample_params sp = keyer_sample_params_defaults();
        sp.width = 256;
        sp.height = 144;
        sp.frames = 4;
        sp.audio_codec = NULL;
        /* the sample generator pans over a picture: a generated gradient */
        char picture[4096];
        snprintf(picture, sizeof(picture), "%s/probe.png", dir);
        keyer_error err = {0};
        keyer_frame *img = NULL;
        int ok = keyer_frame_create(&img, &err) == KEYER_OK &&
                 keyer_frame_alloc(img, KEYER_PIXEL_FORMAT_RGB24, 320, 180, NULL, &err) == KEYER_OK;
        for (int y = 0; ok && y < img->height; y++)
            for (int x = 0; x < img->width; x++) {
                uint8_t *px = img->data[0] + y * img->stride[0] + 3 * x;
                px[0] = (uint8_t)(x * 255 / img->width);
                px[1] = (uint8_t)(y * 255 / img->height);
                px[2] = (uint8_t)((x + y) & 255);
            }
        ok = ok && keyer_image_write(picture, img, &err) == KEYER_OK;
        keyer_frame_destroy(&img);
        if (!ok || keyer_video_write_sample(clip, picture, &sp, &err))
            clip[0] = 0;
        unlink(picture);
    } else {
        dir[0] = 0;
    }
    for (int i = 0; i < count; i++) {
        CUdevice_ dev;
        char name[256] = "?";
        size_t mem = 0;
        int sms = 0, major = 0, minor = 0, smem_sm = 0, smem_block = 0, clusters = 0;
        if (d.get(&dev, i) != 0) {
            printf("cuda:%d  (cannot open)\n", i);
            rc = 1;
            continue;
        }
        d.name(name, sizeof(name), dev);
        d.total_mem(&mem, dev);
        d.attribute(&sms, CU_ATTR_MULTIPROCESSOR_COUNT, dev);
        d.attribute(&major, CU_ATTR_CC_MAJOR, dev);
        d.attribute(&minor, CU_ATTR_CC_MINOR, dev);
        d.attribute(&smem_sm, CU_ATTR_SMEM_PER_SM, dev);
        d.attribute(&smem_block, CU_ATTR_SMEM_PER_BLOCK_OPTIN, dev);
        d.attribute(&clusters, CU_ATTR_CLUSTER_LAUNCH, dev);
        printf("cuda:%d  %s, compute %d.%d, %d SMs, %.1f GiB\n", i, name, major, minor, sms,
               (double)mem / (1024.0 * 1024.0 * 1024.0));
        printf("        shared memory %d KB per block (opt-in), %d KB per SM; thread-block "
               "clusters %s\n",
               smem_block / 1024, smem_sm / 1024, clusters ? "yes" : "no");
        const char *emu = getenv("KEYER_CUDA_EMULATE_CC");
        if (emu && emu[0])
            printf("        emulating compute %s (KEYER_CUDA_EMULATE_CC): the schedules below are "
                   "that class's\n", emu);
        if (!probe)
            continue;
        if (keyer_built_with_cuda())
            print_schedules(i);
        char why[600] = "";
        if (!keyer_built_with_cuda())
            printf("        NVDEC: not used (keyer built without CUDA)\n");
        else if (!clip[0])
            printf("        NVDEC: not checked (no H.264 encoder to make a test clip)\n");
        else if (probe_nvdec(clip, i, why, sizeof(why)))
            printf("        NVDEC: h264 yes\n");
        else
            printf("        NVDEC: h264 no (%s)\n", why);
        for (int k = 0; k < 2; k++) {
            const char *codec = k ? "hevc_nvenc" : "h264_nvenc";
            why[0] = 0;
            int ok = probe_nvenc(dir[0] ? dir : "/tmp", codec, why, sizeof(why));
            printf("        NVENC: %s %s%s%s%s\n", codec, ok ? "yes" : "no", ok ? "" : " (",
                   ok ? "" : why, ok ? "" : ")");
        }
    }
    if (count > 1 && keyer_built_with_cuda())
        printf("several GPUs in one session: --device cuda:all, or a list such as cuda:0,%d "
               "(streams placed by load)\n", count - 1);
    if (clip[0])
        unlink(clip);
    if (dir[0])
        rmdir(dir);
    dlclose(d.lib);
    return rc;
}
