/*
 * ONNX models against ONNX Runtime's outputs (tests/data/onnx/, PROVENANCE.md there): the
 * operator test graphs of tests/data/onnx/manifest.tsv and U^2-NetP on the two test photos,
 * loaded through keyer's public API (keyer_model_load_file_params), fed and read in the file's
 * own layout (keyer_tensor_to_graph_layout / _to_file_layout) and compared element by element.
 * Used by tests/golden/test_onnx_oracle.c (reference, cpu) and test_onnx_oracle_gpu.c (cuda).
 */
#ifndef KEYER_TESTS_KT_ONNX_ORACLE_H
#define KEYER_TESTS_KT_ONNX_ORACLE_H

#include "keyer/nn.h"

/** One backend configuration to check. */
typedef struct kt_onnx_target {
    keyer_backend backend;
    keyer_precision precision;
    /* Per element: |keyer - ort| <= tol * max(1, |ort|). A case's own floor (manifest column
     * "tol") raises it. f16_cases: take each case's f16_tol column instead of tol. */
    double tol;
    int f16_cases;
    int threads; /* cpu threads (0: all cores) */
} kt_onnx_target;

/**
 * Runs every case of $KEYER_TEST_DATA/onnx/manifest.tsv on @p target, printing one line per
 * case (the largest absolute and scaled differences of each output) and one line per failure.
 * A case fails when loading, creating the runtime or running fails, when an input or output
 * does not match the manifest's name and shape, or when an element is off by more than the
 * tolerance (NaN included). Returns the number of failed cases (-1 if the manifest is
 * unreadable); @p cases gets the number of cases run.
 */
int kt_onnx_run_ops(const kt_onnx_target *target, int *cases);

/** How U^2-NetP is judged on a backend. */
typedef struct kt_u2netp_limits {
    double tol;          /* per element, as kt_onnx_target.tol; <= 0: not applied */
    double mask_agree;   /* fraction of pixels of '1959' on the same side of 0.5, or 0 */
    double mean_abs;     /* largest mean |keyer - ort| of '1959', or 0 */
} kt_u2netp_limits;

/**
 * Runs $KEYER_MODELS_DIR/u2netp.onnx on both photos' committed inputs and compares output
 * '1959' in full and the side outputs '1960'..'1965' on the committed 8-pixel grid. Prints the
 * measured spread. Returns the number of failed checks, or -1 when the model file is absent
 * (the caller skips).
 */
int kt_onnx_run_u2netp(const kt_onnx_target *target, const kt_u2netp_limits *limits);

#endif
