/* keyer_encoder_probe: whether NVENC opens on a device, asked once per encoder; and the choice
 * of encoder for a codec left to keyer. */
#include "io/encoder_probe.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/av.h"
#include "keyer/log.h"

kr_encoder_family kr_encoder_family_of(const char *requested, const char *container_default)
{
    const char *n = requested ? requested : container_default;
    if (!n)
        return KR_ENCODER_NAMED;
    if (!strcasecmp(n, "h264") || !strcasecmp(n, "avc"))
        return KR_ENCODER_H264;
    if (!strcasecmp(n, "hevc") || !strcasecmp(n, "h265"))
        return KR_ENCODER_HEVC;
    if (!requested && (!strcmp(n, "libx264") || !strcmp(n, "h264_nvenc")))
        return KR_ENCODER_H264;
    if (!requested && (!strcmp(n, "libx265") || !strcmp(n, "hevc_nvenc")))
        return KR_ENCODER_HEVC;
    return KR_ENCODER_NAMED;
}

const char *kr_encoder_nvenc_name(kr_encoder_family f)
{
    return f == KR_ENCODER_H264 ? "h264_nvenc" : f == KR_ENCODER_HEVC ? "hevc_nvenc" : NULL;
}

const char *kr_encoder_pick(kr_encoder_family f, int nvenc_opens)
{
    if (f == KR_ENCODER_NAMED)
        return NULL;
    if (nvenc_opens)
        return kr_encoder_nvenc_name(f);
    return f == KR_ENCODER_H264 ? "libx264" : "libx265";
}

/* ---- the probe ------------------------------------------------------------------------------ */

enum { SLOT_H264, SLOT_HEVC, SLOTS };

typedef struct probe_answer {
    int known;                /* probed */
    int opens;                /* NVENC opened */
    kr_nvenc_bframes bframes; /* the setup that opened */
    char why[KEYER_ERROR_MESSAGE_MAX];
} probe_answer;

struct keyer_encoder_probe {
    pthread_mutex_t lock;
    int device;
    int opens; /* test encoders opened */
    probe_answer answer[SLOTS];
};

keyer_status keyer_encoder_probe_create(int cuda_device, keyer_encoder_probe **out,
                                        keyer_error *err)
{
    if (!out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "encoder probe: no output");
    *out = NULL;
    if (cuda_device < 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "encoder probe: CUDA device %d is negative", cuda_device);
    keyer_encoder_probe *p = calloc(1, sizeof(*p));
    if (!p)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "encoder probe: out of memory");
    if (pthread_mutex_init(&p->lock, NULL)) {
        free(p);
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "encoder probe: cannot create a mutex");
    }
    p->device = cuda_device;
    *out = p;
    return KEYER_OK;
}

void keyer_encoder_probe_destroy(keyer_encoder_probe **probe)
{
    if (!probe || !*probe)
        return;
    pthread_mutex_destroy(&(*probe)->lock);
    free(*probe);
    *probe = NULL;
}

int keyer_encoder_probe_device(const keyer_encoder_probe *probe)
{
    return probe ? probe->device : -1;
}

static int slot_of(const char *codec)
{
    if (!codec)
        return -1;
    if (!strcmp(codec, "h264_nvenc"))
        return SLOT_H264;
    if (!strcmp(codec, "hevc_nvenc"))
        return SLOT_HEVC;
    return -1;
}

/* FFmpeg's nvenc refuses a B-frame feature the GPU lacks with a message naming B-frames. */
static int about_bframes(const char *message)
{
    return strstr(message, "B frame") || strstr(message, "B-frame") || strstr(message, "b_ref");
}

static void discard_log(void *opaque, keyer_log_level level, const char *message)
{
    (void)opaque;
    (void)level;
    (void)message;
}

/* Opens and closes a test encoder @p c with each B-frame setup in turn (the next one only
 * when FFmpeg refused the B-frames); fills @p a. Called with the probe's lock held. */
static void probe_encoder(keyer_encoder_probe *p, const AVCodec *c, probe_answer *a)
{
    keyer_logger quiet = {KEYER_LOG_QUIET, discard_log, NULL};
    keyer_writer_params wp; /* what kr_encoder_open reads: keyer's defaults, no user options */
    memset(&wp, 0, sizeof(wp));
    wp.quality = -1;
    for (int b = 0; b < KR_NVENC_BFRAMES_COUNT; b++) {
        kr_encoder_config cfg = {
            .path = "NVENC probe",
            .logger = &quiet,
            .width = 256,
            .height = 144,
            .time_base = {1, 30},
            .frame_tb = {1, 30},
            .matrix = KEYER_COLOR_MATRIX_BT601,
            .range = KEYER_COLOR_RANGE_LIMITED,
            .cuda_device = p->device,
            .nvenc_bframes = b,
        };
        kr_encoder e;
        memset(&e, 0, sizeof(e));
        keyer_error err = {0};
        char ffmpeg_says[KEYER_ERROR_MESSAGE_MAX];
        kr_av_log_capture(ffmpeg_says, sizeof(ffmpeg_says));
        keyer_status st = kr_encoder_open(&e, c, &cfg, &wp, 1, &err);
        kr_av_log_capture(NULL, 0);
        kr_encoder_free(&e);
        p->opens++;
        if (st == KEYER_OK) {
            a->opens = 1;
            a->bframes = (kr_nvenc_bframes)b;
            a->why[0] = '\0';
            return;
        }
        const char *m = err.message;
        size_t n = strlen(cfg.path);
        if (!strncmp(m, cfg.path, n) && m[n] == ':' && m[n + 1] == ' ')
            m += n + 2;
        snprintf(a->why, sizeof(a->why), "%s", ffmpeg_says[0] ? ffmpeg_says : m);
        if (!about_bframes(ffmpeg_says))
            return;
    }
}

int keyer_encoder_probe_nvenc(keyer_encoder_probe *probe, const char *codec, char *why,
                              size_t why_size)
{
    int slot = slot_of(codec);
    if (why && why_size)
        why[0] = '\0';
    if (!probe || slot < 0) {
        if (why && why_size)
            snprintf(why, why_size, "%s is not an NVENC encoder keyer probes",
                     codec ? codec : "(null)");
        return 0;
    }
    pthread_mutex_lock(&probe->lock);
    probe_answer *a = &probe->answer[slot];
    if (!a->known) {
        const AVCodec *c = avcodec_find_encoder_by_name(codec);
        if (c)
            probe_encoder(probe, c, a);
        else
            snprintf(a->why, sizeof(a->why), "libavcodec has no %s encoder", codec);
        a->known = 1;
    }
    int opens = a->opens;
    if (!opens && why && why_size)
        snprintf(why, why_size, "%s", a->why);
    pthread_mutex_unlock(&probe->lock);
    return opens;
}

kr_nvenc_bframes kr_encoder_probe_bframes(keyer_encoder_probe *probe, const char *codec)
{
    int slot = slot_of(codec);
    if (!probe || slot < 0)
        return KR_NVENC_BFRAMES_MIDDLE_REF;
    pthread_mutex_lock(&probe->lock);
    kr_nvenc_bframes b = probe->answer[slot].known && probe->answer[slot].opens
                             ? probe->answer[slot].bframes
                             : KR_NVENC_BFRAMES_MIDDLE_REF;
    pthread_mutex_unlock(&probe->lock);
    return b;
}

int kr_encoder_probe_opens(keyer_encoder_probe *probe)
{
    if (!probe)
        return 0;
    pthread_mutex_lock(&probe->lock);
    int n = probe->opens;
    pthread_mutex_unlock(&probe->lock);
    return n;
}
