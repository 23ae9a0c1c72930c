/* Session set-ups and drivers of the landmark-stage tests: see kt_session.h. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <time.h>

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
