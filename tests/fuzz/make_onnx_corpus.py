#!/usr/bin/python3
"""Writes the ONNX reader's corpus (tests/fuzz/corpus/onnx/): small valid models (fuzzing seeds
and the unit test's inputs) and hand-made broken files, each of which the reader must refuse
with the status and message tests/fuzz/test_onnx_corpus.c expects.

Run with Debian's python3 and python3-onnx (1.12):
    /usr/bin/python3 tests/fuzz/make_onnx_corpus.py [OUTDIR]
The output is deterministic; commit it. Every file is listed in test_onnx_corpus.c, which fails
when one is missing or behaves differently.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "corpus", "onnx")


def model(nodes, inputs, outputs, inits=(), opset=13, domains=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    m = helper.make_model(g, opset_imports=ops, producer_name="make_onnx_corpus")
    m.ir_version = 7
    return m


def vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def write(name, data):
    if not isinstance(data, bytes):
        data = data.SerializeToString()
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def conv_relu(opset=13):
    """x[1,2,5,5] -> Conv(3x3, pads 1) -> Relu -> y. Weights in raw_data."""
    w = numpy_helper.from_array(np.arange(3 * 2 * 3 * 3, dtype=np.float32).reshape(3, 2, 3, 3)
                                / 10.0, "w")
    b = numpy_helper.from_array(np.array([0.5, -0.5, 0.25], dtype=np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv",
                              kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    return model(nodes, [vi("x", [1, 2, 5, 5])], [vi("y", [1, 3, 5, 5])], [w, b], opset)


def attrs_model():
    """Every attribute kind the getters read, every Constant form, and initializers in every
    typed field (the unit test checks the decoded values)."""
    inits = [
        helper.make_tensor("f_typed", TensorProto.FLOAT, [2], [1.5, -2.0]),
        helper.make_tensor("f_raw", TensorProto.FLOAT, [2, 2],
                           np.array([1, 2, 3, 4], dtype=np.float32).tobytes(), raw=True),
        helper.make_tensor("i64", TensorProto.INT64, [3], [1, -2, 1 << 40]),
        helper.make_tensor("i32", TensorProto.INT32, [2], [7, -8]),
        helper.make_tensor("i8", TensorProto.INT8, [3], [-128, 0, 127]),
        helper.make_tensor("u8", TensorProto.UINT8, [2], [0, 255]),
        helper.make_tensor("b", TensorProto.BOOL, [2], [True, False]),
        # float16: helper stores the bit patterns in int32_data (1.0 = 0x3c00, -2.0 = 0xc000)
        helper.make_tensor("h", TensorProto.FLOAT16, [2], np.array([1.0, -2.0], np.float16)),
        helper.make_tensor("d", TensorProto.DOUBLE, [1], [0.125]),
        helper.make_tensor("u32", TensorProto.UINT32, [1], [4000000000]),
        helper.make_tensor("scalar", TensorProto.FLOAT, [], [3.0]),
        helper.make_tensor("empty", TensorProto.FLOAT, [0, 3], []),
    ]
    nodes = [
        helper.make_node("Constant", [], ["k_tensor"], name="k_tensor",
                         value=helper.make_tensor("v", TensorProto.INT64, [2], [4, 5])),
        helper.make_node("Constant", [], ["k_float"], name="k_float", value_float=0.75),
        helper.make_node("Constant", [], ["k_ints"], name="k_ints", value_ints=[1, 2, 3]),
        helper.make_node("Constant", [], ["k_int"], name="k_int", value_int=-9),
        helper.make_node("Constant", [], ["k_floats"], name="k_floats", value_floats=[0.5, 1.5]),
        helper.make_node("LeakyRelu", ["x"], ["a"], name="leaky", alpha=0.2),
        helper.make_node("MaxPool", ["a"], ["p"], name="pool", kernel_shape=[2, 2],
                         strides=[2, 2], ceil_mode=1),
        helper.make_node("Resize", ["p", "", "", "k_tensor"], ["r"], name="resize",
                         mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
        helper.make_node("ConstantOfShape", ["k_ints"], ["z"], name="cos",
                         value=helper.make_tensor("val", TensorProto.FLOAT, [1], [0.25])),
        helper.make_node("Custom", ["r", "z"], ["y"], name="custom",
                         scales=[0.5, 2.0], note="hello"),
    ]
    return model(nodes, [vi("x", [1, 1, 4, 4])], [vi("y", None)], inits, opset=13)


def with_external(location, offset=8, length=None, data=None):
    """x + w, with w (4 floats) stored outside the model."""
    w = TensorProto()
    w.name = "w"
    w.data_type = TensorProto.FLOAT
    w.dims.extend([4])
    w.data_location = TensorProto.EXTERNAL
    entries = [("location", location), ("offset", str(offset))]
    if length is not None:
        entries.append(("length", str(length)))
    for k, v in entries:
        e = w.external_data.add()
        e.key, e.value = k, v
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    return model(nodes, [vi("x", [4])], [vi("y", [4])], [w])


def nest(depth):
    """A model whose node carries a graph attribute nested @p depth levels deep."""
    g = helper.make_graph([], "leaf", [], [])
    for _ in range(depth):
        n = helper.make_node("If", ["c"], [], then_branch=g)  # one branch: size stays linear
        g = helper.make_graph([n], "nest", [], [])
    return model([helper.make_node("If", ["x"], ["y"], name="if", then_branch=g)],
                 [vi("x", [1], TensorProto.BOOL)], [vi("y", None)])


def import_models():
    """Files that open but that the importer must refuse (regressions of fuzzing findings:
    undefined behaviour in the importer's arithmetic)."""
    x = vi("x", [1, 3, 4, 4])
    y = vi("y", None)
    i64 = TensorProto.INT64
    # Reshape: two shape entries of 2^40 each are in range, their product overflows int64.
    shape = helper.make_tensor("shape", i64, [2], [1 << 40, 1 << 40])
    write("bad_import_reshape_overflow.onnx",
          model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")], [x], [y],
                [shape]))
    # QuantizeLinear folded over constants: 0 / 0 is NaN (no uint8 value), as is x / NaN.
    for name, scale in (("zero", 0.0), ("nan", float("nan"))):
        inits = [helper.make_tensor("q_x", TensorProto.FLOAT, [2], [0.0, 1.0]),
                 helper.make_tensor("q_scale", TensorProto.FLOAT, [], [scale]),
                 helper.make_tensor("q_zp", TensorProto.UINT8, [], [0])]
        nodes = [helper.make_node("QuantizeLinear", ["q_x", "q_scale", "q_zp"], ["q"],
                                  name="quantize"),
                 helper.make_node("DequantizeLinear", ["q", "q_scale", "q_zp"], ["dq"],
                                  name="dequantize"),
                 helper.make_node("Add", ["x", "dq"], ["y"], name="add")]
        write("bad_import_quantize_%s_scale.onnx" % name, model(nodes, [vi("x", [2])], [y],
                                                                 inits))
    # Pad (opset 13, pads as an input): a pad of INT64_MIN cannot be negated; pads of -2^62
    # and -2^62 - 8 overflow the size arithmetic (4 - 2^62 - 2^62 - 8 < INT64_MIN).
    for name, pads in (("int64_min", [0, 0, -(1 << 63), 0, 0, 0, 0, 0]),
                       ("huge_negative", [0, 0, -(1 << 62), 0, 0, 0, -(1 << 62) - 8, 0])):
        write("bad_import_pad_%s.onnx" % name,
              model([helper.make_node("Pad", ["x", "pads"], ["y"], name="pad")], [x], [y],
                    [helper.make_tensor("pads", i64, [8], pads)]))
    # Split (opset 13, sizes as an input): parts of 2^62 and 2^62 overflow their sum.
    nodes = [helper.make_node("Split", ["x", "split"], ["s0", "y"], name="split", axis=1)]
    write("bad_import_split_overflow.onnx",
          model(nodes, [x], [y], [helper.make_tensor("split", i64, [2], [1 << 62, 1 << 62])]))
    # Folded integer Pow past int64 (10^30): casting the double result was undefined.
    inits = [helper.make_tensor("base", i64, [4], [1, 3, 4, 10]),
             helper.make_tensor("exp", i64, [4], [1, 1, 1, 30])]
    nodes = [helper.make_node("Pow", ["base", "exp"], ["shape"], name="pow"),
             helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")]
    write("bad_import_pow_overflow.onnx", model(nodes, [x], [y], inits))
    # Folded Range from 0 by 2^62 to 2^64 (a float limit): 2 * 2^62 overflowed int64.
    inits = [helper.make_tensor("r_start", i64, [], [0]),
             helper.make_tensor("r_limit", TensorProto.FLOAT, [], [2.0 ** 64]),
             helper.make_tensor("r_delta", i64, [], [1 << 62])]
    nodes = [helper.make_node("Range", ["r_start", "r_limit", "r_delta"], ["shape"],
                              name="range"),
             helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")]
    write("bad_import_range_overflow.onnx", model(nodes, [x], [y], inits))
    # Resize to sizes holding INT64_MAX (2^63 as a double): casting it back was undefined.
    nodes = [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="resize")]
    write("bad_import_resize_sizes.onnx",
          model(nodes, [x], [y], [helper.make_tensor("sizes", i64, [4],
                                                     [1, 3, (1 << 63) - 1, 8])]))
    # A node with no outputs (ArgMax names its tensors after its first output).
    nodes = [helper.make_node("ArgMax", ["x"], [], name="argmax", axis=1),
             helper.make_node("Relu", ["x"], ["y"], name="relu")]
    write("bad_import_no_output.onnx", model(nodes, [x], [y]))


def main():
    os.makedirs(OUT, exist_ok=True)
    # ---- valid seeds -------------------------------------------------------------------------
    good = conv_relu()
    write("ok_conv_relu.onnx", good)
    write("ok_opset7.onnx", conv_relu(7))
    write("ok_opset21.onnx", conv_relu(21))
    write("ok_attrs.onnx", attrs_model())
    ext = with_external("ok_external.weights", offset=8, length=16)
    write("ok_external.onnx", ext)
    write("ok_external.weights", b"HEADER!!" + np.array([1, 2, 3, 4], np.float32).tobytes())
    # An unknown operator loads in the reader; the importer refuses it, naming it.
    m = conv_relu()
    m.graph.node[1].op_type = "NoSuchOperator"
    write("ok_unknown_operator.onnx", m)

    # ---- broken files ------------------------------------------------------------------------
    raw = good.SerializeToString()
    write("bad_truncated.onnx", raw[: len(raw) // 2])
    write("bad_truncated_varint.onnx", bytes([0x08, 0xff]))  # ir_version, varint cut short
    # Wrong wire types: ModelProto.graph (field 7) as a varint; ir_version (field 1) as bytes.
    write("bad_wire_graph.onnx", bytes([0x38, 0x01]) + raw)
    write("bad_wire_ir_version.onnx", bytes([0x0a, 0x01, 0x00]) + raw)
    write("bad_group.onnx", bytes([0x0b]) + raw)  # field 1 as a start-group
    write("bad_nesting.onnx", nest(30))

    m = conv_relu()
    m.graph.initializer[0].raw_data = m.graph.initializer[0].raw_data[:-4]
    write("bad_short_initializer.onnx", m)
    m = conv_relu()
    m.graph.initializer[1].ClearField("raw_data")
    m.graph.initializer[1].float_data.extend([1.0, 2.0])
    write("bad_short_float_data.onnx", m)
    m = conv_relu()
    m.graph.initializer[0].dims[1] = -2
    write("bad_negative_dim.onnx", m)
    m = conv_relu()
    del m.graph.initializer[0].dims[:]
    m.graph.initializer[0].dims.extend([1 << 40, 1 << 40, 3, 3])
    write("bad_huge_dims.onnx", m)
    m = conv_relu()
    m.graph.initializer[0].data_type = TensorProto.STRING
    write("bad_string_tensor.onnx", m)
    m = conv_relu()
    m.graph.initializer[1].data_type = TensorProto.INT64
    m.graph.initializer[1].ClearField("raw_data")
    m.graph.initializer[1].float_data.extend([1.0, 2.0, 3.0])
    write("bad_type_mismatch.onnx", m)
    m = conv_relu()
    t = m.graph.initializer[1]
    t.data_type = TensorProto.INT8
    t.ClearField("raw_data")
    t.int32_data.extend([1, 2, 300])
    write("bad_int8_range.onnx", m)

    m = conv_relu()
    m.graph.node[1].input[0] = "nothing_makes_this"
    write("bad_unproduced_input.onnx", m)
    # A cycle: relu feeds conv, conv feeds relu.
    m = conv_relu()
    m.graph.node[0].input[0] = "y"
    write("bad_cycle.onnx", m)
    m = conv_relu()
    m.graph.node[1].output[0] = "c"
    write("bad_two_producers.onnx", m)
    m = conv_relu()
    m.graph.output[0].name = "unmade"
    write("bad_unproduced_output.onnx", m)
    m = conv_relu()
    m.graph.node[0].ClearField("op_type")
    write("bad_no_op_type.onnx", m)
    m = conv_relu()
    m.graph.node[1].domain = "com.example"
    write("bad_unknown_domain.onnx", m)
    m = conv_relu()
    m.graph.node[0].attribute.append(helper.make_attribute("pads", [0, 0, 0, 0]))
    write("bad_duplicate_attribute.onnx", m)
    m = conv_relu()
    m.graph.node[1].attribute.append(helper.make_attribute("mode", "a\0b"))
    write("bad_nul_string_attribute.onnx", m)

    write("bad_opset6.onnx", conv_relu(6))
    write("bad_opset22.onnx", conv_relu(22))
    m = conv_relu()
    del m.opset_import[:]
    m.opset_import.append(helper.make_opsetid("ai.onnx.ml", 3))
    write("bad_no_default_opset.onnx", m)
    m = conv_relu()
    m.ClearField("graph")
    write("bad_no_graph.onnx", m)

    write("bad_external_outside.onnx", with_external("../outside.weights"))
    write("bad_external_absolute.onnx", with_external("/etc/passwd"))
    write("bad_external_missing.onnx", with_external("missing.weights"))
    write("bad_external_short.onnx", with_external("ok_external.weights", offset=16))
    write("bad_external_length.onnx", with_external("ok_external.weights", length=12))
    import_models()


if __name__ == "__main__":
    main()
