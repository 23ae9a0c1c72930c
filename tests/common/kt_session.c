/* Session set-ups and drivers of the landmark-stage tests: see kt_session.h. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keyer/registry.h"
#include "kt_session.h"

#define MAX_PUSHED 16

keyer_session_params kt_session_params(int device, int precision, int batch, int keying,
                                       keyer_logger *lg)
{
    *lg = keyer_logger_default();
    lg->level = KEYER_LOG_ERROR;
    keyer_session_params sp = keyer_session_params_defaults();
    sp.device = device;
    sp.precision = precision;
    sp.batch = batch;
    sp.logger = lg;
    sp.passthrough = !keying;
    sp.composite.mode = KEYER_COMPOSITE_BLUR;
    return sp;
}

keyer_session *kt_session_create(const keyer_session_params *sp)
{
    keyer_session *s = NULL;
    keyer_error err = {0};
    if (keyer_session_create(sp, &s, &err))
        fail_msg("session: %s", err.message);
    return s;
}

void kt_session_refused(const keyer_session_params *sp, keyer_session **s, const char *word)
{
    keyer_error err = {0};
    assert_int_equal(keyer_session_create(sp, s, &err), KEYER_STATUS_INVALID_ARGUMENT);
    if (word)
        assert_non_null(strstr(err.message, word));
}

keyer_status kt_session_option(keyer_session_params *p, const char *name, const char *value)
{
    keyer_error err = {0};
    return keyer_option_set(keyer_session_options(), p, name, value, &err);
}

void kt_session_run_files(keyer_session *s, const char *const *inputs, int n)
{
    keyer_error err = {0};
    for (int i = 0; i < n; i++) {
        keyer_file_stream_params fp = keyer_file_stream_params_defaults();
        fp.input = inputs[i];
        fp.output = NULL;
        if (keyer_session_add_file(s, &fp, NULL, &err))
            fail_msg("add %s: %s", inputs[i], err.message);
    }
    if (keyer_session_run(s, &err))
        fail_msg("run: %s", err.message);
}

void kt_session_push_round_robin(keyer_session *s, keyer_frame *const *frames, int n,
                                 int nframes, const char *dir, const char *prefix)
{
    keyer_error err = {0};
    int ids[MAX_PUSHED];
    char out[MAX_PUSHED][4096];
    if (n < 1 || n > MAX_PUSHED)
        fail_msg("%d pushed streams (1..%d)", n, MAX_PUSHED);
    for (int i = 0; i < n; i++) {
        const keyer_frame *f0 = frames[i * nframes];
        keyer_stream_params stp = keyer_stream_params_defaults();
        stp.width = f0->width;
        stp.height = f0->height;
        stp.format = f0->format;
        stp.frame_rate = (keyer_rational){25, 1};
        snprintf(out[i], sizeof(out[i]), "%s/%s%d.mp4", dir, prefix, i);
        stp.output = out[i];
        stp.writer.preset = "ultrafast";
        if (keyer_session_open_stream(s, &stp, &ids[i], &err))
            fail_msg("open stream %d: %s", i, err.message);
    }
    /* round robin over the streams, as cameras deliver */
    for (int k = 0; k < nframes; k++)
        for (int i = 0; i < n; i++) {
            keyer_status st;
            while ((st = keyer_session_send_frame(s, ids[i], frames[i * nframes + k], &err)) ==
                   KEYER_STATUS_AGAIN) {
                struct timespec ts = {0, 2000000};
                nanosleep(&ts, NULL);
            }
            if (st)
                fail_msg("send stream %d frame %d: %s", i, k, err.message);
        }
    for (int i = 0; i < n; i++)
        if (keyer_session_close_stream(s, ids[i], &err))
            fail_msg("close stream %d: %s", i, err.message);
}

void kt_session_feed(keyer_session *s, const char *const *inputs, keyer_frame *const *frames,
                     int n, int nframes, const char *dir, const char *prefix)
{
    if (inputs)
        kt_session_run_files(s, inputs, n);
    else
        kt_session_push_round_robin(s, frames, n, nframes, dir, prefix);
}

void kt_session_finish(keyer_session **s, int device, int frames, int stages, const char *stage,
                       keyer_session_report *rep)
{
    keyer_session_get_report(*s, rep);
    keyer_session_destroy(s);
    assert_int_equal(rep->frames_written, frames);
    assert_int_equal(rep->stage_count, stages);
    assert_string_equal(rep->stages[stages - 1].name, stage);
    assert_int_equal(rep->stages[stages - 1].frames, frames);
    assert_int_equal(rep->frames_lost, 0);
    /* on CUDA, or on the CPU after the failure KEYER_FAIL_CUDA_AT_FRAME forces */
    if (device == KEYER_DEVICE_CUDA)
        assert_non_null(strstr(rep->device, getenv("KEYER_FAIL_CUDA_AT_FRAME") ? "GPU failure"
                                                                                : "cuda"));
}

void kt_session_check_calls(int calls, int out_of_order, int frames)
{
    assert_int_equal(out_of_order, 0);
    assert_int_equal(calls, frames);
}

void kt_points_distance(const float *a, const float *b, int n, int stride, double side,
                        double *worst, double *rel)
{
    side = side > 1 ? side : 1;
    for (int k = 0; k < n; k++) {
        double dx = (double)a[k * stride] - b[k * stride];
        double dy = (double)a[k * stride + 1] - b[k * stride + 1];
        double d = sqrt(dx * dx + dy * dy);
        if (isnan(d))
            d = INFINITY;
        *worst = d > *worst ? d : *worst;
        *rel = d / side > *rel ? d / side : *rel;
    }
}

void kt_cpu_model(const char *name, keyer_model **m, keyer_runtime **rt)
{
    keyer_error err = {0};
    char path[4096];
    if (keyer_registry_resolve(name, path, sizeof(path), &err) ||
        keyer_model_load_file(path, m, &err))
        fail_msg("%s: %s", name, err.message);
    keyer_runtime_params rp = keyer_runtime_params_defaults();
    rp.threads = 4;
    if (keyer_runtime_create(*m, &rp, rt, &err))
        fail_msg("%s: %s", name, err.message);
}
