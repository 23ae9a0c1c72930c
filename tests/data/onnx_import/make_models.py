#!/usr/bin/python3
"""Makes the small ONNX models of tests/unit/test_onnx_import.c with python3-onnx's helper API
(Debian's python3-onnx; run with /usr/bin/python3 from this folder). The outputs are committed;
rerunning gives the same bytes.

dynamic.onnx        x [N,2,H,W] (N, H, W dynamic) -> Conv 3x3 pads 1 -> Relu -> y [N,3,H,W]
shape_subgraph.onnx x [1,4,6,8] -> Reshape to Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])
                    (the PyTorch flatten idiom) -> Mul 2 -> y [1,192]
unsupported.onnx    x [1,4] -> TopK (not mapped by keyer) -> values
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(model, name):
    onnx.checker.check_model(model)
    onnx.save(model, name)


def dynamic():
    w = np.zeros((3, 2, 3, 3), np.float32)
    for o in range(3):
        for i in range(2):
            for ky in range(3):
                for kx in range(3):
                    w[o, i, ky, kx] = (o + 1) * (i + 1) * (ky * 3 + kx + 1) / 100.0
    b = np.array([0.0, 0.1, 0.2], np.float32)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv_0", pads=[1, 1, 1, 1],
                          kernel_shape=[3, 3]),
         helper.make_node("Relu", ["c"], ["y"], name="relu_0")],
        "dynamic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "dynamic.onnx")


def shape_subgraph():
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape_0"),
        helper.make_node("Constant", [], ["zero"], name="const_0",
                         value=numpy_helper.from_array(np.array(0, np.int64))),
        helper.make_node("Gather", ["s", "zero"], ["n"], name="gather_0", axis=0),
        helper.make_node("Constant", [], ["axes"], name="const_1",
                         value=numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"], name="unsqueeze_0"),
        helper.make_node("Constant", [], ["minus1"], name="const_2",
                         value=numpy_helper.from_array(np.array([-1], np.int64))),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], name="concat_0", axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["flat"], name="reshape_0"),
        helper.make_node("Constant", [], ["two"], name="const_3",
                         value=numpy_helper.from_array(np.array(2.0, np.float32))),
        helper.make_node("Mul", ["flat", "two"], ["y"], name="mul_0"),
    ]
    g = helper.make_graph(
        nodes, "shape_subgraph",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 192])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "shape_subgraph.onnx")


def unsupported():
    g = helper.make_graph(
        [helper.make_node("TopK", ["x", "k"], ["values", "indices"], name="topk_0")],
        "unsupported",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("values", TensorProto.FLOAT, [1, 2])],
        [numpy_helper.from_array(np.array([2], np.int64), "k")])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "unsupported.onnx")


if __name__ == "__main__":
    dynamic()
    shape_subgraph()
    unsupported()
