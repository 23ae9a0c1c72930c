#!/usr/bin/python3
"""Makes the tiny ONNX segmenters of the main job's end-to-end test (tests/cli/run_onnx_models.sh).

Run with Debian's python3-onnx (1.12): /usr/bin/python3 tests/data/onnx/mainjob/make_models.py
It rewrites tiny_seg.onnx and tiny_classes.onnx beside itself; the output is the same bytes on
every run (fixed weights, no random numbers, no producer version in the files).

Both take a float image "image" of shape [1, 3, height, width] (NCHW, RGB in [0,1] standardised
per channel with mean 0.5 and std 0.25), with height and width dynamic, so the description has
to give the size. Their person "logit" is the same per-pixel linear function of the colour,
z = 1.5*r + 0.5*g - 2*b + 0.25 (a 1x1 convolution):
  tiny_seg.onnx      outputs "mask" = sigmoid(z) [1,1,H,W] (a probability) and "logits" = z;
  tiny_classes.onnx  outputs "scores" [1,2,H,W] = (0, z): a two-class segmenter whose class 1
                     has the softmax probability exp(z) / (1 + exp(z)) = sigmoid(z).
So keying with "mask" as a probability, "logits" as logits and "scores" as classes with
person_class 1 must give the same matte, and person_class 0 its inverse.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
W = np.array([1.5, 0.5, -2.0], dtype=np.float32)
B = np.float32(0.25)


def image_input():
    return helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, "height", "width"])


def save(graph, name):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)],
                              producer_name="keyer tests/data/onnx/mainjob/make_models.py")
    model.ir_version = 6
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, name))


def tiny_seg():
    w = numpy_helper.from_array(W.reshape(1, 3, 1, 1), "w")
    b = numpy_helper.from_array(np.array([B], dtype=np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["image", "w", "b"], ["logits"], name="person_logit",
                         kernel_shape=[1, 1]),
        helper.make_node("Sigmoid", ["logits"], ["mask"], name="person_probability"),
    ]
    outs = [helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, "height", "width"]),
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1, "height", "width"])]
    save(helper.make_graph(nodes, "tiny_seg", [image_input()], outs, [w, b]), "tiny_seg.onnx")


def tiny_classes():
    w = np.zeros((2, 3, 1, 1), dtype=np.float32)
    w[1, :, 0, 0] = W
    b = np.array([0.0, B], dtype=np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    nodes = [helper.make_node("Conv", ["image", "w", "b"], ["scores"], name="class_scores",
                              kernel_shape=[1, 1])]
    outs = [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 2, "height", "width"])]
    save(helper.make_graph(nodes, "tiny_classes", [image_input()], outs, inits),
         "tiny_classes.onnx")


if __name__ == "__main__":
    tiny_seg()
    tiny_classes()
