/*
 * The ONNX file reader (src/nn/onnx/onnx_file.h): U²-NetP loads with its known structure, every
 * tensor encoding and Constant form decodes to the values make_onnx_corpus.py wrote, the
 * attribute getters return values, defaults and typed errors, and external data is read inside
 * the model's folder and refused outside it (paths, '..', symbolic links). The broken files of
 * tests/fuzz/corpus/onnx/ are checked one by one in tests/fuzz/test_onnx_corpus.c.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "nn/onnx/onnx_file.h"
#include "testutil.h"

static char corpus_dir[1200];

static const char *corpus_path(char *buf, size_t n, const char *file)
{
    snprintf(buf, n, "%s/%s", corpus_dir, file);
    return buf;
}

static kr_onnx_file *open_ok(const char *path)
{
    keyer_error err = {0};
    kr_onnx_file *f = NULL;
    keyer_status st = kr_onnx_file_open(path, &f, &err);
    if (st != KEYER_OK)
        print_message("%s\n", err.message);
    assert_int_equal(st, KEYER_OK);
    assert_non_null(f);
    return f;
}

static const Onnx__NodeProto *node_named(const kr_onnx_file *f, const char *name)
{
    const Onnx__GraphProto *g = kr_onnx_file_graph(f);
    for (size_t i = 0; i < g->n_node; i++)
        if (g->node[i]->name && strcmp(g->node[i]->name, name) == 0)
            return g->node[i];
    fail_msg("no node named %s", name);
    return NULL;
}

static int count_op(const Onnx__GraphProto *g, const char *op)
{
    int n = 0;
    for (size_t i = 0; i < g->n_node; i++)
        n += strcmp(g->node[i]->op_type, op) == 0;
    return n;
}

static void test_u2netp(void **state)
{
    (void)state;
    char path[1400];
    kt_model_path(path, sizeof path, "u2netp.onnx");
    if (!kt_exists(path)) {
        print_message("%s is missing (scripts/setup.sh fetches it): skipped\n", path);
        skip();
        return;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    kr_onnx_file *f = open_ok(path);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    print_message("u2netp.onnx opened in %.1f ms\n",
                  (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6);
    const Onnx__GraphProto *g = kr_onnx_file_graph(f);
    assert_ptr_equal(g, kr_onnx_file_model(f)->graph);
    assert_string_equal(kr_onnx_file_name(f), path);
    assert_int_equal(kr_onnx_file_opset(f), 11);
    assert_int_equal(g->n_initializer, 238);
    /* The PyTorch 1.9 export's shape subgraphs (the issue lists these counts). */
    assert_int_equal(count_op(g, "Shape"), 114);
    assert_int_equal(count_op(g, "Gather"), 76);
    assert_int_equal(count_op(g, "Unsqueeze"), 76);
    assert_int_equal(count_op(g, "Cast"), 38);
    assert_int_equal(count_op(g, "Slice"), 38);
    assert_int_equal(count_op(g, "Constant"), 266);
    assert_int_equal(g->n_output, 7);
    assert_string_equal(g->output[0]->name, "1959");
    assert_true(kr_onnx_file_producer(f, "1959") >= 0);
    assert_int_equal(g->n_input, 1);
    assert_int_equal(kr_onnx_file_producer(f, g->input[0]->name), -1);

    size_t weight_bytes = 0;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const kr_onnx_tensor *t = kr_onnx_file_initializer(f, g->initializer[i]->name);
        assert_non_null(t);
        assert_string_equal(t->name, g->initializer[i]->name);
        assert_int_equal(t->data_type, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
        assert_int_equal(t->elem_size, 4);
        assert_non_null(t->data);
        weight_bytes += t->count * 4;
    }
    /* U²-NetP has about 1.13 M parameters (4.5 MB file). */
    assert_true(weight_bytes > 4000000 && weight_bytes < 4700000);

    int convs = 0, dilated = 0, ceil_pools = 0, resizes = 0;
    keyer_error err = {0};
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (strcmp(n->op_type, "Constant") == 0) {
            const kr_onnx_tensor *c = kr_onnx_file_constant(f, n);
            assert_non_null(c);
            assert_int_equal(kr_onnx_file_producer(f, n->output[0]), (int)i);
        } else {
            assert_null(kr_onnx_file_constant(f, n));
        }
        if (strcmp(n->op_type, "Conv") == 0) {
            const int64_t *ks, *dil;
            size_t nk, nd;
            assert_int_equal(kr_onnx_attr_ints(f, n, "kernel_shape", &ks, &nk, &err), KEYER_OK);
            assert_int_equal(nk, 2);
            assert_true(ks[0] == 1 || ks[0] == 3);
            assert_int_equal(kr_onnx_attr_ints(f, n, "dilations", &dil, &nd, &err), KEYER_OK);
            assert_int_equal(nd, 2);
            dilated += dil[0] > 1;
            int64_t group;
            assert_int_equal(kr_onnx_attr_int(f, n, "group", 1, &group, &err), KEYER_OK);
            assert_int_equal(group, 1);
            const kr_onnx_tensor *w = kr_onnx_file_initializer(f, n->input[1]);
            assert_non_null(w);
            assert_int_equal(w->rank, 4);
            assert_int_equal(w->dims[2], ks[0]);
            convs++;
        } else if (strcmp(n->op_type, "MaxPool") == 0) {
            int64_t ceil_mode;
            assert_int_equal(kr_onnx_attr_int(f, n, "ceil_mode", 0, &ceil_mode, &err), KEYER_OK);
            ceil_pools += ceil_mode == 1;
        } else if (strcmp(n->op_type, "Resize") == 0) {
            const char *mode, *ctm;
            assert_int_equal(kr_onnx_attr_string(f, n, "mode", "nearest", &mode, &err),
                             KEYER_OK);
            assert_int_equal(kr_onnx_attr_string(f, n, "coordinate_transformation_mode",
                                                 "half_pixel", &ctm, &err),
                             KEYER_OK);
            assert_string_equal(mode, "linear");
            assert_string_equal(ctm, "pytorch_half_pixel");
            resizes++;
        }
    }
    assert_true(convs > 50);
    assert_true(dilated > 0);
    assert_true(ceil_pools > 0);
    assert_true(resizes > 0);
    kr_onnx_file_destroy(&f);
    assert_null(f);
    kr_onnx_file_destroy(&f); /* NULL accepted */
    kr_onnx_file_destroy(NULL);
}

#define ASSERT_TENSOR(t, type, rank_, count_)                                                     \
    do {                                                                                          \
        assert_non_null(t);                                                                       \
        assert_int_equal((t)->data_type, ONNX__TENSOR_PROTO__DATA_TYPE__##type);                  \
        assert_int_equal((t)->rank, rank_);                                                       \
        assert_int_equal((t)->count, count_);                                                     \
    } while (0)

static void test_tensor_encodings(void **state)
{
    (void)state;
    char path[1400];
    kr_onnx_file *f = open_ok(corpus_path(path, sizeof path, "ok_attrs.onnx"));
    assert_int_equal(kr_onnx_file_opset(f), 13);
    const kr_onnx_tensor *t;

    t = kr_onnx_file_initializer(f, "f_typed"); /* float_data */
    ASSERT_TENSOR(t, FLOAT, 1, 2);
    assert_int_equal(t->elem_size, 4);
    assert_true(((const float *)t->data)[0] == 1.5f && ((const float *)t->data)[1] == -2.0f);
    t = kr_onnx_file_initializer(f, "f_raw"); /* raw_data */
    ASSERT_TENSOR(t, FLOAT, 2, 4);
    assert_int_equal(t->dims[0], 2);
    assert_int_equal(t->dims[1], 2);
    for (int i = 0; i < 4; i++)
        assert_true(((const float *)t->data)[i] == (float)(i + 1));
    t = kr_onnx_file_initializer(f, "i64");
    ASSERT_TENSOR(t, INT64, 1, 3);
    assert_int_equal(t->elem_size, 8);
    const int64_t *i64 = t->data;
    assert_true(i64[0] == 1 && i64[1] == -2 && i64[2] == ((int64_t)1 << 40));
    t = kr_onnx_file_initializer(f, "i32");
    ASSERT_TENSOR(t, INT32, 1, 2);
    assert_true(((const int32_t *)t->data)[0] == 7 && ((const int32_t *)t->data)[1] == -8);
    t = kr_onnx_file_initializer(f, "i8"); /* int32_data narrowed */
    ASSERT_TENSOR(t, INT8, 1, 3);
    assert_int_equal(t->elem_size, 1);
    const int8_t *i8 = t->data;
    assert_true(i8[0] == -128 && i8[1] == 0 && i8[2] == 127);
    t = kr_onnx_file_initializer(f, "u8");
    ASSERT_TENSOR(t, UINT8, 1, 2);
    assert_true(((const uint8_t *)t->data)[0] == 0 && ((const uint8_t *)t->data)[1] == 255);
    t = kr_onnx_file_initializer(f, "b");
    ASSERT_TENSOR(t, BOOL, 1, 2);
    assert_true(((const uint8_t *)t->data)[0] == 1 && ((const uint8_t *)t->data)[1] == 0);
    t = kr_onnx_file_initializer(f, "h"); /* float16 bit patterns in int32_data */
    ASSERT_TENSOR(t, FLOAT16, 1, 2);
    assert_int_equal(t->elem_size, 2);
    assert_int_equal(((const uint16_t *)t->data)[0], 0x3c00);
    assert_int_equal(((const uint16_t *)t->data)[1], 0xc000);
    t = kr_onnx_file_initializer(f, "d");
    ASSERT_TENSOR(t, DOUBLE, 1, 1);
    assert_true(*(const double *)t->data == 0.125);
    t = kr_onnx_file_initializer(f, "u32"); /* uint64_data narrowed */
    ASSERT_TENSOR(t, UINT32, 1, 1);
    assert_int_equal(*(const uint32_t *)t->data, 4000000000u);
    t = kr_onnx_file_initializer(f, "scalar");
    ASSERT_TENSOR(t, FLOAT, 0, 1);
    assert_true(*(const float *)t->data == 3.0f);
    t = kr_onnx_file_initializer(f, "empty");
    ASSERT_TENSOR(t, FLOAT, 2, 0);
    assert_null(t->data);
    assert_null(kr_onnx_file_initializer(f, "x"));
    assert_null(kr_onnx_file_initializer(f, "nope"));
    assert_null(kr_onnx_file_initializer(f, NULL));

    /* Constant nodes, every value form. */
    t = kr_onnx_file_constant(f, node_named(f, "k_tensor"));
    ASSERT_TENSOR(t, INT64, 1, 2);
    assert_true(((const int64_t *)t->data)[0] == 4 && ((const int64_t *)t->data)[1] == 5);
    t = kr_onnx_file_constant(f, node_named(f, "k_float"));
    ASSERT_TENSOR(t, FLOAT, 0, 1);
    assert_true(*(const float *)t->data == 0.75f);
    t = kr_onnx_file_constant(f, node_named(f, "k_int"));
    ASSERT_TENSOR(t, INT64, 0, 1);
    assert_true(*(const int64_t *)t->data == -9);
    t = kr_onnx_file_constant(f, node_named(f, "k_ints"));
    ASSERT_TENSOR(t, INT64, 1, 3);
    assert_int_equal(t->dims[0], 3);
    assert_true(((const int64_t *)t->data)[2] == 3);
    t = kr_onnx_file_constant(f, node_named(f, "k_floats"));
    ASSERT_TENSOR(t, FLOAT, 1, 2);
    assert_true(((const float *)t->data)[1] == 1.5f);
    assert_null(kr_onnx_file_constant(f, node_named(f, "leaky")));
    assert_null(kr_onnx_file_constant(f, NULL));

    /* Producers. */
    assert_int_equal(kr_onnx_file_producer(f, "x"), -1);
    assert_int_equal(kr_onnx_file_producer(f, "f_raw"), -1);
    assert_int_equal(kr_onnx_file_producer(f, "k_tensor"), 0);
    assert_int_equal(kr_onnx_file_producer(f, "a"), 5);
    assert_int_equal(kr_onnx_file_producer(f, "y"), 9);
    assert_int_equal(kr_onnx_file_producer(f, "nope"), -2);
    assert_int_equal(kr_onnx_file_producer(f, NULL), -2);
    kr_onnx_file_destroy(&f);
}

static void test_attribute_getters(void **state)
{
    (void)state;
    char path[1400];
    kr_onnx_file *f = open_ok(corpus_path(path, sizeof path, "ok_attrs.onnx"));
    keyer_error err = {0};
    const Onnx__NodeProto *leaky = node_named(f, "leaky"), *pool = node_named(f, "pool"),
                          *resize = node_named(f, "resize"), *cos = node_named(f, "cos"),
                          *custom = node_named(f, "custom");
    float fv = 0;
    int64_t iv = 0;
    const char *sv = NULL;
    const int64_t *ints = NULL;
    const float *floats = NULL;
    size_t n = 99;
    const kr_onnx_tensor *t = NULL;

    assert_int_equal(kr_onnx_attr_float(f, leaky, "alpha", 0.01f, &fv, &err), KEYER_OK);
    assert_true(fv == 0.2f);
    assert_int_equal(kr_onnx_attr_float(f, leaky, "beta", 0.5f, &fv, &err), KEYER_OK);
    assert_true(fv == 0.5f); /* absent: the default */
    assert_int_equal(kr_onnx_attr_int(f, pool, "ceil_mode", 0, &iv, &err), KEYER_OK);
    assert_int_equal(iv, 1);
    assert_int_equal(kr_onnx_attr_int(f, pool, "storage_order", 7, &iv, &err), KEYER_OK);
    assert_int_equal(iv, 7);
    assert_int_equal(kr_onnx_attr_ints(f, pool, "strides", &ints, &n, &err), KEYER_OK);
    assert_int_equal(n, 2);
    assert_true(ints[0] == 2 && ints[1] == 2);
    assert_int_equal(kr_onnx_attr_ints(f, pool, "pads", &ints, &n, &err), KEYER_OK);
    assert_int_equal(n, 0);
    assert_non_null(ints); /* absent: count 0 and a pointer memcpy accepts */
    assert_int_equal(kr_onnx_attr_string(f, resize, "mode", "nearest", &sv, &err), KEYER_OK);
    assert_string_equal(sv, "linear");
    assert_int_equal(kr_onnx_attr_string(f, resize, "nearest_mode", "round_prefer_floor", &sv,
                                         &err),
                     KEYER_OK);
    assert_string_equal(sv, "round_prefer_floor");
    assert_int_equal(kr_onnx_attr_string(f, custom, "note", NULL, &sv, &err), KEYER_OK);
    assert_string_equal(sv, "hello");
    assert_int_equal(kr_onnx_attr_floats(f, custom, "scales", &floats, &n, &err), KEYER_OK);
    assert_int_equal(n, 2);
    assert_true(floats[0] == 0.5f && floats[1] == 2.0f);
    assert_int_equal(kr_onnx_attr_floats(f, custom, "absent", &floats, &n, &err), KEYER_OK);
    assert_int_equal(n, 0);
    assert_non_null(floats);
    assert_int_equal(kr_onnx_attr_tensor(f, cos, "value", &t, &err), KEYER_OK);
    ASSERT_TENSOR(t, FLOAT, 1, 1);
    assert_true(*(const float *)t->data == 0.25f);
    assert_int_equal(kr_onnx_attr_tensor(f, cos, "other", &t, &err), KEYER_OK);
    assert_null(t);
    /* The Constant's value attribute is the same decoded tensor. */
    const Onnx__NodeProto *k = node_named(f, "k_tensor");
    assert_int_equal(kr_onnx_attr_tensor(f, k, "value", &t, &err), KEYER_OK);
    assert_ptr_equal(t, kr_onnx_file_constant(f, k));
    assert_int_equal(err.status, KEYER_OK);

    /* Present with another type: BAD_DATA naming the file, node, operator and attribute. */
    keyer_status st = kr_onnx_attr_int(f, leaky, "alpha", 0, &iv, &err);
    assert_int_equal(st, KEYER_STATUS_BAD_DATA);
    assert_int_equal(err.status, st);
    assert_non_null(strstr(err.message, path));
    assert_non_null(strstr(err.message, "node 'leaky' (LeakyRelu): attribute 'alpha' is a FLOAT, "
                                        "expected an INT"));
    keyer_error_clear(&err);
    assert_int_equal(kr_onnx_attr_float(f, pool, "kernel_shape", 0, &fv, &err),
                     KEYER_STATUS_BAD_DATA);
    assert_non_null(strstr(err.message, "attribute 'kernel_shape' is an INTS, expected a FLOAT"));
    assert_int_equal(kr_onnx_attr_ints(f, resize, "mode", &ints, &n, &err),
                     KEYER_STATUS_BAD_DATA);
    assert_int_equal(kr_onnx_attr_floats(f, pool, "strides", &floats, &n, &err),
                     KEYER_STATUS_BAD_DATA);
    assert_int_equal(kr_onnx_attr_string(f, pool, "ceil_mode", "", &sv, &err),
                     KEYER_STATUS_BAD_DATA);
    assert_int_equal(kr_onnx_attr_tensor(f, resize, "mode", &t, &err), KEYER_STATUS_BAD_DATA);
    assert_non_null(strstr(err.message, "attribute 'mode' is a STRING, expected a TENSOR"));

    /* A node of another graph: string and tensor values were prepared only for this one. */
    Onnx__AttributeProto a = ONNX__ATTRIBUTE_PROTO__INIT;
    a.name = "mode";
    a.has_type = 1;
    a.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    a.has_s = 1;
    a.s.data = (uint8_t *)"x";
    a.s.len = 1;
    Onnx__AttributeProto *attrs[] = {&a};
    Onnx__NodeProto other = ONNX__NODE_PROTO__INIT;
    other.op_type = "Resize";
    other.n_attribute = 1;
    other.attribute = attrs;
    assert_int_equal(kr_onnx_attr_string(f, &other, "mode", NULL, &sv, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "not in the model's main graph"));
    assert_int_equal(kr_onnx_attr_int(f, NULL, "x", 0, &iv, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    kr_onnx_file_destroy(&f);
}

/* ---- external data ----------------------------------------------------------------------- */

/* Writes ok_external.onnx to @p out with its one external entry's location (and offset, when
 * @p offset is non-NULL) replaced; @p location NULL drops the location entry. */
static void write_external_variant(const char *out, const char *location, const char *offset)
{
    char path[1400];
    size_t size;
    uint8_t *d = kt_read_file(corpus_path(path, sizeof path, "ok_external.onnx"), &size);
    assert_non_null(d);
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, size, d);
    assert_non_null(m);
    Onnx__TensorProto *w = m->graph->initializer[0];
    char *saved_loc = NULL, *saved_off = NULL;
    Onnx__StringStringEntryProto *loc_entry = NULL, *off_entry = NULL;
    size_t saved_n = w->n_external_data;
    for (size_t i = 0; i < w->n_external_data; i++) {
        if (strcmp(w->external_data[i]->key, "location") == 0)
            loc_entry = w->external_data[i];
        if (strcmp(w->external_data[i]->key, "offset") == 0)
            off_entry = w->external_data[i];
    }
    assert_non_null(loc_entry);
    assert_non_null(off_entry);
    assert_ptr_equal(loc_entry, w->external_data[0]);
    saved_loc = loc_entry->value;
    saved_off = off_entry->value;
    if (location) {
        loc_entry->value = (char *)location;
    } else {
        /* Drop the location entry: the first one. */
        w->external_data++;
        w->n_external_data--;
    }
    if (offset)
        off_entry->value = (char *)offset;
    size_t n = onnx__model_proto__get_packed_size(m);
    uint8_t *buf = malloc(n);
    assert_non_null(buf);
    assert_int_equal(onnx__model_proto__pack(m, buf), n);
    assert_int_equal(kt_write_file(out, buf, n), 0);
    free(buf);
    if (!location) {
        w->external_data--;
        w->n_external_data = saved_n;
    }
    loc_entry->value = saved_loc;
    off_entry->value = saved_off;
    onnx__model_proto__free_unpacked(m, NULL);
    free(d);
}

static void write_weights(const char *path)
{
    uint8_t data[24] = "HEADER!!";
    const float w[4] = {1, 2, 3, 4};
    memcpy(data + 8, w, sizeof w);
    assert_int_equal(kt_write_file(path, data, sizeof data), 0);
}

static void expect_external(const char *model, keyer_status want, const char *needle)
{
    keyer_error err = {0};
    kr_onnx_file *f = NULL;
    keyer_status st = kr_onnx_file_open(model, &f, &err);
    if (st != want || (needle && !strstr(err.message, needle)))
        print_message("%s: %s: %s (expected %s: %s)\n", model, keyer_status_name(st),
                      err.message, keyer_status_name(want), needle ? needle : "");
    assert_int_equal(st, want);
    if (st == KEYER_OK) {
        const kr_onnx_tensor *w = kr_onnx_file_initializer(f, "w");
        ASSERT_TENSOR(w, FLOAT, 1, 4);
        for (int i = 0; i < 4; i++)
            assert_true(((const float *)w->data)[i] == (float)(i + 1));
        kr_onnx_file_destroy(&f);
        return;
    }
    assert_null(f);
    assert_int_equal(strncmp(err.message, model, strlen(model)), 0);
    assert_non_null(strstr(err.message, needle));
}

static void test_external_data(void **state)
{
    (void)state;
    char tmp[1024], dir[1200], outside[1200], p[1400], q[1400], model[1400];
    kt_tmpdir(tmp, sizeof tmp, "onnx_external");
    snprintf(dir, sizeof dir, "%s/model", tmp);
    snprintf(outside, sizeof outside, "%s/outside", tmp);
    mkdir(dir, 0755);
    mkdir(outside, 0755);
    snprintf(p, sizeof p, "%s/sub", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/sub/w.bin", dir);
    write_weights(p);
    snprintf(p, sizeof p, "%s/w.bin", outside);
    write_weights(p);
    snprintf(model, sizeof model, "%s/m.onnx", dir);

    /* Inside the folder: a subfolder, "./", and a link that stays inside. */
    write_external_variant(model, "sub/w.bin", NULL);
    expect_external(model, KEYER_OK, NULL);
    write_external_variant(model, "./sub/w.bin", NULL);
    expect_external(model, KEYER_OK, NULL);
    snprintf(p, sizeof p, "%s/inside_link.bin", dir);
    unlink(p);
    assert_int_equal(symlink("sub/w.bin", p), 0);
    write_external_variant(model, "inside_link.bin", NULL);
    expect_external(model, KEYER_OK, NULL);

    /* Leaving it: '..', absolute paths, links resolving outside (to a file or a folder). */
    write_external_variant(model, "sub/../sub/w.bin", NULL);
    expect_external(model, KEYER_STATUS_BAD_DATA, "is not a path inside the model's folder");
    write_external_variant(model, "..\\outside\\w.bin", NULL);
    expect_external(model, KEYER_STATUS_BAD_DATA, "is not a path inside the model's folder");
    snprintf(q, sizeof q, "%s/w.bin", outside);
    write_external_variant(model, q, NULL);
    expect_external(model, KEYER_STATUS_BAD_DATA, "absolute paths");
    snprintf(p, sizeof p, "%s/link.bin", dir);
    unlink(p);
    assert_int_equal(symlink(q, p), 0);
    write_external_variant(model, "link.bin", NULL);
    expect_external(model, KEYER_STATUS_BAD_DATA,
                    "external data location 'link.bin' resolves outside the model's folder");
    snprintf(p, sizeof p, "%s/linkdir", dir);
    unlink(p);
    assert_int_equal(symlink(outside, p), 0);
    write_external_variant(model, "linkdir/w.bin", NULL);
    expect_external(model, KEYER_STATUS_BAD_DATA, "resolves outside the model's folder");

    /* Broken references. */
    write_external_variant(model, "", NULL);
    expect_external(model, KEYER_STATUS_BAD_DATA, "is not a path inside");
    write_external_variant(model, "sub", NULL);
    expect_external(model, KEYER_STATUS_IO, "is not a regular file");
    write_external_variant(model, "nothing.bin", NULL);
    expect_external(model, KEYER_STATUS_IO, "external data file 'nothing.bin': missing");
    write_external_variant(model, NULL, NULL);
    expect_external(model, KEYER_STATUS_BAD_DATA, "external data without a location");
    write_external_variant(model, "sub/w.bin", "-8");
    expect_external(model, KEYER_STATUS_BAD_DATA, "offset '-8' is not a non-negative integer");
    write_external_variant(model, "sub/w.bin", "99999999999999999999999");
    expect_external(model, KEYER_STATUS_BAD_DATA, "is not a non-negative integer");
    write_external_variant(model, "sub/w.bin", "18446744073709551615");
    expect_external(model, KEYER_STATUS_BAD_DATA, "too short for 16 bytes at offset");
    write_external_variant(model, "sub/w.bin", "9");
    expect_external(model, KEYER_STATUS_BAD_DATA, "has 24 bytes, too short for 16 bytes at "
                                                  "offset 9");

    static const char *const made[] = {"model/m.onnx",      "model/inside_link.bin",
                                       "model/link.bin",    "model/linkdir",
                                       "model/sub/w.bin",   "outside/w.bin"};
    for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", tmp, made[i]);
        assert_int_equal(unlink(p), 0);
    }
    static const char *const dirs[] = {"model/sub", "model", "outside", ""};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", tmp, dirs[i]);
        assert_int_equal(rmdir(p), 0);
    }
}

static void test_open_errors(void **state)
{
    (void)state;
    keyer_error err = {0};
    kr_onnx_file *f = (kr_onnx_file *)&err; /* must be cleared */
    assert_int_equal(kr_onnx_file_open("/nonexistent/model.onnx", &f, &err), KEYER_STATUS_IO);
    assert_null(f);
    assert_non_null(strstr(err.message, "/nonexistent/model.onnx: cannot open"));
    char tmp[1024];
    kt_tmpdir(tmp, sizeof tmp, "onnx_open");
    assert_int_equal(kr_onnx_file_open(tmp, &f, &err), KEYER_STATUS_IO);
    assert_non_null(strstr(err.message, "not a regular file"));
    assert_int_equal(rmdir(tmp), 0);
    assert_int_equal(kr_onnx_file_open(NULL, &f, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kr_onnx_file_open(tmp, NULL, &err), KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kr_onnx_file_open_memory(NULL, 4, "m", NULL, &f, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kr_onnx_file_open_memory("", 0, "m", NULL, NULL, &err),
                     KEYER_STATUS_INVALID_ARGUMENT);
    /* NULL error pointer accepted. */
    assert_int_equal(kr_onnx_file_open_memory("\xff", 1, "m", NULL, &f, NULL),
                     KEYER_STATUS_BAD_DATA);
    assert_null(f);
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
        cmocka_unit_test(test_u2netp),
        cmocka_unit_test(test_tensor_encodings),
        cmocka_unit_test(test_attribute_getters),
        cmocka_unit_test(test_external_data),
        cmocka_unit_test(test_open_errors),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
