/*
 * The backend-ops cases of the operators and parameters added for ONNX models (onnx_cases.c):
 * one-node graphs built by hand and validated like test_backend_ops.c's own table, which runs
 * them on every backend against the reference.
 */
#ifndef KEYER_TEST_ONNX_CASES_H
#define KEYER_TEST_ONNX_CASES_H

#include <stddef.h>
#include <stdint.h>

#include "nn/graph.h"

/* Number of cases. */
int kt_onnx_case_count(void);

/* Builds and validates case @p i (weights drawn from @p seed); writes a description into
 * @p desc and the range of the random inputs into *lo, *hi. The graph is fixed_batch for the
 * cases that operate on axis 0 (they run at batch 1 only). kr_graph_destroy() frees it. */
kr_graph *kt_onnx_case_build(int i, uint32_t seed, char *desc, size_t desc_cap, float *lo,
                             float *hi);

#endif
