/*
 * A contact sheet of keyer's analytics overlays on still photos, drawn by the CPU overlay
 * renderer. Uses only include/keyer/.
 *
 *   contact_sheet [-o OUT.png] [--height H] PHOTO...
 *
 * One row per photo (default height 300 pixels):
 *  - the photo with the detected faces (rounded boxes, the 6 keypoints, tracked "id N"
 *    labels), the body pose (skeleton and keypoints) and the k-nearest-neighbour graph (k = 3)
 *    of the face centres and visible body keypoints, drawn as curves;
 *  - a close-up of the first face with the 468 face-mesh points and the mesh contours.
 * Each photo is analysed as a short still clip (a few frames of the same picture) so that the
 * tracker confirms the face ids and the pose crop settles, as in a video. Overlays are drawn
 * at the sheet's resolution (the analysis coordinates are scaled, not the rendered pixels), so
 * lines stay sharp in the close-up. Writes OUT.png (default overlays_contact_sheet.png) as
 * RGB24. docs/images/overlays_contact_sheet.png is made with:
 *
 *   build/examples/contact_sheet -o docs/images/overlays_contact_sheet.png \
 *       tests/data/grace_hopper.jpg tests/data/messi5.jpg
 *
 * Needs the face-full, face-mesh and pose-lite models (KEYER_MODELS_DIR or ./models).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyer/faces.h"
#include "keyer/frame.h"
#include "keyer/image.h"
#include "keyer/overlay.h"
#include "keyer/pose.h"

#define MAX_PHOTOS 8
#define STILL_FRAMES 4 /* > the tracker's min_hits (3): ids are confirmed */
#define MARGIN 12
#define MAX_GRAPH_POINTS (KEYER_FACES_MAX + KEYER_POSE_LANDMARKS)
#define POSE_ID_BASE 0x10000u

/* Maps analysis (photo) pixels to panel pixels: p' = (p - origin) * scale. */
typedef struct view {
    float x0, y0, scale;
} view;

static float vx(const view *v, float x) { return (x - v->x0) * v->scale; }
static float vy(const view *v, float y) { return (y - v->y0) * v->scale; }

static void map_detection(const view *v, keyer_detection *d)
{
    d->xmin = vx(v, d->xmin);
    d->xmax = vx(v, d->xmax);
    d->ymin = vy(v, d->ymin);
    d->ymax = vy(v, d->ymax);
    for (int k = 0; k < d->num_keypoints; k++) {
        d->keypoints[k][0] = vx(v, d->keypoints[k][0]);
        d->keypoints[k][1] = vy(v, d->keypoints[k][1]);
    }
}

static void map_face(const view *v, keyer_face *f)
{
    map_detection(v, &f->box);
    map_detection(v, &f->detection);
    for (int i = 0; i < KEYER_FACE_MESH_POINTS; i++) {
        f->landmarks[i][0] = vx(v, f->landmarks[i][0]);
        f->landmarks[i][1] = vy(v, f->landmarks[i][1]);
        f->landmarks[i][2] *= v->scale;
    }
    f->roi.center_x = vx(v, f->roi.center_x);
    f->roi.center_y = vy(v, f->roi.center_y);
    f->roi.width *= v->scale;
    f->roi.height *= v->scale;
}

static void map_pose(const view *v, keyer_pose_result *p)
{
    for (int i = 0; i < KEYER_POSE_LANDMARKS; i++) {
        p->landmarks[i].x = vx(v, p->landmarks[i].x);
        p->landmarks[i].y = vy(v, p->landmarks[i].y);
        p->landmarks[i].z *= v->scale;
    }
}

/* Fills panel (an RGBA view of the sheet) with the photo (RGB24) seen through @p v, bilinear;
 * outside the photo: the sheet's background. */
static void draw_photo(const keyer_frame *photo, const view *v, keyer_frame *panel)
{
    for (int y = 0; y < panel->height; y++) {
        uint8_t *d = panel->data[0] + y * panel->stride[0];
        float sy = v->y0 + ((float)y + 0.5f) / v->scale - 0.5f;
        for (int x = 0; x < panel->width; x++, d += 4) {
            float sx = v->x0 + ((float)x + 0.5f) / v->scale - 0.5f;
            if (sx < -0.5f || sy < -0.5f || sx > (float)photo->width - 0.5f ||
                sy > (float)photo->height - 0.5f)
                continue;
            int ix = (int)floorf(sx), iy = (int)floorf(sy);
            float fx = sx - (float)ix, fy = sy - (float)iy;
            int x0 = ix < 0 ? 0 : ix, y0 = iy < 0 ? 0 : iy;
            int x1 = ix + 1 >= photo->width ? photo->width - 1 : ix + 1;
            int y1 = iy + 1 >= photo->height ? photo->height - 1 : iy + 1;
            const uint8_t *r0 = photo->data[0] + y0 * photo->stride[0];
            const uint8_t *r1 = photo->data[0] + y1 * photo->stride[0];
            for (int c = 0; c < 3; c++) {
                float t = (r0[3 * x0 + c] * (1 - fx) + r0[3 * x1 + c] * fx) * (1 - fy) +
                          (r1[3 * x0 + c] * (1 - fx) + r1[3 * x1 + c] * fx) * fy;
                d[c] = (uint8_t)lrintf(t);
            }
            d[3] = 255;
        }
    }
}

/* A host frame viewing the rectangle (x, y, w, h) of the RGBA sheet (no reference held). */
static keyer_frame sub_frame(const keyer_frame *sheet, int x, int y, int w, int h)
{
    keyer_frame f;
    memset(&f, 0, sizeof(f));
    f.format = KEYER_PIXEL_FORMAT_RGBA;
    f.memory = KEYER_MEMORY_HOST;
    f.width = w;
    f.height = h;
    f.data[0] = sheet->data[0] + y * sheet->stride[0] + 4 * x;
    f.stride[0] = sheet->stride[0];
    return f;
}

/* The kNN graph over face centres and visible body keypoints (panel pixels), as curves. */
static keyer_status draw_graph(keyer_overlay *ov, const keyer_face *faces, int n_faces,
                               const keyer_pose_result *pose, keyer_error *err)
{
    uint32_t ids[MAX_GRAPH_POINTS];
    float xy[2 * MAX_GRAPH_POINTS];
    keyer_knn_edge edges[4 * MAX_GRAPH_POINTS];
    int n = 0, ne = 0;
    for (int i = 0; i < n_faces; i++) {
        if (!faces[i].id)
            continue;
        ids[n] = faces[i].id;
        xy[2 * n] = (faces[i].box.xmin + faces[i].box.xmax) / 2;
        xy[2 * n + 1] = (faces[i].box.ymin + faces[i].box.ymax) / 2;
        n++;
    }
    for (int i = 0; pose->found && i < KEYER_POSE_LANDMARKS; i++) {
        if (pose->landmarks[i].visibility < 0.5f)
            continue;
        ids[n] = POSE_ID_BASE + (uint32_t)i;
        xy[2 * n] = pose->landmarks[i].x;
        xy[2 * n + 1] = pose->landmarks[i].y;
        n++;
    }
    keyer_knn_params kp = keyer_knn_params_defaults();
    kp.k = 3;
    keyer_knn_graph *g = NULL;
    keyer_status st = keyer_knn_graph_create(&kp, MAX_GRAPH_POINTS, &g, err);
    if (!st)
        st = keyer_knn_graph_update(g, ids, xy, n, edges, (int)(sizeof(edges) / sizeof(edges[0])),
                                    &ne, err);
    keyer_knn_graph_destroy(&g);
    keyer_color c = {1.0f, 0.85f, 0.2f, 0.9f};
    for (int e = 0; !st && e < ne; e++) {
        int a = -1, b = -1;
        for (int i = 0; i < n; i++) {
            a = ids[i] == edges[e].a ? i : a;
            b = ids[i] == edges[e].b ? i : b;
        }
        if (a >= 0 && b >= 0)
            st = keyer_overlay_add_curve(ov, xy[2 * a], xy[2 * a + 1], xy[2 * b], xy[2 * b + 1],
                                         0.15f, 1.5f, c, err);
    }
    return st ? st : keyer_overlay_add_points(ov, xy, n, 2.5f, c, err);
}

static keyer_status add_caption(keyer_overlay *ov, const char *text, keyer_error *err)
{
    keyer_color white = {1, 1, 1, 1}, plate = {0, 0, 0, 0.65f};
    return keyer_overlay_add_label(ov, 6, 6, 1.5f, text, white, plate, err);
}

/* One row of the sheet: a photo, what was found on it, and its two panels' views. */
typedef struct row {
    const char *path, *name;
    keyer_frame *photo;
    const keyer_face *faces;
    int n_faces;
    keyer_pose_result pose;
    view full, zoom;
    int full_w, zoom_w;
} row;

/* Analyses r->photo as a still clip and chooses the panels' views for a row @p height high. */
static keyer_status analyse(row *r, keyer_faces *fa, keyer_pose *po, int height, keyer_error *err)
{
    keyer_status st = KEYER_OK;
    keyer_faces_reset(fa);
    keyer_pose_reset(po);
    for (int i = 0; i < STILL_FRAMES && !st; i++)
        st = keyer_faces_run(fa, r->photo, &r->faces, &r->n_faces, err);
    for (int i = 0; i < STILL_FRAMES && !st; i++)
        st = keyer_pose_run(po, r->photo, &r->pose, err);
    if (st)
        return st;
    r->full = (view){0, 0, (float)height / (float)r->photo->height};
    r->full_w = (int)lrintf((float)r->photo->width * r->full.scale);
    r->zoom_w = 0;
    if (r->n_faces > 0) {
        /* a square around the first face, 1.6 times its larger side */
        const keyer_detection *b = &r->faces[0].box;
        float side = 1.6f * fmaxf(b->xmax - b->xmin, b->ymax - b->ymin);
        r->zoom = (view){(b->xmin + b->xmax - side) / 2, (b->ymin + b->ymax - side) / 2,
                         (float)height / side};
        r->zoom_w = height;
    }
    return KEYER_OK;
}

/* Draws the row's panels into @p sheet at height @p y. */
static keyer_status draw_row(const row *r, keyer_overlay *ov, keyer_frame *sheet, int y,
                             int height, keyer_error *err)
{
    keyer_face *faces = NULL;
    keyer_status st = KEYER_OK;
    if (r->n_faces > 0 && !(faces = malloc(sizeof(*faces) * (size_t)r->n_faces))) {
        err->status = KEYER_STATUS_OUT_OF_MEMORY;
        snprintf(err->message, sizeof(err->message), "%s: out of memory for %d faces", r->name,
                 r->n_faces);
        return err->status;
    }
    float unit = (float)height / 360.0f;
    char caption[160];

    /* 1. the whole photo: faces, ids, pose, kNN graph */
    keyer_frame panel = sub_frame(sheet, MARGIN, y, r->full_w, height);
    draw_photo(r->photo, &r->full, &panel);
    keyer_overlay_clear(ov);
    for (int i = 0; i < r->n_faces; i++) {
        faces[i] = r->faces[i];
        map_face(&r->full, &faces[i]);
    }
    keyer_pose_result pose = r->pose;
    map_pose(&r->full, &pose);
    keyer_faces_draw_params fdp = keyer_faces_draw_params_defaults();
    fdp.mesh = 0;
    fdp.keypoints = 1;
    fdp.line_width = 2 * unit;
    fdp.text_scale = 1.5f * unit;
    keyer_pose_draw_params pdp = keyer_pose_draw_params_defaults();
    pdp.line_width = 2 * unit;
    pdp.point_radius = 3 * unit;
    snprintf(caption, sizeof(caption), "%s\n%d face%s, pose%s, kNN k=3", r->name, r->n_faces,
             r->n_faces == 1 ? "" : "s", r->pose.found ? "" : " (none)");
    if ((st = keyer_pose_draw(ov, &pose, &pdp, err)) ||
        (st = draw_graph(ov, faces, r->n_faces, &pose, err)) ||
        (st = keyer_faces_draw(ov, faces, r->n_faces, &fdp, err)) ||
        (st = add_caption(ov, caption, err)) || (st = keyer_overlay_render(ov, &panel, err)))
        goto done;

    /* 2. the first face close up: mesh points and contours */
    if (r->zoom_w > 0) {
        panel = sub_frame(sheet, 2 * MARGIN + r->full_w, y, r->zoom_w, height);
        draw_photo(r->photo, &r->zoom, &panel);
        keyer_overlay_clear(ov);
        faces[0] = r->faces[0];
        map_face(&r->zoom, &faces[0]);
        fdp = keyer_faces_draw_params_defaults();
        fdp.mesh = 1;
        fdp.mesh_points = 1;
        fdp.keypoints = 1;
        fdp.line_width = 2.5f * unit;
        fdp.text_scale = 1.5f * unit;
        fdp.mesh_color = (keyer_color){0.3f, 0.9f, 1.0f, 0.8f};
        snprintf(caption, sizeof(caption), "face mesh: %d points%s", KEYER_FACE_MESH_POINTS,
                 faces[0].has_landmarks ? "" : " (none)");
        if ((st = keyer_faces_draw(ov, faces, 1, &fdp, err)) ||
            (st = add_caption(ov, caption, err)) || (st = keyer_overlay_render(ov, &panel, err)))
            goto done;
    }
done:
    free(faces);
    return st;
}

static int usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [-o OUT.png] [--height H] PHOTO...\n", argv0);
    return 2;
}

int main(int argc, char **argv)
{
    const char *out_path = "overlays_contact_sheet.png";
    int height = 300, n_rows = 0;
    row rows[MAX_PHOTOS];
    memset(rows, 0, sizeof(rows));
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            out_path = argv[++i];
        } else if (!strcmp(argv[i], "--height") && i + 1 < argc) {
            height = atoi(argv[++i]);
            if (height < 64 || height > 4096)
                return usage(argv[0]);
        } else if (argv[i][0] == '-' || n_rows == MAX_PHOTOS) {
            return usage(argv[0]);
        } else {
            const char *slash = strrchr(argv[i], '/');
            rows[n_rows].path = argv[i];
            rows[n_rows++].name = slash ? slash + 1 : argv[i];
        }
    }
    if (!n_rows)
        return usage(argv[0]);

    keyer_error err = {0};
    keyer_faces *fa = NULL;
    keyer_pose *po = NULL;
    keyer_overlay *ov = NULL;
    keyer_frame *sheet = NULL, *rgb = NULL;
    int rc = 1;
    keyer_faces_params fp = keyer_faces_params_defaults();
    fp.range = KEYER_FACE_RANGE_FULL; /* the players in messi5 are small */
    fp.max_faces = 8;
    keyer_pose_params pp = keyer_pose_params_defaults();
    pp.segmentation = 0;
    if (keyer_faces_create(&fp, &fa, &err) || keyer_pose_create(&pp, &po, &err) ||
        keyer_overlay_create(1 << 14, &ov, &err))
        goto fail;

    /* analyse every photo (the faces' array belongs to fa: keep each row's copy) */
    int sheet_w = 0;
    keyer_face *saved[MAX_PHOTOS] = {NULL};
    for (int i = 0; i < n_rows; i++) {
        if (keyer_frame_create(&rows[i].photo, &err) ||
            keyer_image_read(rows[i].path, KEYER_PIXEL_FORMAT_RGB24, rows[i].photo, &err) ||
            analyse(&rows[i], fa, po, height, &err))
            goto fail_rows;
        if (rows[i].n_faces) {
            saved[i] = malloc(sizeof(keyer_face) * (size_t)rows[i].n_faces);
            if (!saved[i])
                goto fail_rows;
            memcpy(saved[i], rows[i].faces, sizeof(keyer_face) * (size_t)rows[i].n_faces);
            rows[i].faces = saved[i];
        }
        int w = MARGIN + rows[i].full_w + MARGIN + (rows[i].zoom_w ? rows[i].zoom_w + MARGIN : 0);
        sheet_w = w > sheet_w ? w : sheet_w;
        printf("%s: %d faces (ids", rows[i].name, rows[i].n_faces);
        for (int f = 0; f < rows[i].n_faces; f++)
            printf(" %u", rows[i].faces[f].id);
        printf("), pose %s\n", rows[i].pose.found ? "found" : "not found");
    }

    /* the sheet: dark grey, one row per photo */
    int sheet_h = MARGIN + n_rows * (height + MARGIN);
    if (keyer_frame_create(&sheet, &err) ||
        keyer_frame_alloc(sheet, KEYER_PIXEL_FORMAT_RGBA, sheet_w, sheet_h, NULL, &err))
        goto fail_rows;
    for (int y = 0; y < sheet_h; y++) {
        uint8_t *d = sheet->data[0] + y * sheet->stride[0];
        for (int x = 0; x < sheet_w; x++, d += 4)
            d[0] = d[1] = d[2] = 32, d[3] = 255;
    }
    for (int i = 0; i < n_rows; i++)
        if (draw_row(&rows[i], ov, sheet, MARGIN + i * (height + MARGIN), height, &err))
            goto fail_rows;

    /* written as RGB24: the alpha channel is opaque everywhere */
    if (keyer_frame_create(&rgb, &err) ||
        keyer_frame_alloc(rgb, KEYER_PIXEL_FORMAT_RGB24, sheet_w, sheet_h, NULL, &err))
        goto fail_rows;
    for (int y = 0; y < sheet_h; y++)
        for (int x = 0; x < sheet_w; x++)
            memcpy(rgb->data[0] + y * rgb->stride[0] + 3 * x,
                   sheet->data[0] + y * sheet->stride[0] + 4 * x, 3);
    if (keyer_image_write(out_path, rgb, &err))
        goto fail_rows;
    printf("wrote %s (%dx%d)\n", out_path, sheet_w, sheet_h);
    rc = 0;
fail_rows:
    for (int i = 0; i < n_rows; i++) {
        keyer_frame_destroy(&rows[i].photo);
        free(saved[i]);
    }
fail:
    if (rc)
        fprintf(stderr, "contact_sheet: %s\n", err.message[0] ? err.message : "out of memory");
    keyer_frame_destroy(&rgb);
    keyer_frame_destroy(&sheet);
    keyer_overlay_destroy(&ov);
    keyer_pose_destroy(&po);
    keyer_faces_destroy(&fa);
    return rc;
}
