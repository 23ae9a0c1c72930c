/*
 * Hand-built runtime graphs for tests (no model file): a builder that fills a kr_graph the way a
 * model reader does, then validates (kr_graph_validate) and links it, plus a small seeded random
 * generator for inputs and weights.
 *
 *   kt_graph b;
 *   kt_graph_begin(&b, "relu", 8, 4, 0);
 *   int x = kt_graph_act(&b, 4, (int[]){1, 7, 5, 3});
 *   int y = kt_graph_act(&b, 4, (int[]){1, 7, 5, 3});
 *   kt_graph_node(&b, KR_OP_RELU, 1, (int[]){x}, y);
 *   kt_graph_input(&b, x);
 *   kt_graph_output(&b, y);
 *   kr_graph *g = NULL;
 *   if (kt_graph_finish(&b, &g, &err)) ...          // g: kr_graph_destroy(&g) when done
 *
 * Misuse (capacity exceeded, out of memory) aborts the test program with a message: these are
 * bugs in the test, not conditions under test.
 */
#ifndef KEYER_KT_GRAPH_H
#define KEYER_KT_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "keyer/status.h"
#include "nn/graph.h"
#include "testutil.h"

typedef struct kt_graph {
    kr_graph *g;
    int max_tensors, max_nodes, max_io;
    size_t const_used, const_cap; /* bytes of g->const_storage */
} kt_graph;

/* Starts an empty graph named @p name with room for the given numbers of tensors and nodes and
 * @p const_bytes of constant data (each constant is 16-byte aligned inside it). */
void kt_graph_begin(kt_graph *b, const char *name, int max_tensors, int max_nodes,
                    size_t const_bytes);
/* Adds a FLOAT32 activation tensor (dims[0] should be 1); returns its index. */
int kt_graph_act(kt_graph *b, int rank, const int *dims);
/* Adds a constant of @p dtype (F32 or I32) with @p data copied in; returns its index. */
int kt_graph_const(kt_graph *b, kr_dtype dtype, int rank, const int *dims, const void *data);
/* Adds a node reading @p in (n_in tensor indices, -1 for an absent optional input) and writing
 * tensor @p out; returns it so that the caller can fill its parameters (zeroed; activation NONE,
 * window dilations 1). */
kr_node *kt_graph_node(kt_graph *b, kr_op op, int n_in, const int *in, int out);
/* Appends a graph input / output. */
void kt_graph_input(kt_graph *b, int tensor);
void kt_graph_output(kt_graph *b, int tensor);
/* Validates and links the graph and hands it to *out (kr_graph_destroy() frees it). On a
 * validation error the graph is destroyed, *out is NULL and the status is returned. */
keyer_status kt_graph_finish(kt_graph *b, kr_graph **out, keyer_error *err);
/* kt_graph_finish() for a graph that must be valid: returns it, or prints the validation
 * error and aborts (the running test fails). */
kr_graph *kt_graph_build(kt_graph *b);

/* A small deterministic generator (xorshift32, kt_rng of testutil.h); seed 0 is replaced by a
 * fixed constant. */
kt_rng kt_rng_seed(uint32_t seed);
uint32_t kt_rng_next(kt_rng *r);
/* Uniform in [lo, hi). */
float kt_rng_uniform(kt_rng *r, float lo, float hi);
/* Fills @p n floats uniform in [lo, hi). */
void kt_rng_fill(kt_rng *r, float *x, size_t n, float lo, float hi);

#endif
