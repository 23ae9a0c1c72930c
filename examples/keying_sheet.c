/*
 * Quality sheets of the keying chain: for a photo, or for frames spread over a clip, a row of
 * five panels side by side: the frame, the model's raw mask, the refined matte, the background
 * blurred (sigma 12) and the background replaced by a colour (#3060C0).
 *
 *   keying_sheet [-o OUT.png] [--rows N] [--model NAME] INPUT
 *
 * INPUT is anything keyer_reader_open() reads: a photo gives one row; a clip gives N rows
 * (default 4) for frames spread evenly from the first to the last. Every frame of a clip is
 * keyed in order, so the refined matte of a row is the temporally smoothed one (refinement
 * defaults: ADAPTIVE smoothing), as `keyer INPUT -o OUTPUT` would make it. The chain runs on
 * the CPU backend with the model's input stretched over the frame; the raw mask is the model
 * output (sigmoid applied for logit models) scaled bilinearly to the frame's size. Panels are
 * at the frame's own size, without gaps; the sheet is written as RGB24 (PNG, or JPEG by the
 * extension). Uses only include/keyer/. docs/images/sheet_*.png are made with:
 *
 *   build/examples/keying_sheet -o docs/images/sheet_grace_hopper.png tests/data/grace_hopper.jpg
 *   build/examples/keying_sheet -o docs/images/sheet_messi5.png tests/data/messi5.jpg
 *   build/examples/keying_sheet -o docs/images/sheet_clip.png tests/data/sample_hevc.mp4
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/effects.h"
#include "keyer/image.h"
#include "keyer/io.h"
#include "keyer/keyer.h"
#include "keyer/keying.h"

#define PANELS 5
#define REPLACE_COLOR 0x3060C0u

/* The keying chain for one model, frame by frame (keyer/keying.h), with background blur;
 * a second compositing for the replacement panel. */
typedef struct chain {
    keyer_keying *keying;
    keyer_composite *color;
    keyer_frame *alpha, *result;
} chain;

static keyer_status chain_create(chain *c, const char *model_name, keyer_error *err)
{
    const keyer_model_entry *entry = keyer_registry_find(model_name);
    if (!entry || (entry->mask_output < 0 && entry->task != KEYER_TASK_SEGMENTATION))
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "'%s' is not a segmentation model", model_name);
    keyer_keying_params kp = keyer_keying_params_defaults(); /* ADAPTIVE smoothing; BLUR 12 */
    kp.model = model_name;
    kp.backend = KEYER_BACKEND_CPU;
    kp.fit = KEYER_KEYING_FIT_STRETCH;
    keyer_composite_params cp = keyer_composite_params_defaults();
    cp.mode = KEYER_COMPOSITE_COLOR;
    cp.color = REPLACE_COLOR;
    keyer_status st;
    if ((st = keyer_keying_create(&kp, &c->keying, err)) ||
        (st = keyer_composite_create(&cp, &c->color, err)) ||
        (st = keyer_frame_create(&c->alpha, err)) || (st = keyer_frame_create(&c->result, err)))
        return st;
    return KEYER_OK;
}

static void chain_destroy(chain *c)
{
    keyer_frame_destroy(&c->alpha);
    keyer_frame_destroy(&c->result);
    keyer_composite_destroy(&c->color);
    keyer_keying_destroy(&c->keying);
}

/* Keys @p frame (RGB24): the matte into c->alpha and, when @p blurred, the blurred background
 * into c->result; the raw mask is keyer_keying_mask(). */
static keyer_status chain_key(chain *c, const keyer_frame *frame, int blurred, keyer_error *err)
{
    if (c->alpha->width != frame->width || c->alpha->height != frame->height) {
        keyer_frame_unref(c->alpha); /* empty: allocated by the next call */
        keyer_frame_unref(c->result);
    }
    return keyer_keying_process(c->keying, frame, blurred ? c->result : NULL, c->alpha, err);
}

/* Copies the RGB24 picture @p src into the sheet at (x, y). */
static void put_rgb(keyer_frame *sheet, int x, int y, const keyer_frame *src)
{
    for (int j = 0; j < src->height; j++)
        memcpy(sheet->data[0] + (y + j) * sheet->stride[0] + 3 * x,
               src->data[0] + j * src->stride[0], 3 * (size_t)src->width);
}

/* Writes a w x h grey panel at (x, y): pixel (i, j) is value(src, i, j, w, h), in [0,1]. */
static void put_gray(keyer_frame *sheet, int x, int y, int w, int h,
                     float (*value)(const keyer_frame *, int, int, int, int),
                     const keyer_frame *src)
{
    for (int j = 0; j < h; j++) {
        uint8_t *d = sheet->data[0] + (y + j) * sheet->stride[0] + 3 * x;
        for (int i = 0; i < w; i++, d += 3) {
            float v = value(src, i, j, w, h);
            d[0] = d[1] = d[2] = (uint8_t)lrintf(255.0f * (v < 0 ? 0 : v > 1 ? 1 : v));
        }
    }
}

/* The GRAYF32 mask at panel pixel (i, j) of a w x h panel: bilinear, pixel centres aligned. */
static float mask_at(const keyer_frame *m, int i, int j, int w, int h)
{
    float fx = ((float)i + 0.5f) * (float)m->width / (float)w - 0.5f;
    float fy = ((float)j + 0.5f) * (float)m->height / (float)h - 0.5f;
    fx = fx < 0 ? 0 : fx > (float)(m->width - 1) ? (float)(m->width - 1) : fx;
    fy = fy < 0 ? 0 : fy > (float)(m->height - 1) ? (float)(m->height - 1) : fy;
    int x0 = (int)fx, y0 = (int)fy;
    int x1 = x0 + 1 < m->width ? x0 + 1 : x0, y1 = y0 + 1 < m->height ? y0 + 1 : y0;
    float ax = fx - (float)x0, ay = fy - (float)y0;
    const float *r0 = (const float *)(m->data[0] + y0 * m->stride[0]);
    const float *r1 = (const float *)(m->data[0] + y1 * m->stride[0]);
    float top = r0[x0] + (r0[x1] - r0[x0]) * ax, bottom = r1[x0] + (r1[x1] - r1[x0]) * ax;
    return top + (bottom - top) * ay;
}

/* The GRAY8 matte at panel pixel (i, j) (same size as the panel). */
static float matte_at(const keyer_frame *a, int i, int j, int w, int h)
{
    (void)w;
    (void)h;
    return (float)a->data[0][j * a->stride[0] + i] / 255.0f;
}

/* Draws row @p r of the sheet from the frame just keyed with its blurred background. */
static keyer_status draw_row(chain *c, const keyer_frame *frame, keyer_frame *sheet, int r,
                             keyer_error *err)
{
    int w = frame->width, h = frame->height, y = r * h;
    keyer_status st;
    put_rgb(sheet, 0, y, frame);
    put_gray(sheet, w, y, w, h, mask_at, keyer_keying_mask(c->keying));
    put_gray(sheet, 2 * w, y, w, h, matte_at, c->alpha);
    put_rgb(sheet, 3 * w, y, c->result);
    if ((st = keyer_composite_run(c->color, frame, c->alpha, c->result, err)))
        return st;
    put_rgb(sheet, 4 * w, y, c->result);
    return KEYER_OK;
}

static keyer_status open_input(const char *path, keyer_reader **r, keyer_error *err)
{
    keyer_reader_params rp = keyer_reader_params_defaults();
    rp.device = KEYER_DECODE_DEVICE_CPU;
    rp.format = KEYER_PIXEL_FORMAT_RGB24;
    rp.keep_streams = 0;
    return keyer_reader_open(path, &rp, r, err);
}

int main(int argc, char **argv)
{
    const char *out_path = "sheet.png", *input = NULL, *model_name = "selfie";
    int rows = 4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc)
            out_path = argv[++i];
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc)
            rows = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model_name = argv[++i];
        else if (argv[i][0] != '-' && !input)
            input = argv[i];
        else {
            input = NULL; /* unknown option or a second input: usage */
            break;
        }
    }
    if (!input || rows < 1 || rows > 64) {
        fprintf(stderr, "usage: %s [-o OUT.png] [--rows N (1..64)] [--model NAME] INPUT\n",
                argv[0]);
        return 2;
    }
    keyer_error err = {0};
    chain c = {0};
    keyer_reader *r = NULL;
    keyer_frame *f = NULL, *sheet = NULL;
    keyer_status st;
    int rc = 1, n = 0;

    /* 1. count the frames, so the rows can be spread over the whole input */
    if (open_input(input, &r, &err) || keyer_frame_create(&f, &err))
        goto fail;
    while ((st = keyer_reader_read(r, f, &err)) == KEYER_OK)
        n++;
    if (st != KEYER_STATUS_END)
        goto fail;
    keyer_reader_destroy(&r);
    rows = n < rows ? n : rows;

    /* 2. key every frame in order; rows k = 0..rows-1 show frame k * (n - 1) / (rows - 1) */
    if (chain_create(&c, model_name, &err) || open_input(input, &r, &err))
        goto fail;
    const keyer_video_info *vi = keyer_reader_info(r);
    if (keyer_frame_create(&sheet, &err) ||
        keyer_frame_alloc(sheet, KEYER_PIXEL_FORMAT_RGB24, PANELS * vi->width,
                          rows * vi->height, NULL, &err))
        goto fail;
    int row = 0;
    for (int i = 0; row < rows && (st = keyer_reader_read(r, f, &err)) == KEYER_OK; i++) {
        if (f->width != vi->width || f->height != vi->height) {
            keyer_error_set(&err, KEYER_STATUS_UNSUPPORTED, "%s: frame %d is %dx%d, not %dx%d",
                            input, i, f->width, f->height, vi->width, vi->height);
            goto fail;
        }
        int want = rows > 1 ? (int)((long)row * (n - 1) / (rows - 1)) : 0;
        if (chain_key(&c, f, i == want, &err))
            goto fail;
        if (i == want) {
            if (draw_row(&c, f, sheet, row, &err))
                goto fail;
            printf("row %d: frame %d of %d\n", row, i, n);
            row++;
        }
    }
    if (row < rows) {
        keyer_error_set(&err, KEYER_STATUS_BAD_DATA, "%s: fewer frames (%d rows of %d) when "
                        "read again", input, row, rows);
        goto fail;
    }
    if (keyer_image_write(out_path, sheet, &err))
        goto fail;
    printf("wrote %s (%dx%d: %d row%s of frame, raw mask, refined matte, blur, replacement)\n",
           out_path, sheet->width, sheet->height, rows, rows > 1 ? "s" : "");
    rc = 0;
fail:
    if (rc)
        fprintf(stderr, "keying_sheet: %s\n", err.message);
    chain_destroy(&c);
    keyer_reader_destroy(&r);
    keyer_frame_destroy(&f);
    keyer_frame_destroy(&sheet);
    return rc;
}
