/*
 * The CUDA side of model descriptions (label gpu; exits 77 without a CUDA device):
 *  - the mask of every output kind (vision/segmodel.h: kr_segmask_cuda) against the CPU's
 *    kr_segmask_cpu, interleaved and planar channels;
 *  - prepare's per-channel mean/std and BGR on a CUDA frame against the same on the host.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "keyer/effects.h"
#include "keyer/frame.h"
#include "kt_effects.h"
#include "testutil.h"
#include "vision/segmodel.h"

static const kr_device_fns *dev;

static void test_segmask_cuda(void **state)
{
    (void)state;
    enum { CELLS = 1000, C = 4 };
    float *src = malloc(sizeof(float) * CELLS * C), want[CELLS], got[CELLS];
    assert_non_null(src);
    for (int i = 0; i < CELLS * C; i++)
        src[i] = (float)sin(0.37 * i) * 6.0f; /* logits, scores, values outside [0,1] */
    keyer_error err = {0};
    void *dsrc = NULL, *ddst = NULL, *stream = NULL;
    assert_int_equal(dev->alloc(0, sizeof(float) * CELLS * C, &dsrc, &err), KEYER_OK);
    assert_int_equal(dev->alloc(0, sizeof(float) * CELLS, &ddst, &err), KEYER_OK);
    assert_int_equal(dev->stream_create(0, &stream, &err), KEYER_OK);
    assert_int_equal(dev->copy(0, dsrc, src, sizeof(float) * CELLS * C, stream, &err), KEYER_OK);
    kr_segmodel m;
    memset(&m, 0, sizeof(m));
    m.mask_c = C;
    for (int planar = 0; planar < 2; planar++)
        for (int kind = 0; kind < 4; kind++) {
            m.mask_planar = planar;
            m.kind = (keyer_mask_kind)kind;
            m.channel = kind == KEYER_MASK_CLASSES ? 2 : 0;
            kr_segmask_cpu(&m, want, src, CELLS);
            if (kr_segmask_cuda(&m, 0, ddst, dsrc, CELLS, stream, &err))
                fail_msg("%s", err.message);
            assert_int_equal(dev->copy(0, got, ddst, sizeof(got), stream, &err), KEYER_OK);
            assert_int_equal(dev->stream_sync(0, stream, &err), KEYER_OK);
            double worst = 0;
            for (int k = 0; k < CELLS; k++) {
                double d = fabs((double)got[k] - want[k]);
                worst = d > worst ? d : worst;
            }
            /* __expf on the device for logits, expf for classes */
            if (worst > 2e-6)
                fail_msg("planar %d kind %d: max |cuda - cpu| %g", planar, kind, worst);
        }
    dev->stream_destroy(0, stream);
    dev->free(0, dsrc);
    dev->free(0, ddst);
    free(src);
}

static void test_prepare_cuda(void **state)
{
    (void)state;
    const int tw = 41, th = 23;
    keyer_frame *host = kt_frame_padded(KEYER_PIXEL_FORMAT_NV12, 96, 64, 0);
    assert_non_null(host);
    kt_fill_random(host, 11u, 1);
    keyer_error err = {0};
    keyer_frame dframe;
    memset(&dframe, 0, sizeof(dframe));
    void *stream = NULL;
    assert_int_equal(dev->stream_create(0, &stream, &err), KEYER_OK);
    assert_int_equal(kr_device_frame_alloc(dev, 0, &dframe, KEYER_PIXEL_FORMAT_NV12, 96, 64, &err),
                     KEYER_OK);
    assert_int_equal(kr_device_frame_copy(dev, 0, &dframe, host, stream, &err), KEYER_OK);
    size_t n = (size_t)tw * th * 3;
    float *want = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    void *dt = NULL;
    assert_non_null(want);
    assert_non_null(got);
    assert_int_equal(dev->alloc(0, n * sizeof(float), &dt, &err), KEYER_OK);
    for (int layout = 0; layout < 2; layout++) {
        keyer_prepare_params p = keyer_prepare_params_defaults();
        p.width = tw;
        p.height = th;
        p.fit = KEYER_FIT_LETTERBOX;
        p.pad = 0.5f;
        p.layout = layout ? KEYER_TENSOR_LAYOUT_NCHW : KEYER_TENSOR_LAYOUT_NHWC;
        p.bgr = 1;
        p.scale = 2.0f;
        p.offset = -1.0f;
        const float mean[3] = {0.1f, -0.2f, 0.3f}, sd[3] = {0.5f, 0.25f, 2.0f};
        for (int c = 0; c < 3; c++) {
            p.mean[c] = mean[c];
            p.std[c] = sd[c];
        }
        p.stream = stream;
        keyer_prepare *prep = NULL;
        assert_int_equal(keyer_prepare_create(&p, &prep, &err), KEYER_OK);
        const keyer_frame *hf[1] = {host}, *df[1] = {&dframe};
        assert_int_equal(keyer_prepare_run(prep, hf, NULL, 1, want, NULL, &err), KEYER_OK);
        if (keyer_prepare_run(prep, df, NULL, 1, dt, NULL, &err))
            fail_msg("%s", err.message);
        assert_int_equal(dev->copy(0, got, dt, n * sizeof(float), stream, &err), KEYER_OK);
        assert_int_equal(dev->stream_sync(0, stream, &err), KEYER_OK);
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            double d = fabs((double)got[i] - want[i]);
            worst = d > worst ? d : worst;
        }
        print_message("layout %d: max |cuda - cpu| %g\n", layout, worst);
        assert_true(worst < 2e-3 / 0.25); /* the prepare paths' 1e-3-ish, over std 0.25 */
        keyer_prepare_destroy(&prep);
    }
    dev->free(0, dt);
    keyer_frame_unref(&dframe);
    dev->stream_destroy(0, stream);
    keyer_frame_destroy(&host);
    free(want);
    free(got);
}

int main(void)
{
    dev = kr_device_cuda();
    if (!dev || dev->count() < 1) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_segmask_cuda),
        cmocka_unit_test(test_prepare_cuda),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
