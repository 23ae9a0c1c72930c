/*
 * The ONNX file reader (onnx_file.h): reads and parses a ModelProto with protobuf-c, checks the
 * opset and the graph (names, producers, topological order), decodes every initializer,
 * Constant value and tensor attribute once, and indexes values by name.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nn/onnx/onnx_internal.h"

/* Graph sizes beyond any real network; they keep int indices and size sums safe. */
#define MAX_GRAPH_ITEMS (1 << 24)

/* Per attribute of a node: what open prepared for the getters. */
typedef struct attr_slot {
    int has_tensor;
    kr_onnx_tensor tensor; /* TENSOR attributes; a Constant's value_* attribute */
    char *str;             /* STRING attributes: NUL-terminated copy */
} attr_slot;

/* An entry of the name index (open addressing). name NULL: free. */
typedef struct name_entry {
    const char *name;
    int producer; /* node index; -1 graph input or initializer */
    int init;     /* index into inits, -1 when not an initializer */
} name_entry;

typedef struct node_ref {
    const Onnx__NodeProto *node;
    int index;
} node_ref;

/* protobuf-c allocates through this: the parsed model may take at most `limit` bytes, so that
 * a small hostile file cannot make protobuf-c allocate without bound (an empty submessage of
 * two bytes becomes a struct of up to a few hundred). */
typedef struct budget {
    size_t used, limit;
    int exceeded;
} budget;

struct kr_onnx_file {
    char *name;
    budget budget;
    ProtobufCAllocator alloc;
    Onnx__ModelProto *model;
    const Onnx__GraphProto *graph;
    int opset;
    kr_onnx_tensor *inits; /* graph->n_initializer */
    size_t *attr_base;     /* per node: its first slot */
    attr_slot *slots;      /* every attribute of every node */
    size_t n_slots;
    int *constant;         /* per node: slot index of its Constant value, -1 when none */
    name_entry *names;
    size_t names_cap; /* power of two */
    node_ref *nodes;  /* sorted by node address */
    void **owned;     /* buffers decoded tensors point into */
    size_t n_owned, cap_owned;
};

static void *budget_alloc(void *data, size_t size)
{
    budget *b = data;
    if (size > b->limit - b->used) {
        b->exceeded = 1;
        return NULL;
    }
    b->used += size;
    return malloc(size ? size : 1);
}

static void budget_free(void *data, void *p)
{
    (void)data;
    free(p);
}

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static name_entry *lookup(const kr_onnx_file *f, const char *name)
{
    if (!f->names_cap)
        return NULL;
    size_t mask = f->names_cap - 1;
    for (size_t i = (size_t)hash_name(name) & mask;; i = (i + 1) & mask) {
        name_entry *e = &f->names[i];
        if (!e->name)
            return NULL;
        if (strcmp(e->name, name) == 0)
            return e;
    }
}

/* Inserts @p name; returns the existing entry instead when there is one (*fresh = 0). The
 * table is sized at open to hold every value, so it never fills. */
static name_entry *insert(kr_onnx_file *f, const char *name, int *fresh)
{
    size_t mask = f->names_cap - 1;
    for (size_t i = (size_t)hash_name(name) & mask;; i = (i + 1) & mask) {
        name_entry *e = &f->names[i];
        if (!e->name) {
            e->name = name;
            e->producer = -1;
            e->init = -1;
            *fresh = 1;
            return e;
        }
        if (strcmp(e->name, name) == 0) {
            *fresh = 0;
            return e;
        }
    }
}

static keyer_status keep(kr_onnx_file *f, void *buf, keyer_error *err)
{
    if (!buf)
        return KEYER_OK;
    if (f->n_owned == f->cap_owned) {
        size_t cap = f->cap_owned ? 2 * f->cap_owned : 64;
        void **p = realloc(f->owned, cap * sizeof *p);
        if (!p) {
            free(buf);
            return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory",
                                   f->name);
        }
        f->owned = p;
        f->cap_owned = cap;
    }
    f->owned[f->n_owned++] = buf;
    return KEYER_OK;
}

static int is_default_domain(const char *d)
{
    return !d || !d[0] || strcmp(d, "ai.onnx") == 0;
}

static keyer_status check_opset(kr_onnx_file *f, keyer_error *err)
{
    const Onnx__ModelProto *m = f->model;
    int found = 0;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (!is_default_domain(o->domain))
            continue; /* other domains may be imported; nodes using them are refused */
        if (!o->has_version)
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                   "%s: the default-domain opset import has no version",
                                   f->name);
        if (found && o->version != f->opset)
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                   "%s: two default-domain opset imports (%d and %lld)", f->name,
                                   f->opset, (long long)o->version);
        if (o->version < 7 || o->version > 21)
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "%s: opset %lld of the default domain; keyer reads opsets 7 "
                                   "to 21", f->name, (long long)o->version);
        f->opset = (int)o->version;
        found = 1;
    }
    if (!found)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "%s: no opset import for the default ONNX domain", f->name);
    return KEYER_OK;
}

static int cmp_node_ref(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const node_ref *)a)->node;
    uintptr_t y = (uintptr_t)((const node_ref *)b)->node;
    return x < y ? -1 : x > y;
}

/* Allocates the per-node and per-value tables. */
static keyer_status alloc_tables(kr_onnx_file *f, keyer_error *err)
{
    const Onnx__GraphProto *g = f->graph;
    if (g->n_node > MAX_GRAPH_ITEMS || g->n_initializer > MAX_GRAPH_ITEMS ||
        g->n_input > MAX_GRAPH_ITEMS || g->n_output > MAX_GRAPH_ITEMS)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: the graph has more than %d nodes, initializers, inputs or "
                               "outputs", f->name, MAX_GRAPH_ITEMS);
    size_t values = g->n_initializer + g->n_input, attrs = 0;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (n->n_output > MAX_GRAPH_ITEMS || n->n_attribute > MAX_GRAPH_ITEMS ||
            values > MAX_GRAPH_ITEMS || attrs > MAX_GRAPH_ITEMS)
            return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                                   "%s: the graph has more than %d values or attributes",
                                   f->name, MAX_GRAPH_ITEMS);
        values += n->n_output;
        attrs += n->n_attribute;
    }
    size_t cap = 16;
    while (cap < 2 * values)
        cap *= 2;
    f->names_cap = cap;
    f->names = calloc(cap, sizeof *f->names);
    f->inits = calloc(g->n_initializer + 1, sizeof *f->inits);
    f->attr_base = calloc(g->n_node + 1, sizeof *f->attr_base);
    f->slots = calloc(attrs + 1, sizeof *f->slots);
    f->n_slots = f->slots ? attrs : 0;
    f->constant = calloc(g->n_node + 1, sizeof *f->constant);
    f->nodes = calloc(g->n_node + 1, sizeof *f->nodes);
    if (!f->names || !f->inits || !f->attr_base || !f->slots || !f->constant || !f->nodes)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY,
                               "%s: cannot allocate the tables of %zu values", f->name, values);
    size_t base = 0;
    for (size_t i = 0; i < g->n_node; i++) {
        f->attr_base[i] = base;
        base += g->node[i]->n_attribute;
        f->constant[i] = -1;
        f->nodes[i].node = g->node[i];
        f->nodes[i].index = (int)i;
    }
    if (g->n_node)
        qsort(f->nodes, g->n_node, sizeof *f->nodes, cmp_node_ref);
    return KEYER_OK;
}

static keyer_status read_initializers(kr_onnx_file *f, const char *dir, keyer_error *err)
{
    const Onnx__GraphProto *g = f->graph;
    if (g->n_sparse_initializer)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: the graph has %zu sparse initializers (not supported)",
                               f->name, g->n_sparse_initializer);
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *tp = g->initializer[i];
        if (!tp->name || !tp->name[0])
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                   "%s: initializer #%zu has no name", f->name, i);
        char what[320];
        snprintf(what, sizeof what, "initializer '%s'", tp->name);
        int fresh;
        name_entry *e = insert(f, tp->name, &fresh);
        if (!fresh)
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA, "%s: two initializers named '%s'",
                                   f->name, tp->name);
        e->init = (int)i;
        void *owned;
        keyer_status st = kr_onnx_tensor_decode(tp, f->name, what, dir, &f->inits[i], &owned,
                                                err);
        if (st == KEYER_OK)
            st = keep(f, owned, err);
        if (st != KEYER_OK)
            return st;
    }
    for (size_t i = 0; i < g->n_input; i++) {
        const char *name = g->input[i]->name;
        if (!name || !name[0])
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA, "%s: graph input #%zu has no name",
                                   f->name, i);
        int fresh;
        name_entry *e = insert(f, name, &fresh);
        /* An input may share its name with an initializer (its default value, IR < 4). */
        if (!fresh && e->init < 0)
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA, "%s: two graph inputs named '%s'",
                                   f->name, name);
    }
    return KEYER_OK;
}

/* The value of Constant node @p i (index @p i, label @p label) into its attribute's slot. */
static keyer_status read_constant(kr_onnx_file *f, int i, const char *label, keyer_error *err)
{
    const Onnx__NodeProto *n = f->graph->node[i];
    if (n->n_attribute != 1)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "%s: %s: a Constant needs exactly one value attribute, it has %zu",
                               f->name, label, n->n_attribute);
    if (n->n_output != 1)
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                               "%s: %s: a Constant has one output, not %zu", f->name, label,
                               n->n_output);
    const Onnx__AttributeProto *a = n->attribute[0];
    size_t s = f->attr_base[i];
    attr_slot *slot = &f->slots[s];
    kr_onnx_tensor *t = &slot->tensor;
    const char *an = a->name;
    int type = a->type;
    if (strcmp(an, "value") == 0 && type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR) {
        /* decoded with the other tensor attributes */
    } else if (strcmp(an, "value_float") == 0 &&
               type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) {
        *t = (kr_onnx_tensor){.name = "", .data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
                              .rank = 0, .count = 1, .elem_size = 4, .data = &a->f};
    } else if (strcmp(an, "value_int") == 0 &&
               type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) {
        *t = (kr_onnx_tensor){.name = "", .data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64,
                              .rank = 0, .count = 1, .elem_size = 8, .data = &a->i};
    } else if (strcmp(an, "value_floats") == 0 &&
               type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS) {
        *t = (kr_onnx_tensor){.name = "", .data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
                              .rank = 1, .dims = {(int64_t)a->n_floats}, .count = a->n_floats,
                              .elem_size = 4, .data = a->n_floats ? a->floats : NULL};
    } else if (strcmp(an, "value_ints") == 0 &&
               type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) {
        *t = (kr_onnx_tensor){.name = "", .data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64,
                              .rank = 1, .dims = {(int64_t)a->n_ints}, .count = a->n_ints,
                              .elem_size = 8, .data = a->n_ints ? a->ints : NULL};
    } else {
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: %s: Constant value attribute '%s' of type %s is not "
                               "supported (value, value_float(s), value_int(s) are)",
                               f->name, label, an, kr_onnx_attr_type_name(type));
    }
    slot->has_tensor = 1;
    f->constant[i] = (int)s;
    return KEYER_OK;
}

/* Checks node @p i's operator, domain and attributes, and prepares its attribute slots. */
static keyer_status read_node(kr_onnx_file *f, int i, const char *dir, keyer_error *err)
{
    const Onnx__NodeProto *n = f->graph->node[i];
    char label[320];
    kr_onnx_node_label(n, i, label, sizeof label);
    if (!n->op_type || !n->op_type[0])
        return keyer_error_set(err, KEYER_STATUS_BAD_DATA, "%s: %s has no operator type",
                               f->name, label);
    if (!is_default_domain(n->domain))
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: %s is in operator domain '%s'; keyer reads only the default "
                               "ONNX domain", f->name, label, n->domain);
    for (size_t j = 0; j < n->n_attribute; j++) {
        const Onnx__AttributeProto *a = n->attribute[j];
        if (!a->name || !a->name[0])
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                   "%s: %s: attribute #%zu has no name", f->name, label, j);
        for (size_t k = 0; k < j; k++)
            if (strcmp(n->attribute[k]->name, a->name) == 0)
                return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                       "%s: %s: two attributes named '%s'", f->name, label,
                                       a->name);
        if (!a->has_type || a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                   "%s: %s: attribute '%s' has no type", f->name, label,
                                   a->name);
        if (a->ref_attr_name && a->ref_attr_name[0])
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                   "%s: %s: attribute '%s' refers to a function attribute "
                                   "outside a function", f->name, label, a->name);
        attr_slot *slot = &f->slots[f->attr_base[i] + j];
        if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING) {
            const ProtobufCBinaryData *s = &a->s;
            if (s->len && memchr(s->data, 0, s->len))
                return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                       "%s: %s: string attribute '%s' holds a NUL byte", f->name,
                                       label, a->name);
            slot->str = malloc(s->len + 1);
            if (!slot->str)
                return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory",
                                       f->name);
            if (s->len)
                memcpy(slot->str, s->data, s->len);
            slot->str[s->len] = '\0';
        } else if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR) {
            if (!a->t)
                return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                       "%s: %s: tensor attribute '%s' has no tensor", f->name,
                                       label, a->name);
            char what[700];
            snprintf(what, sizeof what, "%s: attribute '%s'", label, a->name);
            void *owned;
            keyer_status st = kr_onnx_tensor_decode(a->t, f->name, what, dir, &slot->tensor,
                                                    &owned, err);
            if (st == KEYER_OK)
                st = keep(f, owned, err);
            if (st != KEYER_OK)
                return st;
            slot->has_tensor = 1;
        }
    }
    if (strcmp(n->op_type, "Constant") == 0)
        return read_constant(f, i, label, err);
    return KEYER_OK;
}

/* Registers every node output (each value produced once), then checks that every node input
 * is produced before its node and that every graph output is produced. */
static keyer_status check_graph(kr_onnx_file *f, keyer_error *err)
{
    const Onnx__GraphProto *g = f->graph;
    char label[320];
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; k < n->n_output; k++) {
            const char *o = n->output[k];
            if (!o[0])
                continue; /* an optional output left out */
            int fresh;
            name_entry *e = insert(f, o, &fresh);
            if (!fresh) {
                kr_onnx_node_label(n, (int)i, label, sizeof label);
                return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                       "%s: %s: output '%s' is already produced by %s", f->name,
                                       label, o,
                                       e->producer >= 0 ? "an earlier node"
                                       : e->init >= 0   ? "an initializer"
                                                        : "a graph input");
            }
            e->producer = (int)i;
        }
    }
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; k < n->n_input; k++) {
            const char *in = n->input[k];
            if (!in[0])
                continue; /* an optional input left out */
            const name_entry *e = lookup(f, in);
            if (!e) {
                kr_onnx_node_label(n, (int)i, label, sizeof label);
                return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                       "%s: %s: input '%s' is produced by no node, initializer "
                                       "or graph input", f->name, label, in);
            }
            if (e->producer >= (int)i) {
                kr_onnx_node_label(n, (int)i, label, sizeof label);
                char later[320];
                kr_onnx_node_label(g->node[e->producer], e->producer, later, sizeof later);
                return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                       "%s: %s: input '%s' comes from %s, %s (a cycle, or nodes "
                                       "out of topological order)", f->name, label, in, later,
                                       e->producer == (int)i ? "itself" : "which comes later");
            }
        }
    }
    for (size_t i = 0; i < g->n_output; i++) {
        const char *o = g->output[i]->name;
        if (!o || !o[0])
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                   "%s: graph output #%zu has no name", f->name, i);
        if (!lookup(f, o))
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                   "%s: graph output '%s' is produced by nothing", f->name, o);
    }
    return KEYER_OK;
}

keyer_status kr_onnx_file_open_memory(const void *data, size_t size, const char *name,
                                      const char *dir, kr_onnx_file **out, keyer_error *err)
{
    if (!out)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "kr_onnx_file_open_memory needs an output pointer");
    *out = NULL;
    if (!name)
        name = "ONNX model";
    if (!data && size)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT, "%s: NULL data of %zu bytes",
                               name, size);
    if (size > KR_ONNX_MAX_FILE_BYTES)
        return keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                               "%s: %zu bytes; keyer reads ONNX files up to %zu bytes", name,
                               size, (size_t)KR_ONNX_MAX_FILE_BYTES);
    keyer_status st;
    kr_onnx_file *f = calloc(1, sizeof *f);
    if (!f)
        return keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
    f->name = strdup(name);
    if (!f->name) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", name);
        goto fail;
    }
    st = kr_onnx_wire_check(data, size, f->name, err);
    if (st != KEYER_OK)
        goto fail;
    /* The parsed model may take 4 times the file plus 256 MiB: raw data costs its own size. */
    f->budget.limit = size > (SIZE_MAX - ((size_t)256 << 20)) / 4 ? SIZE_MAX
                                                                 : 4 * size + ((size_t)256 << 20);
    f->alloc = (ProtobufCAllocator){budget_alloc, budget_free, &f->budget};
    static const uint8_t empty[1];
    f->model = onnx__model_proto__unpack(&f->alloc, size, size ? data : empty);
    if (!f->model && f->budget.exceeded) {
        st = keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                             "%s: parsing the protobuf needs more than %zu bytes of memory for "
                             "a %zu-byte file", f->name, f->budget.limit, size);
        goto fail;
    }
    if (!f->model) {
        st = keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                             "%s: not a valid ONNX model (the protobuf is truncated or "
                             "malformed)", f->name);
        goto fail;
    }
    st = check_opset(f, err);
    if (st != KEYER_OK)
        goto fail;
    f->graph = f->model->graph;
    if (!f->graph) {
        st = keyer_error_set(err, KEYER_STATUS_BAD_DATA, "%s: the model has no graph", f->name);
        goto fail;
    }
    st = alloc_tables(f, err);
    if (st == KEYER_OK)
        st = read_initializers(f, dir, err);
    for (size_t i = 0; st == KEYER_OK && i < f->graph->n_node; i++)
        st = read_node(f, (int)i, dir, err);
    if (st == KEYER_OK)
        st = check_graph(f, err);
    if (st != KEYER_OK)
        goto fail;
    *out = f;
    return KEYER_OK;
fail:
    kr_onnx_file_destroy(&f);
    return st;
}

keyer_status kr_onnx_file_open(const char *path, kr_onnx_file **out, keyer_error *err)
{
    if (!out || !path)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "kr_onnx_file_open needs a path and an output pointer");
    *out = NULL;
    keyer_status st;
    void *data = NULL;
    char *dir = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return keyer_error_set(err, KEYER_STATUS_IO, "%s: cannot open: %s", path,
                               strerror(errno));
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0) {
        st = keyer_error_set(err, KEYER_STATUS_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = keyer_error_set(err, KEYER_STATUS_IO, "%s: not a regular file", path);
        goto done;
    }
    if (sb.st_size < 0 || (unsigned long long)sb.st_size > KR_ONNX_MAX_FILE_BYTES) {
        st = keyer_error_set(err, KEYER_STATUS_UNSUPPORTED,
                             "%s: the file is %lld bytes; keyer reads ONNX files up to %zu "
                             "bytes", path, (long long)sb.st_size,
                             (size_t)KR_ONNX_MAX_FILE_BYTES);
        goto done;
    }
    size_t len = (size_t)sb.st_size;
    data = malloc(len ? len : 1);
    if (!data) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes",
                             path, len);
        goto done;
    }
    if (fread(data, 1, len, fp) != len) {
        st = keyer_error_set(err, KEYER_STATUS_IO, "%s: cannot read %zu bytes%s", path, len,
                             ferror(fp) ? "" : " (the file shrank while reading)");
        goto done;
    }
    /* External data is read relative to the model's folder. */
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) : 0;
    dir = slash ? strndup(path, dl ? dl : 1) : strdup(".");
    if (!dir) {
        st = keyer_error_set(err, KEYER_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
        goto done;
    }
    st = kr_onnx_file_open_memory(data, len, path, dir, out, err);
done:
    fclose(fp);
    free(data);
    free(dir);
    return st;
}

const Onnx__ModelProto *kr_onnx_file_model(const kr_onnx_file *f)
{
    return f->model;
}

const Onnx__GraphProto *kr_onnx_file_graph(const kr_onnx_file *f)
{
    return f->graph;
}

int kr_onnx_file_opset(const kr_onnx_file *f)
{
    return f->opset;
}

const char *kr_onnx_file_name(const kr_onnx_file *f)
{
    return f->name;
}

const kr_onnx_tensor *kr_onnx_file_initializer(const kr_onnx_file *f, const char *name)
{
    if (!name)
        return NULL;
    const name_entry *e = lookup(f, name);
    return e && e->init >= 0 ? &f->inits[e->init] : NULL;
}

int kr_onnx_file_node_index(const kr_onnx_file *f, const Onnx__NodeProto *node)
{
    if (!node || !f->graph->n_node)
        return -1;
    node_ref key = {node, 0};
    const node_ref *r = bsearch(&key, f->nodes, f->graph->n_node, sizeof *f->nodes,
                                cmp_node_ref);
    return r ? r->index : -1;
}

const kr_onnx_tensor *kr_onnx_file_constant(const kr_onnx_file *f, const Onnx__NodeProto *node)
{
    int i = kr_onnx_file_node_index(f, node);
    if (i < 0 || f->constant[i] < 0)
        return NULL;
    return &f->slots[f->constant[i]].tensor;
}

int kr_onnx_file_producer(const kr_onnx_file *f, const char *name)
{
    const name_entry *e = name ? lookup(f, name) : NULL;
    return e ? e->producer : -2;
}

const kr_onnx_tensor *kr_onnx_file_attr_tensor_at(const kr_onnx_file *f, int node, size_t attr)
{
    const attr_slot *s = &f->slots[f->attr_base[node] + attr];
    return s->has_tensor ? &s->tensor : NULL;
}

const char *kr_onnx_file_attr_string_at(const kr_onnx_file *f, int node, size_t attr)
{
    return f->slots[f->attr_base[node] + attr].str;
}

void kr_onnx_file_destroy(kr_onnx_file **pf)
{
    if (!pf || !*pf)
        return;
    kr_onnx_file *f = *pf;
    for (size_t i = 0; i < f->n_slots; i++)
        free(f->slots[i].str);
    for (size_t i = 0; i < f->n_owned; i++)
        free(f->owned[i]);
    free(f->owned);
    free(f->nodes);
    free(f->names);
    free(f->constant);
    free(f->slots);
    free(f->attr_base);
    free(f->inits);
    if (f->model)
        onnx__model_proto__free_unpacked(f->model, &f->alloc);
    free(f->name);
    free(f);
    *pf = NULL;
}
