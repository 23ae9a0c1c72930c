/*
 * Robustness of the ONNX file reader: every file of tests/fuzz/corpus/onnx/ (written by
 * tests/fuzz/make_onnx_corpus.py) opens, or fails with the status and message listed below,
 * both from its path and from memory; a file that opens is imported as fuzz_onnx does and
 * imports, or fails with the status and message listed in imports[] (the bad_import_*
 * files: regressions of fuzzing findings in the importer); then truncations and a
 * deterministic, time-bounded mutation loop over the valid models. Run it under
 * -DKEYER_SANITIZE=ON too: a crash, a leak or undefined behaviour is a failure.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "nn/graph.h"
#include "nn/onnx/import.h"
#include "nn/onnx/onnx_file.h"
#include "testutil.h"

typedef struct expectation {
    const char *file;
    keyer_status status; /* KEYER_OK: it opens */
    const char *needle;  /* in the message (failures) */
} expectation;

static const expectation cases[] = {
    {"ok_conv_relu.onnx", KEYER_OK, NULL},
    {"ok_opset7.onnx", KEYER_OK, NULL},
    {"ok_opset21.onnx", KEYER_OK, NULL},
    {"ok_attrs.onnx", KEYER_OK, NULL},
    {"ok_external.onnx", KEYER_OK, NULL},
    /* The reader does not know operators: the importer refuses this one, naming it. */
    {"ok_unknown_operator.onnx", KEYER_OK, NULL},
    /* They open; the importer refuses them (see imports below). */
    {"bad_import_reshape_overflow.onnx", KEYER_OK, NULL},
    {"bad_import_quantize_zero_scale.onnx", KEYER_OK, NULL},
    {"bad_import_quantize_nan_scale.onnx", KEYER_OK, NULL},
    {"bad_import_pad_int64_min.onnx", KEYER_OK, NULL},
    {"bad_import_pad_huge_negative.onnx", KEYER_OK, NULL},
    {"bad_import_no_output.onnx", KEYER_OK, NULL},
    {"bad_import_split_overflow.onnx", KEYER_OK, NULL},
    {"bad_import_pow_overflow.onnx", KEYER_OK, NULL},
    {"bad_import_range_overflow.onnx", KEYER_OK, NULL},
    {"bad_import_resize_sizes.onnx", KEYER_OK, NULL},
    {"bad_truncated.onnx", KEYER_STATUS_BAD_DATA, "running past its end"},
    {"bad_truncated_varint.onnx", KEYER_STATUS_BAD_DATA, "a truncated varint"},
    {"bad_wire_graph.onnx", KEYER_STATUS_BAD_DATA, "field 'graph' with wire type 0 (expected 2)"},
    {"bad_wire_ir_version.onnx", KEYER_STATUS_BAD_DATA,
     "field 'ir_version' with wire type 2 (expected 0)"},
    {"bad_group.onnx", KEYER_STATUS_BAD_DATA, "wire type 3"},
    {"bad_nesting.onnx", KEYER_STATUS_BAD_DATA, "nested more than"},
    {"bad_short_initializer.onnx", KEYER_STATUS_BAD_DATA,
     "initializer 'w': raw_data has 212 bytes, its dims (54 FLOAT elements) need 216"},
    {"bad_short_float_data.onnx", KEYER_STATUS_BAD_DATA,
     "initializer 'b': 2 elements in float_data, its dims need 3"},
    {"bad_negative_dim.onnx", KEYER_STATUS_BAD_DATA, "initializer 'w': dimension 1 is -2"},
    {"bad_huge_dims.onnx", KEYER_STATUS_BAD_DATA, "initializer 'w': its dims hold more than"},
    {"bad_string_tensor.onnx", KEYER_STATUS_UNSUPPORTED, "data type STRING (8) is not supported"},
    {"bad_type_mismatch.onnx", KEYER_STATUS_BAD_DATA,
     "data type INT64 with its data in float_data (expected int64_data)"},
    {"bad_int8_range.onnx", KEYER_STATUS_BAD_DATA, "(300) is out of range for INT8"},
    {"bad_unproduced_input.onnx", KEYER_STATUS_BAD_DATA,
     "node 'relu' (Relu): input 'nothing_makes_this' is produced by no node"},
    {"bad_cycle.onnx", KEYER_STATUS_BAD_DATA,
     "node 'conv' (Conv): input 'y' comes from node 'relu' (Relu), which comes later (a cycle"},
    {"bad_two_producers.onnx", KEYER_STATUS_BAD_DATA,
     "node 'relu' (Relu): output 'c' is already produced"},
    {"bad_unproduced_output.onnx", KEYER_STATUS_BAD_DATA, "graph output 'unmade' is produced by"},
    {"bad_no_op_type.onnx", KEYER_STATUS_BAD_DATA, "has no operator type"},
    {"bad_unknown_domain.onnx", KEYER_STATUS_UNSUPPORTED,
     "node 'relu' (Relu) is in operator domain 'com.example'"},
    {"bad_duplicate_attribute.onnx", KEYER_STATUS_BAD_DATA, "two attributes named 'pads'"},
    {"bad_nul_string_attribute.onnx", KEYER_STATUS_BAD_DATA,
     "string attribute 'mode' holds a NUL byte"},
    {"bad_opset6.onnx", KEYER_STATUS_UNSUPPORTED, "opset 6 of the default domain"},
    {"bad_opset22.onnx", KEYER_STATUS_UNSUPPORTED, "opset 22 of the default domain"},
    {"bad_no_default_opset.onnx", KEYER_STATUS_BAD_DATA, "no opset import for the default"},
    {"bad_no_graph.onnx", KEYER_STATUS_BAD_DATA, "the model has no graph"},
    {"bad_external_outside.onnx", KEYER_STATUS_BAD_DATA,
     "external data location '../outside.weights' is not a path inside the model's folder"},
    {"bad_external_absolute.onnx", KEYER_STATUS_BAD_DATA,
     "external data location '/etc/passwd' is not a path inside"},
    {"bad_external_missing.onnx", KEYER_STATUS_IO,
     "external data file 'missing.weights': missing"},
    {"bad_external_short.onnx", KEYER_STATUS_BAD_DATA, "too short for 16 bytes at offset 16"},
    {"bad_external_length.onnx", KEYER_STATUS_BAD_DATA,
     "external data length 12, but its dims need 16 bytes"},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* The import of every file that opens (KEYER_OK: a consistent graph). */
static const expectation imports[] = {
    {"ok_conv_relu.onnx", KEYER_OK, NULL},
    {"ok_opset7.onnx", KEYER_OK, NULL},
    {"ok_opset21.onnx", KEYER_OK, NULL},
    {"ok_attrs.onnx", KEYER_STATUS_BAD_DATA,
     "node 'resize' (op Resize, opset 13): sizes has 2 values for 4 axes"},
    {"ok_external.onnx", KEYER_OK, NULL},
    {"ok_unknown_operator.onnx", KEYER_STATUS_UNSUPPORTED, "NoSuchOperator"},
    /* Fuzzing findings, undefined behaviour before: a product of shape entries past int64 */
    {"bad_import_reshape_overflow.onnx", KEYER_STATUS_BAD_DATA,
     "node 'reshape' (op Reshape, opset 13): shape is too large (entry 1, 1099511627776, "
     "makes more than 2^40 elements)"},
    /* casting NaN (0 / 0 or x / NaN) to an integer */
    {"bad_import_quantize_zero_scale.onnx", KEYER_STATUS_BAD_DATA,
     "node 'quantize' (op QuantizeLinear, opset 13): quantizes 0 with the scale 0 and zero "
     "point 0 (value 0): the scale must be non-zero and the result a number"},
    {"bad_import_quantize_nan_scale.onnx", KEYER_STATUS_BAD_DATA,
     "node 'quantize' (op QuantizeLinear, opset 13): quantizes 0 with the scale nan and zero "
     "point 0 (value 0)"},
    /* negating INT64_MIN; subtracting pads of about -2^62 from 4 */
    {"bad_import_pad_int64_min.onnx", KEYER_STATUS_BAD_DATA,
     "node 'pad' (op Pad, opset 13): negative pads of axis 2 (-9223372036854775808, 0) crop "
     "more than its 4 elements"},
    {"bad_import_pad_huge_negative.onnx", KEYER_STATUS_BAD_DATA,
     "node 'pad' (op Pad, opset 13): negative pads of axis 2 (-4611686018427387904, "
     "-4611686018427387912) crop more than its 4 elements"},
    /* adding split sizes of 2^62 */
    {"bad_import_split_overflow.onnx", KEYER_STATUS_BAD_DATA,
     "node 'split' (op Split, opset 13): split part 0 is 4611686018427387904 (of an axis of 3)"},
    /* Found reviewing the same arithmetic: a folded integer Pow, a folded integer Range and
     * Resize sizes cast out-of-range doubles to int64, or overflowed j * delta */
    {"bad_import_pow_overflow.onnx", KEYER_STATUS_BAD_DATA,
     "node 'pow' (op Pow, opset 13): integer Pow 10 ^ 30 is not an int64"},
    {"bad_import_range_overflow.onnx", KEYER_STATUS_BAD_DATA,
     "node 'range' (op Range, opset 13): a range from 0 by 4611686018427387904 to "
     "18446744073709551616 leaves int64"},
    {"bad_import_resize_sizes.onnx", KEYER_STATUS_BAD_DATA,
     "node 'resize' (op Resize, opset 13): sizes entry 2 is 9.22337e+18 (1 to 2^24)"},
    /* output[0] of a node with no outputs (a NULL array) */
    {"bad_import_no_output.onnx", KEYER_STATUS_BAD_DATA,
     "node 'argmax' (op ArgMax, opset 13): has no first output"},
};
#define N_IMPORTS (sizeof imports / sizeof imports[0])

static char corpus_dir[1200];

static const char *corpus_path(char *buf, size_t n, const char *file)
{
    snprintf(buf, n, "%s/%s", corpus_dir, file);
    return buf;
}

/* What an importer reads of an opened file, touched so that the sanitizers see it. */
static void check_opened(const kr_onnx_file *f)
{
    const Onnx__GraphProto *g = kr_onnx_file_graph(f);
    assert_non_null(g);
    assert_true(kr_onnx_file_opset(f) >= 7 && kr_onnx_file_opset(f) <= 21);
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const kr_onnx_tensor *t = kr_onnx_file_initializer(f, g->initializer[i]->name);
        assert_non_null(t);
        assert_true(t->rank >= 0 && t->rank <= KR_ONNX_MAX_RANK);
        size_t count = 1;
        for (int d = 0; d < t->rank; d++) {
            assert_true(t->dims[d] >= 0);
            count *= (size_t)t->dims[d];
        }
        assert_int_equal(count, t->count);
        assert_true(t->count * t->elem_size <= KR_ONNX_MAX_TENSOR_BYTES);
        if (t->count) {
            const uint8_t *p = t->data;
            sink ^= p[0];
            sink ^= p[t->count * t->elem_size - 1];
        } else {
            assert_null(t->data);
        }
        assert_int_equal(kr_onnx_file_producer(f, g->initializer[i]->name), -1);
    }
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; k < n->n_input; k++) {
            if (!n->input[k][0])
                continue;
            int p = kr_onnx_file_producer(f, n->input[k]);
            assert_true(p >= -1 && p < (int)i);
        }
        for (size_t k = 0; k < n->n_output; k++)
            if (n->output[k][0])
                assert_int_equal(kr_onnx_file_producer(f, n->output[k]), (int)i);
        const kr_onnx_tensor *c = kr_onnx_file_constant(f, n);
        assert_true((c != NULL) == (strcmp(n->op_type, "Constant") == 0));
        if (c && c->count)
            sink ^= ((const uint8_t *)c->data)[c->count * c->elem_size - 1];
        for (size_t k = 0; k < n->n_attribute; k++) {
            const kr_onnx_tensor *t = NULL;
            const char *s = NULL;
            keyer_error err = {0};
            if (n->attribute[k]->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR) {
                assert_int_equal(kr_onnx_attr_tensor(f, n, n->attribute[k]->name, &t, &err),
                                 KEYER_OK);
                assert_non_null(t);
            } else if (n->attribute[k]->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING) {
                assert_int_equal(kr_onnx_attr_string(f, n, n->attribute[k]->name, NULL, &s,
                                                     &err),
                                 KEYER_OK);
                assert_non_null(s);
                sink ^= (uint8_t)strlen(s);
            }
        }
    }
    for (size_t i = 0; i < g->n_output; i++)
        assert_true(kr_onnx_file_producer(f, g->output[i]->name) >= -1);
    (void)sink;
}

/* Opens @p size bytes at @p d from memory (folder @p dir) and checks the outcome. */
static void expect(const void *d, size_t size, const char *dir, keyer_status want,
                   const char *needle, const char *what)
{
    keyer_error err = {0};
    kr_onnx_file *f = NULL;
    keyer_status st = kr_onnx_file_open_memory(d, size, "corpus.onnx", dir, &f, &err);
    if (st != want || (st != KEYER_OK && needle && !strstr(err.message, needle)))
        print_message("%s: status %s, message: %s\n(expected %s: %s)\n", what,
                      keyer_status_name(st), err.message, keyer_status_name(want),
                      needle ? needle : "");
    assert_int_equal(st, want);
    if (st == KEYER_OK) {
        check_opened(f);
        kr_onnx_file_destroy(&f);
        assert_null(f);
        return;
    }
    assert_null(f);
    assert_int_equal(err.status, st);
    assert_int_equal(strncmp(err.message, "corpus.onnx: ", 13), 0);
    if (needle)
        assert_non_null(strstr(err.message, needle));
}

/* Imports @p f (@p file, opened from @p path) as fuzz_onnx does (dynamic sizes 16x16): the
 * graph is consistent, or the import fails as imports[] says, its message starting with the
 * path. */
static void check_import(const kr_onnx_file *f, const char *file, const char *path)
{
    const expectation *c = NULL;
    for (size_t i = 0; i < N_IMPORTS; i++)
        if (strcmp(imports[i].file, file) == 0)
            c = &imports[i];
    if (!c)
        print_message("%s opens but has no import expectation in test_onnx_corpus.c\n", file);
    assert_non_null(c);
    keyer_error err = {0};
    kr_graph *g = NULL;
    kr_onnx_layout *layouts = NULL;
    kr_onnx_import_params p = kr_onnx_import_params_defaults();
    p.height = 16;
    p.width = 16;
    keyer_status st = kr_onnx_import(f, &p, &g, &layouts, &err);
    if (st != c->status ||
        (st != KEYER_OK && c->needle && !strstr(err.message, c->needle)))
        print_message("%s: import status %s, message: %s\n(expected %s: %s)\n", file,
                      keyer_status_name(st), err.message, keyer_status_name(c->status),
                      c->needle ? c->needle : "");
    assert_int_equal(st, c->status);
    if (st != KEYER_OK) {
        assert_null(g);
        assert_null(layouts);
        assert_int_equal(err.status, st);
        assert_int_equal(strncmp(err.message, path, strlen(path)), 0);
        assert_non_null(c->needle);
        assert_non_null(strstr(err.message, c->needle));
        return;
    }
    assert_non_null(g);
    assert_non_null(layouts);
    for (int i = 0; i < g->n_nodes; i++) {
        const kr_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++)
            assert_true(n->inputs[k] >= -1 && n->inputs[k] < g->n_tensors);
        assert_true(n->outputs[0] >= 0 && n->outputs[0] < g->n_tensors);
        assert_int_equal(g->tensors[n->outputs[0]].producer, i);
    }
    for (int i = 0; i < g->n_inputs + g->n_outputs; i++)
        assert_true(layouts[i].rank >= 0 && layouts[i].rank <= KR_MAX_DIMS);
    free(layouts);
    kr_graph_destroy(&g);
    assert_null(g);
}

static void test_corpus_files(void **state)
{
    (void)state;
    char path[1400];
    for (size_t i = 0; i < N_CASES; i++) {
        const expectation *c = &cases[i];
        corpus_path(path, sizeof path, c->file);
        /* From the path: messages start with the path. */
        keyer_error err = {0};
        kr_onnx_file *f = NULL;
        keyer_status st = kr_onnx_file_open(path, &f, &err);
        if (st != c->status)
            print_message("%s: status %s (%s), expected %s\n", c->file, keyer_status_name(st),
                          err.message, keyer_status_name(c->status));
        assert_int_equal(st, c->status);
        if (st == KEYER_OK) {
            check_opened(f);
            check_import(f, c->file, path);
            kr_onnx_file_destroy(&f);
        } else {
            assert_null(f);
            assert_int_equal(strncmp(err.message, path, strlen(path)), 0);
            assert_non_null(strstr(err.message, c->needle));
        }
        /* From memory, with the corpus as the folder of external data. */
        size_t size;
        uint8_t *d = kt_read_file(path, &size);
        assert_non_null(d);
        expect(d, size, corpus_dir, c->status, c->needle, c->file);
        free(d);
    }
}

/* Every .onnx file of the corpus has an expectation (a new file needs one). */
static void test_corpus_listed(void **state)
{
    (void)state;
    DIR *dir = opendir(corpus_dir);
    assert_non_null(dir);
    int n_onnx = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".onnx") != 0)
            continue;
        n_onnx++;
        int listed = 0;
        for (size_t i = 0; i < N_CASES; i++)
            listed |= strcmp(cases[i].file, e->d_name) == 0;
        if (!listed)
            print_message("%s has no expectation in test_onnx_corpus.c\n", e->d_name);
        assert_true(listed);
    }
    closedir(dir);
    assert_int_equal(n_onnx, (int)N_CASES);
}

static void test_external_from_memory(void **state)
{
    (void)state;
    char path[1400];
    size_t size;
    uint8_t *d = kt_read_file(corpus_path(path, sizeof path, "ok_external.onnx"), &size);
    assert_non_null(d);
    /* Without a folder, external data is refused (the fuzz target opens models this way). */
    expect(d, size, NULL, KEYER_STATUS_UNSUPPORTED, "a model read from memory has no folder",
           "ok_external.onnx without a folder");
    free(d);
}

static void test_tiny_and_truncated(void **state)
{
    (void)state;
    /* An empty file parses as an empty ModelProto: no opset. */
    expect("", 0, NULL, KEYER_STATUS_BAD_DATA, "no opset import", "empty file");
    expect("\xff", 1, NULL, KEYER_STATUS_BAD_DATA, "not a valid ONNX model", "one byte");
    expect("\x00\x00", 2, NULL, KEYER_STATUS_BAD_DATA, "field number 0", "zero key");
    char path[1400];
    size_t size;
    uint8_t *d = kt_read_file(corpus_path(path, sizeof path, "ok_attrs.onnx"), &size);
    assert_non_null(d);
    /* Every proper prefix of a valid model fails cleanly (a prefix may end between fields of
     * the ModelProto; then the graph or the opset is missing, or the graph is cut short). */
    for (size_t n = 0; n < size; n++) {
        keyer_error err = {0};
        kr_onnx_file *f = NULL;
        keyer_status st = kr_onnx_file_open_memory(d, n, "corpus.onnx", NULL, &f, &err);
        if (st == KEYER_OK) {
            check_opened(f);
            kr_onnx_file_destroy(&f);
            continue;
        }
        assert_null(f);
        assert_int_equal(err.status, st);
        assert_int_equal(strncmp(err.message, "corpus.onnx: ", 13), 0);
    }
    free(d);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Random byte edits of @p file (up to @p max_runs or @p seconds): each opens or fails with a
 * message naming the file. Returns the number of runs. */
static long mutate(const char *file, long max_runs, double seconds, uint64_t seed, long *opened)
{
    char path[1400];
    size_t size;
    uint8_t *orig = kt_read_file(corpus_path(path, sizeof path, file), &size);
    assert_non_null(orig);
    uint8_t *d = malloc(size);
    assert_non_null(d);
    double t0 = now_s();
    long runs = 0;
    *opened = 0;
    uint64_t s = seed;
    static const uint8_t interesting[] = {0x00, 0x01, 0x02, 0x07, 0x08, 0x0a, 0x12, 0x3a,
                                          0x7f, 0x80, 0xff};
    while (runs < max_runs && now_s() - t0 < seconds) {
        memcpy(d, orig, size);
        int edits = 1 + (int)(next(&s) % 4);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)(next(&s) % size);
            uint64_t r = next(&s);
            if (r & 1)
                d[at] = interesting[(r >> 1) % sizeof interesting];
            else
                d[at] ^= (uint8_t)(1u << ((r >> 1) % 8));
        }
        size_t n = (next(&s) % 8 == 0) ? (size_t)(next(&s) % size) : size;
        keyer_error err = {0};
        kr_onnx_file *f = NULL;
        keyer_status st = kr_onnx_file_open_memory(d, n, "corpus.onnx", corpus_dir, &f, &err);
        if (st == KEYER_OK) {
            check_opened(f);
            kr_onnx_file_destroy(&f);
            (*opened)++;
        } else {
            assert_null(f);
            assert_int_equal(err.status, st);
            assert_int_equal(strncmp(err.message, "corpus.onnx: ", 13), 0);
        }
        runs++;
    }
    free(d);
    free(orig);
    return runs;
}

static void test_mutations(void **state)
{
    (void)state;
    static const char *const seeds[] = {"ok_attrs.onnx", "ok_conv_relu.onnx",
                                        "ok_external.onnx"};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        long opened;
        long runs = mutate(seeds[i], 20000, 5.0, 0x6f6e6e78ull + i, &opened);
        print_message("%s: %ld mutations, %ld still opened\n", seeds[i], runs, opened);
        assert_true(runs >= 500);
    }
}

static int setup(void **state)
{
    (void)state;
    char data[1024];
    kt_data_path(data, sizeof data, "");
    snprintf(corpus_dir, sizeof corpus_dir, "%s/../fuzz/corpus/onnx", data);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus_files),
        cmocka_unit_test(test_corpus_listed),
        cmocka_unit_test(test_external_from_memory),
        cmocka_unit_test(test_tiny_and_truncated),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
