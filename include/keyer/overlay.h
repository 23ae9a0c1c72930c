/**
 * @file keyer/overlay.h
 * @brief Anti-aliased overlays drawn on frames: rounded boxes, line segments and polylines,
 *        quadratic Bézier curves, dots, text labels in a built-in bitmap font, keypoints and
 *        their connections, and a k-nearest-neighbour graph of tracked points with hysteresis.
 *
 * A ::keyer_overlay collects the primitives of one frame, then keyer_overlay_render() draws
 * them all, on the CPU for host frames and with CUDA for device frames. Coverage comes from
 * analytic signed distances (one pixel of anti-aliasing; text: the exact covered area),
 * colours are composited with premultiplied alpha in the order the primitives were added.
 * Rendering bins primitives into 64x64 tiles (per-tile lists of the primitives that can touch
 * each tile: segments only list the tiles along them, unfilled boxes skip the tiles deep
 * inside), so the cost follows the covered area, not primitives x pixels.
 *
 * @code
 * keyer_overlay *ov = NULL;
 * keyer_overlay_create(1024, &ov, &err);
 * keyer_overlay_clear(ov);
 * keyer_overlay_add_box(ov, 100, 80, 300, 260, 12, 3, red, (keyer_color){0, 0, 0, 0.2f}, &err);
 * keyer_overlay_add_line(ov, 10, 10, 200, 50, 2, green, &err);
 * keyer_overlay_add_label(ov, 100, 56, 2, "id 7", white, (keyer_color){0, 0, 0, 0.6f}, &err);
 * keyer_overlay_render(ov, frame, &err);   // RGBA, NV12 or YUV420P, host or CUDA, in place
 * @endcode
 *
 * Memory is allocated at create (capacity primitives) and grows only when a frame needs a
 * larger tile grid than any before (and, for CUDA frames, on the first CUDA render and when
 * a scene needs more staging memory than any before); adding and rendering allocate nothing
 * otherwise.
 * An overlay is used by one thread at a time.
 */
#ifndef KEYER_OVERLAY_H
#define KEYER_OVERLAY_H

#include <stdint.h>

#include "keyer/frame.h"
#include "keyer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A colour with straight alpha, components in [0,1]. */
typedef struct keyer_color {
    float r, g, b, a;
} keyer_color;

typedef struct keyer_overlay keyer_overlay;

/** Creates an overlay holding up to @p capacity primitives. Errors: INVALID_ARGUMENT, OUT_OF_MEMORY. */
keyer_status keyer_overlay_create(int capacity, keyer_overlay **out, keyer_error *err);
/** Frees an overlay; NULL accepted; sets *ov to NULL. */
void keyer_overlay_destroy(keyer_overlay **ov);
/** Removes every primitive (start of a frame). */
void keyer_overlay_clear(keyer_overlay *ov);
/** Number of primitives added since the last clear. */
int keyer_overlay_count(const keyer_overlay *ov);

/**
 * A rounded rectangle with corners (x0,y0)-(x1,y1) in pixels, corner @p radius, a stroke of
 * @p stroke_width pixels centred on the outline (0: none) in @p stroke, and the inside filled
 * with @p fill (alpha 0: no fill). Errors: INVALID_ARGUMENT (non-finite or negative sizes),
 * OUT_OF_MEMORY (capacity reached).
 */
keyer_status keyer_overlay_add_box(keyer_overlay *ov, float x0, float y0, float x1, float y1,
                                   float radius, float stroke_width, keyer_color stroke,
                                   keyer_color fill, keyer_error *err);

/** A line segment of @p width pixels with round caps. Errors as keyer_overlay_add_box(). */
keyer_status keyer_overlay_add_line(keyer_overlay *ov, float x0, float y0, float x1, float y1,
                                    float width, keyer_color color, keyer_error *err);

/** A polyline through @p n points (xy pairs): n-1 segments. Errors as keyer_overlay_add_box(). */
keyer_status keyer_overlay_add_polyline(keyer_overlay *ov, const float *xy, int n, float width,
                                        keyer_color color, keyer_error *err);

/**
 * A quadratic Bézier curve from (x0,y0) to (x1,y1) whose control point sits at the chord's
 * midpoint pushed sideways by @p bend times the chord length (0: a straight line), drawn as
 * segments short enough to stay within a tenth of a pixel of the curve (1 to 64 of them; the
 * curve takes one primitive of the capacity per segment). The segments are computed when the
 * overlay is rendered: on the host for host frames, on the device for CUDA frames (the same
 * float operations, so the same segments). Errors: INVALID_ARGUMENT (a value not finite,
 * width <= 0, an end or the control point beyond 1e30 pixels), OUT_OF_MEMORY (capacity).
 */
keyer_status keyer_overlay_add_curve(keyer_overlay *ov, float x0, float y0, float x1, float y1,
                                     float bend, float width, keyer_color color, keyer_error *err);

/** A filled disc of @p radius pixels. */
keyer_status keyer_overlay_add_dot(keyer_overlay *ov, float x, float y, float radius,
                                   keyer_color color, keyer_error *err);

/* ---- text and analytics helpers ----------------------------------------------------- */

/**
 * Text in keyer's built-in 5x7 bitmap font (printable ASCII). (@p x, @p y) is the top-left
 * corner of the first character cell in pixels; @p scale is the size of one font unit in
 * pixels (1..64: a glyph is 5 x 7 units, characters advance 6 units, '\n' starts a new line
 * 9 units lower at @p x). Coverage is the exact area of each pixel covered by the glyph's
 * cells, so text at fractional positions and scales is anti-aliased. Bytes outside 32..126
 * other than '\n' are drawn as '?'. Each visible character takes one primitive; either all
 * fit or nothing is added. Errors: INVALID_ARGUMENT (NULL text, non-finite position, scale
 * out of range), OUT_OF_MEMORY (capacity reached).
 */
keyer_status keyer_overlay_add_text(keyer_overlay *ov, float x, float y, float scale,
                                    const char *text, keyer_color color, keyer_error *err);

/**
 * Size in pixels of @p text drawn by keyer_overlay_add_text() at @p scale: width
 * (6 * longest line - 1) * scale, height (9 * lines - 2) * scale; 0 x 0 for "".
 * NULL outputs are skipped.
 */
void keyer_overlay_text_size(const char *text, float scale, float *width, float *height);

/**
 * A label: @p text (as keyer_overlay_add_text()) on a rounded plate of colour @p background
 * with a margin of 2 font units, the plate's top-left corner at (@p x, @p y). Takes one
 * primitive for the plate plus one per visible character; all or nothing.
 * Errors as keyer_overlay_add_text().
 */
keyer_status keyer_overlay_add_label(keyer_overlay *ov, float x, float y, float scale,
                                     const char *text, keyer_color color, keyer_color background,
                                     keyer_error *err);

/**
 * Dots of @p radius pixels at @p n points (xy pairs, pixels). Points with a non-finite
 * coordinate are skipped (use NaN to hide a point). All or nothing.
 * Errors: INVALID_ARGUMENT (NULL xy with n > 0, radius <= 0), OUT_OF_MEMORY.
 */
keyer_status keyer_overlay_add_points(keyer_overlay *ov, const float *xy, int n, float radius,
                                      keyer_color color, keyer_error *err);

/**
 * Line segments joining pairs of points: @p pairs holds @p n_pairs index pairs into the
 * @p n_points points @p xy (e.g. keyer_pose_connections()). A pair with a non-finite endpoint
 * is skipped. All or nothing. Errors: INVALID_ARGUMENT (NULL arrays, an index outside
 * 0..n_points-1, width <= 0), OUT_OF_MEMORY.
 */
keyer_status keyer_overlay_add_connections(keyer_overlay *ov, const float *xy, int n_points,
                                           const int *pairs, int n_pairs, float width,
                                           keyer_color color, keyer_error *err);

/**
 * Removes the primitives added after the first @p count (keeps them all when @p count is at
 * least keyer_overlay_count()); lets a caller undo a group of primitives that did not fit.
 * NULL is accepted.
 */
void keyer_overlay_truncate(keyer_overlay *ov, int count);

/**
 * Sets the CUDA stream (a cudaStream_t) on which keyer_overlay_render() draws CUDA frames
 * (NULL, the default: the legacy default stream). The render is queued on that stream; the
 * caller synchronises it before reading the frame on the host. Errors: INVALID_ARGUMENT.
 */
keyer_status keyer_overlay_set_stream(keyer_overlay *ov, void *cuda_stream, keyer_error *err);

/**
 * Draws every primitive onto @p frame in place. Supported: RGBA (straight alpha: colour
 * channels are blended, the frame's alpha becomes the union coverage) and NV12/YUV420P (the
 * overlay is converted with the frame's matrix and range; chroma uses the coverage averaged
 * over each 2x2 block), in host memory (CPU renderer) or CUDA memory (CUDA renderer: one
 * kernel launch for all primitives, queued on the stream of keyer_overlay_set_stream();
 * the same arithmetic as the CPU, so results agree within one code value). Primitive and
 * tile lists are binned on the host and copied through pinned staging memory allocated on
 * the first CUDA render (room for 512 primitives at least) and grown with the scene.
 * Errors: INVALID_ARGUMENT (bad frame), UNSUPPORTED (format; a CUDA frame in a keyer built
 * without CUDA), OUT_OF_MEMORY (tile lists for a larger frame than before), DEVICE (a CUDA
 * call failed).
 */
keyer_status keyer_overlay_render(keyer_overlay *ov, keyer_frame *frame, keyer_error *err);

/* ---- k-nearest-neighbour graph of tracked points ------------------------------------- */

/*
 * A graph joins each tracked point to its nearest neighbours, with edges that do not flicker
 * from frame to frame. It runs on the CPU (a uniform grid over the points: about O(n k) per
 * frame for evenly spread points) or, with keyer_knn_params.cuda = 1, on a CUDA device; both
 * compute the same graph, edge for edge and in the same order, by these rules:
 *
 *  1. Distances are float: d2 = dx * dx + dy * dy (dx = x_j - x_i, one rounding per
 *     operation), length = sqrtf(d2). Points with a non-finite coordinate have no neighbours;
 *     a pair whose d2 overflows to infinity, or with |dy| > max_dy (when max_dy > 0), is never
 *     joined.
 *  2. The k nearest neighbours of point i are the k smallest pairs (d2, j) in lexicographic
 *     order: equal distances are ordered by the point's index j in this frame's arrays (the
 *     lower index first). kth(i) is the length to the last of them (INFINITY: none).
 *  3. Candidate edges: (i, j) for every j among i's neighbours, one edge per pair, ordered by
 *     (length, smaller id, larger id).
 *  4. Degree cap, greedy and sequential: first the previous frame's edges in the order they
 *     were output, each kept when both ids are still present, its length is finite and at most
 *     max(kth(a), kth(b)) * (1 + hysteresis), it is not joined yet and both degrees are below
 *     max_degree; then the candidates in their order, each added when not joined yet and both
 *     degrees are below max_degree.
 *  5. The output lists the kept edges, then the added ones, in the order they were chosen (and
 *     that order is the previous frame's order at the next update).
 *
 * @code
 * keyer_knn_params kp = keyer_knn_params_defaults();
 * kp.k = 5;
 * keyer_knn_graph *g = NULL;
 * keyer_knn_graph_create(&kp, 50000, &g, &err);
 * // per frame: ids (track ids, unique in the frame) and xy pixel positions of n points
 * keyer_knn_graph_update(g, ids, xy, n, edges, 50000 * kp.max_degree, &n_edges, &err);
 * keyer_knn_graph_destroy(&g);
 * @endcode
 * A graph is used by one thread at a time.
 */

/** Settings of a kNN graph. */
typedef struct keyer_knn_params {
    int k;               /**< neighbours considered per point (3) */
    float max_dy;        /**< edges only between points at most this far apart vertically (px; <=0: no limit) */
    int max_degree;      /**< edges per point at most (4) */
    float hysteresis;    /**< an existing edge survives until its length exceeds the k-th
                              neighbour distance times (1 + hysteresis) (0.2) */
    int cuda;            /**< 0 (default): build the graph on the CPU; 1: on CUDA device
                              cuda_device (keyer built with CUDA) */
    int cuda_device;     /**< the CUDA device when cuda is 1 (0) */
    int reserved[2];
} keyer_knn_params;

keyer_knn_params keyer_knn_params_defaults(void);

/** An edge between two point ids. */
typedef struct keyer_knn_edge {
    uint32_t a, b; /**< ids, a < b */
} keyer_knn_edge;

typedef struct keyer_knn_graph keyer_knn_graph;

/**
 * Creates a graph for up to @p max_points points per frame (any number: the buffers for that
 * many points are allocated here, and nothing per frame). A CUDA graph (params->cuda = 1)
 * allocates device and pinned host memory and a CUDA stream on params->cuda_device. Its
 * updates of up to 8,192 points with k <= 16 replay a captured CUDA graph when the number of
 * points is the previous update's: the second and third updates of a new number capture it
 * (once for each of the two edge buffers it alternates between) and later ones replay it; a
 * number of points that changes every frame is served by launches queued one by one.
 * Errors: INVALID_ARGUMENT (max_points < 1, k < 1, max_degree < 1, hysteresis negative or not
 * finite, max_dy not finite, cuda not 0 or 1), UNSUPPORTED (cuda in a keyer built without
 * CUDA), OUT_OF_MEMORY, DEVICE (a CUDA call failed, e.g. no such device).
 */
keyer_status keyer_knn_graph_create(const keyer_knn_params *params, int max_points,
                                    keyer_knn_graph **out, keyer_error *err);
/** Frees a graph (a CUDA graph waits for its work first); NULL accepted; sets *g to NULL. */
void keyer_knn_graph_destroy(keyer_knn_graph **g);

/**
 * Sets the CUDA stream (a cudaStream_t) a CUDA graph's updates are queued on (NULL, the
 * default: the legacy default stream). keyer_knn_graph_update still returns only when the
 * edges are on the host. The CPU graph ignores it. Errors: INVALID_ARGUMENT (NULL graph).
 */
keyer_status keyer_knn_graph_set_stream(keyer_knn_graph *g, void *cuda_stream, keyer_error *err);

/**
 * Updates the graph with this frame's points (@p ids stable across frames and distinct within
 * the frame, e.g. track ids; @p xy pixel positions, host memory) and writes the edges to
 * @p edges (host memory, at most @p capacity; *count set; the graph keeps all of them,
 * at most max_points x max_degree / 2, for the next frame's hysteresis). An edge is added when
 * b is among a's k nearest (or a among b's), within max_dy, and both degrees allow; an edge
 * present in the previous frame is kept while its length stays below the hysteresis bound, so
 * edges do not flicker (the exact rules are above). Errors: INVALID_ARGUMENT (NULL arrays,
 * n > max_points, an id twice in the frame: the graph is then left as it was), DEVICE (a CUDA
 * call failed).
 */
keyer_status keyer_knn_graph_update(keyer_knn_graph *g, const uint32_t *ids, const float *xy,
                                    int n, keyer_knn_edge *edges, int capacity, int *count,
                                    keyer_error *err);

#ifdef __cplusplus
}
#endif
#endif /* KEYER_OVERLAY_H */
