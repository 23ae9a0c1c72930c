/*
 * Attribute getters of the ONNX file reader (onnx_file.h): look an attribute up on a node,
 * check its type, and return its value, the default when it is absent.
 */
#include <stdio.h>
#include <string.h>

#include "nn/onnx/onnx_internal.h"

/* What an empty list points to (protobuf-c leaves the pointer of an empty list NULL). */
static const int64_t no_ints[1];
static const float no_floats[1];

/* Finds @p attr_name on @p node: KEYER_OK with *index = -1 when absent; BAD_DATA when present
 * with another type than @p type. */
static keyer_status find(const kr_onnx_file *f, const Onnx__NodeProto *node,
                         const char *attr_name, int type, int *index, keyer_error *err)
{
    *index = -1;
    if (!f || !node || !attr_name)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "an ONNX attribute getter needs a file, a node and a name");
    for (size_t i = 0; i < node->n_attribute; i++) {
        const Onnx__AttributeProto *a = node->attribute[i];
        if (!a->name || strcmp(a->name, attr_name) != 0)
            continue;
        if ((int)a->type != type) {
            char label[320];
            kr_onnx_node_label(node, kr_onnx_file_node_index(f, node), label, sizeof label);
            return keyer_error_set(err, KEYER_STATUS_BAD_DATA,
                                   "%s: %s: attribute '%s' is a%s %s, expected a%s %s",
                                   kr_onnx_file_name(f), label, attr_name,
                                   a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT ||
                                           a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS
                                       ? "n"
                                       : "",
                                   kr_onnx_attr_type_name((int)a->type),
                                   type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT ||
                                           type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS
                                       ? "n"
                                       : "",
                                   kr_onnx_attr_type_name(type));
        }
        *index = (int)i;
        return KEYER_OK;
    }
    return KEYER_OK;
}

/* For the getters whose values open prepared: the node's index in the graph. */
static keyer_status graph_node(const kr_onnx_file *f, const Onnx__NodeProto *node,
                               const char *attr_name, int *out, keyer_error *err)
{
    *out = kr_onnx_file_node_index(f, node);
    if (*out < 0)
        return keyer_error_set(err, KEYER_STATUS_INVALID_ARGUMENT,
                               "%s: attribute '%s' asked of a node that is not in the model's "
                               "main graph", kr_onnx_file_name(f), attr_name);
    return KEYER_OK;
}

keyer_status kr_onnx_attr_int(const kr_onnx_file *f, const Onnx__NodeProto *node,
                              const char *attr_name, int64_t def, int64_t *out, keyer_error *err)
{
    int i;
    keyer_status st = find(f, node, attr_name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, &i,
                           err);
    if (st == KEYER_OK)
        *out = i < 0 ? def : node->attribute[i]->i;
    return st;
}

keyer_status kr_onnx_attr_float(const kr_onnx_file *f, const Onnx__NodeProto *node,
                                const char *attr_name, float def, float *out, keyer_error *err)
{
    int i;
    keyer_status st = find(f, node, attr_name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, &i,
                           err);
    if (st == KEYER_OK)
        *out = i < 0 ? def : node->attribute[i]->f;
    return st;
}

keyer_status kr_onnx_attr_string(const kr_onnx_file *f, const Onnx__NodeProto *node,
                                 const char *attr_name, const char *def, const char **out,
                                 keyer_error *err)
{
    int i, n;
    keyer_status st = find(f, node, attr_name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING,
                           &i, err);
    if (st != KEYER_OK)
        return st;
    if (i < 0) {
        *out = def;
        return KEYER_OK;
    }
    st = graph_node(f, node, attr_name, &n, err);
    if (st == KEYER_OK)
        *out = kr_onnx_file_attr_string_at(f, n, (size_t)i);
    return st;
}

keyer_status kr_onnx_attr_ints(const kr_onnx_file *f, const Onnx__NodeProto *node,
                               const char *attr_name, const int64_t **out, size_t *count,
                               keyer_error *err)
{
    int i;
    keyer_status st = find(f, node, attr_name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, &i,
                           err);
    if (st != KEYER_OK)
        return st;
    *count = i < 0 ? 0 : node->attribute[i]->n_ints;
    *out = *count ? node->attribute[i]->ints : no_ints;
    return KEYER_OK;
}

keyer_status kr_onnx_attr_floats(const kr_onnx_file *f, const Onnx__NodeProto *node,
                                 const char *attr_name, const float **out, size_t *count,
                                 keyer_error *err)
{
    int i;
    keyer_status st = find(f, node, attr_name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS, &i,
                           err);
    if (st != KEYER_OK)
        return st;
    *count = i < 0 ? 0 : node->attribute[i]->n_floats;
    *out = *count ? node->attribute[i]->floats : no_floats;
    return KEYER_OK;
}

keyer_status kr_onnx_attr_tensor(const kr_onnx_file *f, const Onnx__NodeProto *node,
                                 const char *attr_name, const kr_onnx_tensor **out,
                                 keyer_error *err)
{
    int i, n;
    *out = NULL;
    keyer_status st = find(f, node, attr_name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR,
                           &i, err);
    if (st != KEYER_OK || i < 0)
        return st;
    st = graph_node(f, node, attr_name, &n, err);
    if (st == KEYER_OK)
        *out = kr_onnx_file_attr_tensor_at(f, n, (size_t)i);
    return st;
}
