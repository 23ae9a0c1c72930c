/*
 * Embedding keyer in another program: frames from the program's own memory go into a keying
 * session and come back with the background replaced, in order, one reference each.
 *
 *   embed PHOTO [OUT.png]
 *
 * The "camera" here makes 30 frames by panning over PHOTO (any JPEG or PNG); a real program
 * would hand over its decoder's or camera's frames the same way (host or CUDA memory). The
 * last frame is written to OUT.png (default embed-out.png). Uses only include/keyer/.
 */
#include <stdio.h>
#include <string.h>

#include "keyer/frame.h"
#include "keyer/image.h"
#include "keyer/pipeline.h"

#define W 640
#define H 360
#define FRAMES 30

/* Frame i of the pretend camera: a 640x360 window sliding over the photo (RGB24). */
static keyer_status camera_frame(const keyer_frame *photo, int i, keyer_frame *f, keyer_error *err)
{
    keyer_status st = keyer_frame_alloc(f, KEYER_PIXEL_FORMAT_RGB24, W, H, NULL, err);
    if (st)
        return st;
    int span = photo->width > W ? photo->width - W : 0;
    int x0 = span * i / FRAMES;
    for (int y = 0; y < H; y++) {
        const uint8_t *src = photo->data[0] + (y % photo->height) * photo->stride[0];
        uint8_t *dst = f->data[0] + y * f->stride[0];
        for (int x = 0; x < W; x++)
            memcpy(dst + 3 * x, src + 3 * ((x0 + x) % photo->width), 3);
    }
    f->pts = i;
    f->time_base = (keyer_rational){1, 30};
    return KEYER_OK;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PHOTO [OUT.png]\n", argv[0]);
        return 2;
    }
    const char *out_path = argc > 2 ? argv[2] : "embed-out.png";
    keyer_error err = {0};
    keyer_frame *photo = NULL, *in = NULL, *out = NULL;
    keyer_session *s = NULL;
    int rc = 1;

    /* 1. a session: replace the background by a colour, model chosen by aspect ratio */
    keyer_session_params sp = keyer_session_params_defaults();
    sp.composite.mode = KEYER_COMPOSITE_COLOR;
    sp.composite.color = 0x3060c0;
    sp.mode = KEYER_PIPELINE_LATENCY; /* one frame in, one frame out, as soon as possible */
    if (keyer_session_create(&sp, &s, &err) || keyer_frame_create(&photo, &err) ||
        keyer_frame_create(&in, &err) || keyer_frame_create(&out, &err) ||
        keyer_image_read(argv[1], KEYER_PIXEL_FORMAT_RGB24, photo, &err))
        goto fail;

    /* 2. a stream of 640x360 RGB24 frames in host memory */
    keyer_stream_params stp = keyer_stream_params_defaults();
    stp.width = W;
    stp.height = H;
    stp.format = KEYER_PIXEL_FORMAT_RGB24;
    int id = -1;
    if (keyer_session_open_stream(s, &stp, &id, &err))
        goto fail;

    /* 3. send and receive: AGAIN from send means "receive first" */
    int sent = 0, received = 0;
    while (received < FRAMES) {
        if (sent < FRAMES) {
            if (camera_frame(photo, sent, in, &err))
                goto fail;
            keyer_status st = keyer_session_send_frame(s, id, in, &err);
            if (st == KEYER_OK && ++sent == FRAMES && keyer_session_close_stream(s, id, &err))
                goto fail;
            if (st != KEYER_OK && st != KEYER_STATUS_AGAIN)
                goto fail;
        }
        /* wait for a frame only when nothing more can be sent */
        keyer_status st = keyer_session_receive_frame(s, id, out, sent < FRAMES ? 0 : -1, &err);
        if (st == KEYER_STATUS_AGAIN)
            continue;
        if (st)
            goto fail;
        received++;
        if (received == FRAMES && keyer_image_write(out_path, out, &err))
            goto fail;
        keyer_frame_unref(out); /* hands the frame's memory back to the session */
    }

    keyer_session_report rep;
    keyer_session_get_report(s, &rep);
    printf("%d frames keyed on %s with %s: %.1f fps, latency p50 %.1f ms, p99 %.1f ms; wrote %s\n",
           received, rep.device, rep.model, rep.fps, rep.latency.p50, rep.latency.p99, out_path);
    rc = 0;
fail:
    if (rc)
        fprintf(stderr, "embed: %s\n", err.message);
    keyer_session_destroy(&s);
    keyer_frame_destroy(&photo);
    keyer_frame_destroy(&in);
    keyer_frame_destroy(&out);
    return rc;
}
