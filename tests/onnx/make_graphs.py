#!/usr/bin/python3
"""Generates the ONNX operator test graphs of tests/data/onnx/ and their reference outputs.

For every case below: a small ONNX model built with the helper API of Debian's python3-onnx
(1.12: opsets up to 17), deterministic random inputs (numpy's PCG64 seeded per case) written as
raw little-endian float32, and ONNX Runtime's outputs of the model on those inputs
(tests/onnx/ort_run.js, ONNX Runtime for Node.js from scripts/fetch-onnxruntime.sh). It then
writes tests/data/onnx/manifest.tsv, one line per case (see the header it writes).

Usage (from the repository root; needs /usr/bin/python3 with python3-onnx and numpy, node):
    /usr/bin/python3 tests/onnx/make_graphs.py [--out tests/data/onnx] [--ort DIR]
DIR is what scripts/fetch-onnxruntime.sh prints (it is run when --ort is not given).
The run is deterministic: the same files come out byte for byte on every run.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CASES = []  # (name, builder): the builder returns a Case


class Case:
    """A model and its inputs. inputs: list of (name, array, shape given to ORT)."""

    def __init__(self, model, inputs, f16_tol=0.005, tol=None, size=None, static_batch=False):
        self.model = model
        self.static_batch = static_batch  # keep a declared first dimension above 1
        self.inputs = inputs
        self.f16_tol = f16_tol  # per-element tolerance x max(1, |ref|) for cuda f16; None: skip
        self.tol = tol          # lowest tolerance for every backend (data in half), or None
        self.size = size        # (height, width) to give the loader for dynamic inputs


def case(name):
    def reg(fn):
        CASES.append((name, fn))
        return fn
    return reg


def rng_for(name):
    # A seed from the case name (stable across Python runs, unlike hash()).
    seed = 0
    for ch in name.encode():
        seed = (seed * 131 + ch) % (2 ** 32)
    return np.random.default_rng(seed)


def rnd(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def vinfo(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=13, name="g"):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="keyer tests/onnx/make_graphs.py")
    m.ir_version = 7 if opset <= 12 else 8
    # Outputs declared without a shape get the one ONNX's shape inference finds (the checker
    # wants one); strict mode makes an inconsistent graph an error here.
    m = onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
    onnx.checker.check_model(m, full_check=True)
    return m


def unary(op, shape, opset=13, lo=-3.0, hi=3.0, attrs=None, extra_inits=(), extra_inputs=(),
          f16_tol=0.005):
    """A one-operator model y = op(x, extra inputs...) on one input x of @p shape."""
    def build(name):
        rng = rng_for(name)
        x = rnd(rng, shape, lo, hi)
        node = helper.make_node(op, ["x"] + list(extra_inputs), ["y"], **(attrs or {}))
        m = model([node], [vinfo("x", shape)], [vinfo("y", None)], extra_inits, opset)
        return Case(m, [("x", x, shape)], f16_tol)
    return build


def conv_case(xs, ws, opset=13, bias=True, **attrs):
    def build(name):
        rng = rng_for(name)
        x = rnd(rng, xs)
        w = rnd(rng, ws, -0.5, 0.5)
        ins = ["x", "w"]
        inits = [init("w", w)]
        if bias:
            ins.append("b")
            inits.append(init("b", rnd(rng, [ws[0]])))
        node = helper.make_node("Conv", ins, ["y"], **attrs)
        m = model([node], [vinfo("x", xs)], [vinfo("y", None)], inits, opset)
        return Case(m, [("x", x, xs)])
    return build


# ---- Conv -------------------------------------------------------------------------------------
case("conv_basic")(conv_case([1, 3, 7, 9], [4, 3, 3, 3], pads=[1, 1, 1, 1]))
case("conv_stride2_asym_pads_batch2")(conv_case([2, 3, 9, 11], [5, 3, 3, 3], strides=[2, 2],
                                                pads=[1, 0, 1, 2]))
case("conv_dilation")(conv_case([1, 4, 11, 10], [4, 4, 3, 3], dilations=[2, 3],
                                pads=[2, 3, 2, 3]))
case("conv_groups3")(conv_case([1, 6, 8, 7], [6, 2, 3, 3], group=3, pads=[1, 1, 1, 1]))
case("conv_depthwise_stride2_nobias")(conv_case([1, 4, 9, 9], [4, 1, 3, 3], bias=False, group=4,
                                                strides=[2, 2], pads=[1, 1, 1, 1]))
case("conv_depthwise_multiplier2")(conv_case([1, 3, 6, 5], [6, 1, 3, 3], group=3,
                                             pads=[1, 1, 1, 1]))
case("conv_same_upper_stride2")(conv_case([1, 3, 8, 7], [4, 3, 4, 4], strides=[2, 2],
                                          auto_pad="SAME_UPPER"))
case("conv_same_lower_stride2")(conv_case([1, 3, 8, 7], [4, 3, 4, 4], strides=[2, 2],
                                          auto_pad="SAME_LOWER"))
case("conv_same_upper_odd")(conv_case([1, 2, 9, 6], [3, 2, 3, 2], auto_pad="SAME_UPPER"))
case("conv_valid_rect_stride")(conv_case([1, 3, 7, 12], [2, 3, 2, 4], strides=[1, 2],
                                         auto_pad="VALID"))
case("conv_1x1")(conv_case([1, 8, 5, 5], [3, 8, 1, 1]))
case("conv_kernel1x5")(conv_case([1, 2, 6, 9], [3, 2, 1, 5], pads=[0, 2, 0, 2]))
case("conv_opset7")(conv_case([1, 3, 6, 6], [2, 3, 3, 3], opset=7, pads=[1, 1, 1, 1]))


# ---- ConvTranspose ------------------------------------------------------------------------------
def convt_case(xs, ws, bias=True, opset=13, **attrs):
    def build(name):
        rng = rng_for(name)
        x = rnd(rng, xs)
        ins = ["x", "w"]
        inits = [init("w", rnd(rng, ws, -0.5, 0.5))]
        if bias:
            ins.append("b")
            inits.append(init("b", rnd(rng, [ws[1] * attrs.get("group", 1)])))
        node = helper.make_node("ConvTranspose", ins, ["y"], **attrs)
        m = model([node], [vinfo("x", xs)], [vinfo("y", None)], inits, opset)
        return Case(m, [("x", x, xs)])
    return build


case("convt_stride2_outpad")(convt_case([1, 4, 5, 6], [4, 3, 3, 3], strides=[2, 2],
                                        pads=[1, 1, 1, 1], output_padding=[1, 1]))
case("convt_groups2")(convt_case([1, 4, 5, 5], [4, 2, 3, 3], group=2, strides=[2, 2]))
case("convt_k4s2_batch2")(convt_case([2, 3, 4, 5], [3, 2, 4, 4], strides=[2, 2],
                                     pads=[1, 1, 1, 1]))
case("convt_asym_pads_nobias")(convt_case([1, 2, 5, 4], [2, 3, 3, 2], bias=False,
                                          strides=[2, 3], pads=[0, 1, 1, 0]))
case("convt_dilation")(convt_case([1, 2, 4, 4], [2, 2, 3, 3], dilations=[2, 2]))


# ---- BatchNormalization -------------------------------------------------------------------------
def bn_inits(rng, c, prefix="bn"):
    return [init(prefix + "_s", rnd(rng, [c], 0.5, 1.5)), init(prefix + "_b", rnd(rng, [c])),
            init(prefix + "_m", rnd(rng, [c])), init(prefix + "_v", rnd(rng, [c], 0.2, 2.0))]


@case("conv_batchnorm")
def _(name):
    rng = rng_for(name)
    xs = [1, 3, 7, 6]
    inits = [init("w", rnd(rng, [5, 3, 3, 3], -0.5, 0.5)), init("b", rnd(rng, [5]))]
    inits += bn_inits(rng, 5)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "bn_s", "bn_b", "bn_m", "bn_v"], ["y"],
                              epsilon=1e-3),
             ]
    m = model(nodes, [vinfo("x", xs)], [vinfo("y", None)], inits, 11)
    return Case(m, [("x", rnd(rng, xs), xs)])


@case("conv_batchnorm_relu_nobias")
def _(name):
    rng = rng_for(name)
    xs = [2, 4, 6, 5]
    inits = [init("w", rnd(rng, [4, 2, 3, 3], -0.5, 0.5))] + bn_inits(rng, 4)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], group=2),
             helper.make_node("BatchNormalization", ["c", "bn_s", "bn_b", "bn_m", "bn_v"],
                              ["n"]),
             helper.make_node("Relu", ["n"], ["y"])]
    m = model(nodes, [vinfo("x", xs)], [vinfo("y", None)], inits, 15)
    return Case(m, [("x", rnd(rng, xs), xs)])


@case("batchnorm_alone")
def _(name):
    rng = rng_for(name)
    xs = [2, 5, 4, 3]
    nodes = [helper.make_node("BatchNormalization", ["x", "bn_s", "bn_b", "bn_m", "bn_v"], ["y"],
                              epsilon=1e-4)]
    m = model(nodes, [vinfo("x", xs)], [vinfo("y", None)], bn_inits(rng, 5), 9)
    return Case(m, [("x", rnd(rng, xs), xs)])


# ---- Activations and unary operators -----------------------------------------------------------
S = [2, 3, 5, 7]
case("relu")(unary("Relu", S))
case("leaky_relu")(unary("LeakyRelu", S, attrs={"alpha": 0.13}))
case("leaky_relu_default_opset7")(unary("LeakyRelu", [1, 2, 3, 3], opset=7))
case("prelu_per_channel")(unary("PRelu", S, extra_inputs=["slope"],
                                extra_inits=[init("slope", np.array([[[0.1]], [[-0.3]], [[0.7]]],
                                                                    np.float32))]))
case("prelu_scalar_opset7")(unary("PRelu", [1, 4, 3, 5], opset=7, extra_inputs=["slope"],
                                  extra_inits=[init("slope", np.array([0.25], np.float32))]))
case("sigmoid")(unary("Sigmoid", S, lo=-8, hi=8))
case("tanh")(unary("Tanh", S))
case("hard_sigmoid")(unary("HardSigmoid", S, attrs={"alpha": 0.3, "beta": 0.4}))
case("hard_sigmoid_default")(unary("HardSigmoid", [1, 2, 4, 4], lo=-5, hi=5))
case("hard_swish")(unary("HardSwish", S, opset=14, lo=-5, hi=5))
case("clip_v6_attrs")(unary("Clip", S, opset=10, attrs={"min": -0.5, "max": 0.7}))
case("clip_opset11_inputs")(unary("Clip", S, opset=11, extra_inputs=["lo", "hi"],
                                  extra_inits=[init("lo", np.array(-1.0, np.float32)),
                                               init("hi", np.array(1.5, np.float32))]))
case("clip_opset13_min_only")(unary("Clip", S, opset=13, extra_inputs=["lo"],
                                    extra_inits=[init("lo", np.array(0.25, np.float32))]))
case("clip_opset13_max_only")(unary("Clip", S, opset=13, extra_inputs=["", "hi"],
                                    extra_inits=[init("hi", np.array(6.0, np.float32))],
                                    lo=-8, hi=8))
case("elu")(unary("Elu", S, attrs={"alpha": 0.8}))
case("exp")(unary("Exp", S, lo=-4, hi=4))
case("sqrt")(unary("Sqrt", S, lo=0.01, hi=9))
case("pow_square")(unary("Pow", S, extra_inputs=["e"],
                         extra_inits=[init("e", np.array(2.0, np.float32))]))
case("pow_half")(unary("Pow", [1, 3, 4, 5], opset=12, lo=0.01, hi=4, extra_inputs=["e"],
                       extra_inits=[init("e", np.array([0.5], np.float32))]))
case("pow_cube_opset7")(unary("Pow", [1, 2, 3, 3], opset=7, extra_inputs=["e"],
                              extra_inits=[init("e", np.array([3.0], np.float32))]))
case("identity")(unary("Identity", S))
case("dropout_opset7")(unary("Dropout", S, opset=7, attrs={"ratio": 0.3}))
case("dropout_opset13")(unary("Dropout", S, opset=13, extra_inputs=["r"],
                              extra_inits=[init("r", np.array(0.5, np.float32))]))


# ---- Pools --------------------------------------------------------------------------------------
def pool(op, xs, opset=11, **attrs):
    return unary(op, xs, opset=opset, attrs=attrs)


case("maxpool_k3s2_ceil")(pool("MaxPool", [1, 3, 9, 10], kernel_shape=[3, 3], strides=[2, 2],
                               ceil_mode=1))
case("maxpool_k2s2_ceil_odd")(pool("MaxPool", [1, 2, 7, 7], kernel_shape=[2, 2], strides=[2, 2],
                                   ceil_mode=1))
case("maxpool_k2s2_floor_odd_batch2")(pool("MaxPool", [2, 2, 7, 9], kernel_shape=[2, 2],
                                           strides=[2, 2]))
case("maxpool_k3s1_pads")(pool("MaxPool", [1, 3, 6, 5], kernel_shape=[3, 3],
                               pads=[1, 1, 1, 1]))
case("maxpool_same_upper")(pool("MaxPool", [1, 2, 7, 8], kernel_shape=[3, 3], strides=[2, 2],
                                auto_pad="SAME_UPPER"))
case("maxpool_dilation")(pool("MaxPool", [1, 2, 9, 8], kernel_shape=[2, 2], dilations=[2, 2]))
case("maxpool_opset7")(pool("MaxPool", [1, 2, 6, 6], opset=7, kernel_shape=[2, 2],
                            strides=[2, 2]))
case("avgpool_k3s2_pads_exclude")(pool("AveragePool", [1, 3, 9, 8], kernel_shape=[3, 3],
                                       strides=[2, 2], pads=[1, 1, 1, 1]))
case("avgpool_k3s2_pads_include")(pool("AveragePool", [1, 3, 9, 8], kernel_shape=[3, 3],
                                       strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1))
case("avgpool_ceil_include")(pool("AveragePool", [1, 2, 8, 7], kernel_shape=[3, 3],
                                  strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1,
                                  count_include_pad=1))
case("avgpool_ceil_exclude")(pool("AveragePool", [1, 2, 8, 7], kernel_shape=[3, 3],
                                  strides=[2, 2], ceil_mode=1))
case("avgpool_k2s2_batch2")(pool("AveragePool", [2, 3, 6, 6], kernel_shape=[2, 2],
                                 strides=[2, 2]))
case("global_average_pool")(unary("GlobalAveragePool", [2, 5, 7, 6]))
case("global_max_pool")(unary("GlobalMaxPool", [2, 5, 7, 6]))


# ---- Resize and Upsample ------------------------------------------------------------------------
def resize(xs, opset=13, scales=None, sizes=None, roi=None, **attrs):
    """Resize with constant scales or sizes (inputs as the opset takes them)."""
    def build(name):
        rng = rng_for(name)
        inits = []
        if opset == 10:
            ins = ["x", "scales"]
            inits.append(init("scales", np.array(scales, np.float32)))
        else:
            ins = ["x", "roi", "scales"]
            inits.append(init("roi", np.array(roi if roi is not None else [], np.float32)))
            inits.append(init("scales", np.array(scales if scales is not None else [],
                                                 np.float32)))
            if sizes is not None:
                ins.append("sizes")
                inits.append(init("sizes", np.array(sizes, np.int64)))
            if opset >= 13 and roi is None:
                # opset 13 makes roi and scales optional: leave them out the way exporters do
                ins[1] = ""
                inits = [t for t in inits if t.name != "roi"]
                if scales is None:
                    ins[2] = ""
                    inits = [t for t in inits if t.name != "scales"]
        node = helper.make_node("Resize", ins, ["y"], **attrs)
        m = model([node], [vinfo("x", xs)], [vinfo("y", None)], inits, opset)
        return Case(m, [("x", rnd(rng, xs), xs)])
    return build


NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
# tf_half_pixel_for_nearest (opset 11 only) is left out: ONNX Runtime 1.30 refuses it
# ("coordinate_transform_mode:[tf_half_pixel_for_nearest] is not supported"), so there is no
# oracle for it here.
COORDS_NEAREST = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"]
for nm in NEAREST_MODES:
    for i, ct in enumerate(COORDS_NEAREST):
        # alternate up-sampling by 2 / by 1.5 (scales) and to odd sizes, down-sampling once
        if i % 3 == 0:
            kw = {"scales": [1, 1, 2.0, 2.0]}
        elif i % 3 == 1:
            kw = {"scales": [1, 1, 1.5, 1.75]}
        else:
            kw = {"sizes": [1, 2, 9, 4]}
        case(f"resize_nearest_{nm}_{ct}")(resize([1, 2, 5, 6], mode="nearest", nearest_mode=nm,
                                                 coordinate_transformation_mode=ct, **kw))
for ct in ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]:
    case(f"resize_linear_{ct}_up")(resize([1, 3, 4, 5], mode="linear",
                                          coordinate_transformation_mode=ct,
                                          sizes=[1, 3, 9, 11]))
    case(f"resize_linear_{ct}_down")(resize([2, 2, 9, 10], mode="linear",
                                            coordinate_transformation_mode=ct,
                                            scales=[1, 1, 0.5, 0.7]))
case("resize_linear_pytorch_half_pixel_to_1")(resize([1, 2, 5, 6], mode="linear",
                                                     coordinate_transformation_mode=
                                                     "pytorch_half_pixel",
                                                     sizes=[1, 2, 1, 3]))
case("resize_linear_tf_crop_and_resize")(resize([1, 2, 6, 6], opset=13, mode="linear",
                                                coordinate_transformation_mode=
                                                "tf_crop_and_resize",
                                                roi=[0, 0, 0.1, 0.2, 1, 1, 0.9, 1.2],
                                                sizes=[1, 2, 5, 7], extrapolation_value=-2.0))
case("resize_nearest_tf_crop_and_resize")(resize([1, 2, 6, 5], mode="nearest",
                                                 coordinate_transformation_mode=
                                                 "tf_crop_and_resize",
                                                 roi=[0, 0, -0.1, 0.3, 1, 1, 0.8, 0.9],
                                                 sizes=[1, 2, 7, 4]))
case("resize_opset11_linear_sizes")(resize([1, 3, 5, 5], opset=11, mode="linear",
                                           coordinate_transformation_mode="pytorch_half_pixel",
                                           sizes=[1, 3, 10, 10]))
case("resize_opset11_nearest_scales")(resize([1, 2, 4, 3], opset=11, mode="nearest",
                                             scales=[1, 1, 3.0, 2.0]))
case("resize_opset10_nearest")(resize([1, 2, 4, 5], opset=10, mode="nearest",
                                      scales=[1, 1, 2.0, 2.0]))
case("resize_opset10_linear")(resize([1, 2, 4, 5], opset=10, mode="linear",
                                     scales=[1, 1, 2.0, 1.5]))


def upsample(xs, opset, scales, mode):
    def build(name):
        rng = rng_for(name)
        inits = []
        if opset == 7:
            node = helper.make_node("Upsample", ["x"], ["y"], mode=mode, scales=scales)
        else:
            node = helper.make_node("Upsample", ["x", "scales"], ["y"], mode=mode)
            inits.append(init("scales", np.array(scales, np.float32)))
        m = model([node], [vinfo("x", xs)], [vinfo("y", None)], inits, opset)
        return Case(m, [("x", rnd(rng, xs), xs)])
    return build


case("upsample_opset7_nearest")(upsample([1, 2, 3, 4], 7, [1.0, 1.0, 2.0, 2.0], "nearest"))
case("upsample_opset7_linear")(upsample([1, 2, 3, 4], 7, [1.0, 1.0, 2.0, 3.0], "linear"))
case("upsample_opset9_nearest")(upsample([2, 2, 3, 3], 9, [1.0, 1.0, 3.0, 2.0], "nearest"))
case("upsample_opset9_linear")(upsample([1, 3, 4, 3], 9, [1.0, 1.0, 2.0, 2.0], "linear"))


# ---- Concat, binary operators with broadcasting ------------------------------------------------
def multi_input(op, shapes, opset=13, attrs=None, positive=(), f16_tol=0.005):
    def build(name):
        rng = rng_for(name)
        names = [f"x{i}" for i in range(len(shapes))]
        arrs = [rnd(rng, s, 0.5, 2.0) if i in positive else rnd(rng, s)
                for i, s in enumerate(shapes)]
        node = helper.make_node(op, names, ["y"], **(attrs or {}))
        m = model([node], [vinfo(n, s) for n, s in zip(names, shapes)], [vinfo("y", None)],
                  (), opset)
        return Case(m, [(n, a, s) for n, a, s in zip(names, arrs, shapes)], f16_tol)
    return build


case("concat_axis1")(multi_input("Concat", [[1, 2, 4, 5], [1, 3, 4, 5], [1, 1, 4, 5]],
                                 attrs={"axis": 1}))
case("concat_axis2_batch2")(multi_input("Concat", [[2, 3, 2, 5], [2, 3, 3, 5]],
                                        attrs={"axis": 2}))
case("concat_axis_minus1")(multi_input("Concat", [[1, 2, 3, 4], [1, 2, 3, 1]],
                                       attrs={"axis": -1}))
case("concat_opset7_axis1")(multi_input("Concat", [[1, 2, 3, 3], [1, 2, 3, 3]], opset=7,
                                        attrs={"axis": 1}))
case("add_same_shape")(multi_input("Add", [[2, 3, 4, 5], [2, 3, 4, 5]]))
case("add_bcast_inputs")(multi_input("Add", [[2, 3, 4, 5], [2, 1, 4, 1]]))
case("sub_bcast_inputs")(multi_input("Sub", [[1, 1, 4, 5], [1, 3, 1, 5]]))
case("mul_bcast_inputs")(multi_input("Mul", [[1, 3, 4, 5], [1, 3, 1, 1]]))
case("div_bcast_inputs")(multi_input("Div", [[1, 3, 4, 5], [1, 1, 4, 5]], positive=(1,)))


def binary_const(op, xs, cs, positive=False, const_first=False, opset=13):
    def build(name):
        rng = rng_for(name)
        c = rnd(rng, cs, 0.5, 2.0) if positive else rnd(rng, cs)
        ins = ["c", "x"] if const_first else ["x", "c"]
        node = helper.make_node(op, ins, ["y"])
        m = model([node], [vinfo("x", xs)], [vinfo("y", None)], [init("c", c)], opset)
        return Case(m, [("x", rnd(rng, xs), xs)])
    return build


case("add_const_per_channel")(binary_const("Add", [2, 3, 4, 5], [1, 3, 1, 1]))
case("add_const_last_dim")(binary_const("Add", [1, 3, 4, 5], [5]))
case("sub_const_scalar")(binary_const("Sub", [1, 3, 4, 5], []))
case("sub_const_first")(binary_const("Sub", [1, 3, 4, 5], [3, 1, 1], const_first=True))
case("mul_const_row")(binary_const("Mul", [1, 2, 4, 5], [1, 1, 4, 5]))
case("mul_const_scalar_opset7")(binary_const("Mul", [1, 2, 3, 3], [1], opset=7))
case("div_const_per_channel")(binary_const("Div", [1, 3, 4, 5], [3, 1, 1], positive=True))
case("div_const_first")(binary_const("Div", [1, 2, 3, 4], [1, 2, 1, 1], const_first=True))


# ---- Pad ----------------------------------------------------------------------------------------
def pad_case(xs, pads, mode, opset, value=None):
    def build(name):
        rng = rng_for(name)
        inits = []
        if opset < 11:
            attrs = {"pads": pads, "mode": mode}
            if value is not None:
                attrs["value"] = value
            node = helper.make_node("Pad", ["x"], ["y"], **attrs)
        else:
            ins = ["x", "pads"]
            inits.append(init("pads", np.array(pads, np.int64)))
            if value is not None:
                ins.append("v")
                inits.append(init("v", np.array(value, np.float32)))
            node = helper.make_node("Pad", ins, ["y"], mode=mode)
        m = model([node], [vinfo("x", xs)], [vinfo("y", None)], inits, opset)
        return Case(m, [("x", rnd(rng, xs), xs)])
    return build


case("pad_v2_attrs_constant")(pad_case([1, 2, 4, 5], [0, 0, 1, 2, 0, 0, 2, 1], "constant", 7, 0.5))
case("pad_v2_attrs_reflect")(pad_case([1, 2, 4, 5], [0, 0, 2, 1, 0, 0, 1, 3], "reflect", 10))
case("pad_v2_attrs_edge_batch2")(pad_case([2, 2, 3, 4], [0, 0, 1, 1, 0, 0, 2, 2], "edge", 7))
case("pad_opset11_constant")(pad_case([1, 3, 4, 5], [0, 0, 1, 0, 0, 0, 0, 3], "constant", 11,
                                      -1.5))
case("pad_opset11_constant_default")(pad_case([1, 2, 3, 3], [0, 0, 2, 2, 0, 0, 2, 2],
                                              "constant", 11))
case("pad_opset11_channels")(pad_case([1, 3, 4, 4], [0, 1, 0, 0, 0, 2, 0, 0], "constant", 11))
case("pad_opset11_reflect")(pad_case([1, 2, 5, 6], [0, 0, 3, 2, 0, 0, 1, 4], "reflect", 11))
case("pad_opset13_edge")(pad_case([1, 2, 4, 5], [0, 0, 3, 1, 0, 0, 2, 4], "edge", 13))


# ---- Shape manipulation -------------------------------------------------------------------------
def with_const_input(op, xs, cname, cval, ctype=np.int64, opset=13, attrs=None, outs=("y",)):
    def build(name):
        rng = rng_for(name)
        node = helper.make_node(op, ["x", cname], list(outs), **(attrs or {}))
        m = model([node], [vinfo("x", xs)], [vinfo(o, None) for o in outs],
                  [init(cname, np.array(cval, ctype))], opset)
        return Case(m, [("x", rnd(rng, xs), xs)])
    return build


case("reshape_flatten")(with_const_input("Reshape", [1, 3, 4, 5], "s", [1, -1]))
case("reshape_copy_dim")(with_const_input("Reshape", [2, 3, 4, 5], "s", [0, 3, 20]))
case("reshape_4d")(with_const_input("Reshape", [1, 6, 4, 5], "s", [1, 3, 8, 5]))
case("reshape_opset7")(with_const_input("Reshape", [1, 2, 3, 4], "s", [1, 4, 3, 2], opset=7))
case("flatten_axis1")(unary("Flatten", [2, 3, 4, 5], attrs={"axis": 1}))
case("flatten_axis2")(unary("Flatten", [1, 3, 4, 5], attrs={"axis": 2}))
case("transpose_to_nhwc")(unary("Transpose", [1, 3, 4, 5], attrs={"perm": [0, 2, 3, 1]}))
case("transpose_hw")(unary("Transpose", [2, 3, 4, 5], attrs={"perm": [0, 1, 3, 2]}))
case("transpose_rank3")(unary("Transpose", [1, 4, 5], attrs={"perm": [2, 0, 1]}))
case("squeeze_opset11_attr")(unary("Squeeze", [1, 3, 1, 5], opset=11, attrs={"axes": [2]}))
case("squeeze_opset13_input")(with_const_input("Squeeze", [1, 3, 4, 1], "a", [-1]))
case("unsqueeze_opset11_attr")(unary("Unsqueeze", [1, 3, 5], opset=11, attrs={"axes": [2]}))
case("unsqueeze_opset13_input")(with_const_input("Unsqueeze", [1, 3, 4], "a", [1]))


def slice_inputs(xs, starts, ends, axes=None, steps=None, opset=13):
    def build(name):
        rng = rng_for(name)
        ins = ["x", "st", "en"]
        inits = [init("st", np.array(starts, np.int64)), init("en", np.array(ends, np.int64))]
        if axes is not None:
            ins.append("ax")
            inits.append(init("ax", np.array(axes, np.int64)))
        if steps is not None:
            if axes is None:
                ins.append("")
            ins.append("sp")
            inits.append(init("sp", np.array(steps, np.int64)))
        node = helper.make_node("Slice", ins, ["y"])
        m = model([node], [vinfo("x", xs)], [vinfo("y", None)], inits, opset)
        return Case(m, [("x", rnd(rng, xs), xs)])
    return build


case("slice_opset9_attrs")(unary("Slice", [1, 4, 6, 7], opset=9,
                                 attrs={"starts": [1, 2], "ends": [3, 100], "axes": [1, 3]}))
case("slice_opset10_inputs")(slice_inputs([1, 3, 6, 7], [1, 0], [5, 5], axes=[2, 3], opset=10))
case("slice_steps2")(slice_inputs([2, 4, 7, 8], [0, 1], [7, 8], axes=[2, 3], steps=[2, 3]))
case("slice_negative_steps")(slice_inputs([1, 3, 5, 6], [-1, 4], [-1000, 0], axes=[3, 2],
                                          steps=[-1, -2]))
case("slice_negative_starts_ends")(slice_inputs([1, 4, 5, 6], [-3, 1], [-1, 2 ** 62],
                                                axes=[2, 1]))
case("slice_no_axes_channels")(slice_inputs([1, 5, 3, 4], [0, 1], [1, 4]))


def split_case(xs, axis, parts, split=None, opset=13):
    def build(name):
        rng = rng_for(name)
        outs = [f"y{i}" for i in range(parts)]
        inits = []
        ins = ["x"]
        attrs = {"axis": axis}
        if split is not None:
            if opset >= 13:
                ins.append("split")
                inits.append(init("split", np.array(split, np.int64)))
            else:
                attrs["split"] = split
        node = helper.make_node("Split", ins, outs, **attrs)
        m = model([node], [vinfo("x", xs)], [vinfo(o, None) for o in outs], inits, opset)
        return Case(m, [("x", rnd(rng, xs), xs)])
    return build


case("split_opset11_attr_channels")(split_case([1, 6, 3, 4], 1, 2, split=[2, 4], opset=11))
case("split_opset13_input")(split_case([1, 3, 7, 4], 2, 3, split=[3, 1, 3]))
case("split_equal_width")(split_case([2, 2, 3, 6], 3, 3))
case("split_opset7_equal_channels")(split_case([1, 4, 2, 3], 1, 2, opset=7))


# ---- Softmax, ArgMax, reductions ----------------------------------------------------------------
case("softmax_opset13_channels")(unary("Softmax", [2, 5, 3, 4], attrs={"axis": 1}))
case("softmax_opset13_last")(unary("Softmax", [1, 3, 4, 6], attrs={"axis": -1}))
case("softmax_opset11_last")(unary("Softmax", [1, 3, 4, 6], opset=11, attrs={"axis": 3}))
case("softmax_opset11_flatten_axis1")(unary("Softmax", [2, 3, 2, 3], opset=11,
                                            attrs={"axis": 1}))
case("softmax_rank2_opset11_default")(unary("Softmax", [3, 10], opset=11))


def argmax_case(xs, opset=13, ties=False, **attrs):
    def build(name):
        rng = rng_for(name)
        x = rnd(rng, xs)
        if ties:
            x = np.round(x * 2).astype(np.float32) / 2  # few distinct values: many ties
        node = helper.make_node("ArgMax", ["x"], ["i"], **attrs)
        m = model([node], [vinfo("x", xs)], [vinfo("i", None, TensorProto.INT64)], (), opset)
        return Case(m, [("x", x, xs)], f16_tol=None if ties else 0.0)
    return build


case("argmax_channels_keepdims")(argmax_case([2, 5, 4, 3], axis=1, keepdims=1))
case("argmax_channels_nokeep")(argmax_case([1, 4, 5, 3], axis=1, keepdims=0))
case("argmax_width_opset11")(argmax_case([1, 2, 3, 7], opset=11, axis=-1, keepdims=1))
case("argmax_ties_first")(argmax_case([1, 6, 4, 4], opset=12, ties=True, axis=1, keepdims=1))
case("argmax_ties_last")(argmax_case([1, 6, 4, 4], opset=12, ties=True, axis=1, keepdims=1,
                                     select_last_index=1))
case("reduce_mean_hw_keep")(unary("ReduceMean", [2, 3, 4, 5], attrs={"axes": [2, 3],
                                                                    "keepdims": 1}))
case("reduce_mean_channels_nokeep")(unary("ReduceMean", [1, 4, 3, 5], attrs={"axes": [1],
                                                                            "keepdims": 0}))
case("reduce_mean_all_opset11")(unary("ReduceMean", [1, 3, 4, 5], opset=11))
case("reduce_max_hw_keep")(unary("ReduceMax", [2, 3, 4, 5], attrs={"axes": [-2, -1],
                                                                  "keepdims": 1}))
case("reduce_max_channels_keep")(unary("ReduceMax", [1, 5, 3, 4], attrs={"axes": [1],
                                                                        "keepdims": 1}))
case("reduce_max_width_nokeep_opset11")(unary("ReduceMax", [1, 2, 3, 6], opset=11,
                                              attrs={"axes": [3], "keepdims": 0}))


# ---- MatMul, Gemm, Gather -----------------------------------------------------------------------
case("matmul_const_rank4")(binary_const("MatMul", [2, 3, 4, 5], [5, 6]))
case("matmul_const_rank2")(binary_const("MatMul", [3, 7], [7, 4]))
case("matmul_inputs_batched")(multi_input("MatMul", [[2, 4, 5], [2, 5, 3]]))


def gemm_case(xs, ws, cs, **attrs):
    def build(name):
        rng = rng_for(name)
        ins = ["x", "w"]
        inits = [init("w", rnd(rng, ws))]
        if cs is not None:
            ins.append("c")
            inits.append(init("c", rnd(rng, cs)))
        node = helper.make_node("Gemm", ins, ["y"], **attrs)
        m = model([node], [vinfo("x", xs)], [vinfo("y", None)], inits, 13)
        return Case(m, [("x", rnd(rng, xs), xs)])
    return build


case("gemm_transb_bias")(gemm_case([2, 7], [5, 7], [5], transB=1, alpha=0.5, beta=2.0))
case("gemm_plain_bias_row")(gemm_case([3, 6], [6, 4], [1, 4]))
case("gemm_transa_nobias")(gemm_case([1, 3], [1, 4], None, transA=1))


@case("flatten_gemm_classifier")
def _(name):
    rng = rng_for(name)
    xs = [2, 4, 3, 3]
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "w", "b"], ["y"], transB=1)]
    m = model(nodes, [vinfo("x", xs)], [vinfo("y", None)],
              [init("w", rnd(rng, [3, 4])), init("b", rnd(rng, [3]))], 11)
    return Case(m, [("x", rnd(rng, xs), xs)])


case("gather_channels")(with_const_input("Gather", [1, 4, 3, 5], "idx", [2, 0, 3],
                                         attrs={"axis": 1}))
case("gather_scalar_width")(with_const_input("Gather", [2, 3, 4, 5], "idx", 4,
                                             attrs={"axis": 3}))
case("gather_negative_index_opset11")(with_const_input("Gather", [1, 3, 5, 4], "idx", [-1, 1],
                                                       opset=11, attrs={"axis": 2}))
case("gather_2d_indices")(with_const_input("Gather", [1, 4, 3, 3], "idx", [[0, 1], [3, 2]],
                                           attrs={"axis": 1}))


# ---- Cast, float16, quantized weights -----------------------------------------------------------
@case("cast_roundtrip_f16")
def _(name):
    rng = rng_for(name)
    xs = [1, 3, 4, 5]
    nodes = [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
             helper.make_node("Cast", ["h"], ["y"], to=TensorProto.FLOAT)]
    m = model(nodes, [vinfo("x", xs)], [vinfo("y", None)], (), 13)
    # ONNX Runtime rounds to half: 2^-11 relative, 2^-11 x 4 at most here
    return Case(m, [("x", rnd(rng, xs, -4, 4), xs)], tol=1e-3)


@case("cast_float_to_float_opset9")
def _(name):
    rng = rng_for(name)
    xs = [1, 2, 3, 3]
    nodes = [helper.make_node("Cast", ["x"], ["c"], to=TensorProto.FLOAT),
             helper.make_node("Relu", ["c"], ["y"])]
    m = model(nodes, [vinfo("x", xs)], [vinfo("y", None)], (), 9)
    return Case(m, [("x", rnd(rng, xs), xs)])


@case("float16_model_with_casts")
def _(name):
    """Weights and activations in half, float32 at the edges (a keep_io_types fp16 export)."""
    rng = rng_for(name)
    xs = [1, 3, 8, 7]
    h = np.float16
    inits = [init("w1", rnd(rng, [4, 3, 3, 3], -0.5, 0.5).astype(h)),
             init("b1", rnd(rng, [4]).astype(h)),
             init("w2", rnd(rng, [2, 4, 1, 1], -0.5, 0.5).astype(h)),
             init("b2", rnd(rng, [2]).astype(h)),
             init("k", np.array([[[0.5]], [[-0.25]]], h))]
    nodes = [helper.make_node("Cast", ["x"], ["xh"], to=TensorProto.FLOAT16),
             helper.make_node("Conv", ["xh", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1],
                              strides=[2, 2]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
             helper.make_node("Mul", ["c2", "k"], ["m"]),
             helper.make_node("Sigmoid", ["m"], ["s"]),
             helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT)]
    m = model(nodes, [vinfo("x", xs)], [vinfo("y", None)], inits, 13)
    # ONNX Runtime computes in half between the Casts (rounding after every operator)
    return Case(m, [("x", rnd(rng, xs), xs)], tol=5e-3)


@case("qdq_weight_per_tensor")
def _(name):
    """Conv weight as int8 with DequantizeLinear (opset 10 QDQ: per-tensor)."""
    rng = rng_for(name)
    xs = [1, 3, 6, 5]
    wq = rng.integers(-127, 128, size=[4, 3, 3, 3]).astype(np.int8)
    inits = [init("wq", wq), init("ws", np.array(0.004, np.float32)),
             init("wz", np.array(3, np.int8)), init("b", rnd(rng, [4]))]
    nodes = [helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"]),
             helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])]
    m = model(nodes, [vinfo("x", xs)], [vinfo("y", None)], inits, 10)
    return Case(m, [("x", rnd(rng, xs), xs)])


@case("qdq_weight_pair_per_channel")
def _(name):
    """A float weight through QuantizeLinear then DequantizeLinear, per output channel (13)."""
    rng = rng_for(name)
    xs = [1, 2, 5, 5]
    inits = [init("wf", rnd(rng, [3, 2, 3, 3], -0.6, 0.6)),
             init("ws", np.array([0.005, 0.003, 0.004], np.float32)),
             init("wz", np.array([0, 2, -1], np.int8)), init("b", rnd(rng, [3]))]
    nodes = [helper.make_node("QuantizeLinear", ["wf", "ws", "wz"], ["wq"], axis=0),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=0),
             helper.make_node("Conv", ["x", "w", "b"], ["y"])]
    m = model(nodes, [vinfo("x", xs)], [vinfo("y", None)], inits, 13)
    return Case(m, [("x", rnd(rng, xs), xs)])


@case("qdq_weight_uint8_matmul")
def _(name):
    rng = rng_for(name)
    xs = [2, 6]
    wq = rng.integers(0, 256, size=[6, 4]).astype(np.uint8)
    inits = [init("wq", wq), init("ws", np.array(0.01, np.float32)),
             init("wz", np.array(128, np.uint8))]
    nodes = [helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"]),
             helper.make_node("MatMul", ["x", "w"], ["y"])]
    m = model(nodes, [vinfo("x", xs)], [vinfo("y", None)], inits, 13)
    return Case(m, [("x", rnd(rng, xs), xs)])


# ---- PyTorch-style shape subgraphs and dynamic inputs -------------------------------------------
@case("shape_subgraph_reshape")
def _(name):
    """x.view(x.size(0), x.size(1) * 2, -1) as PyTorch 1.x exports it (opset 11)."""
    rng = rng_for(name)
    xs = [1, 4, 6, 5]
    i64 = lambda n, v: init(n, np.array(v, np.int64))  # noqa: E731
    inits = [i64("i0", 0), i64("i1", 1), i64("two", 2), i64("m1", [-1]),
             init("w", rnd(rng, [4, 4, 1, 1], -0.5, 0.5))]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Shape", ["c"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
             helper.make_node("Shape", ["c"], ["s2"]),
             helper.make_node("Gather", ["s2", "i1"], ["ch"], axis=0),
             helper.make_node("Mul", ["ch", "two"], ["ch2"]),
             helper.make_node("Unsqueeze", ["n"], ["nu"], axes=[0]),
             helper.make_node("Unsqueeze", ["ch2"], ["chu"], axes=[0]),
             helper.make_node("Concat", ["nu", "chu", "m1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["c", "shape"], ["y"])]
    m = model(nodes, [vinfo("x", xs)], [vinfo("y", [1, 8, 15])], inits, 11)
    return Case(m, [("x", rnd(rng, xs), xs)])


@case("shape_subgraph_resize_like")
def _(name):
    """U^2-Net's _upsample_like: Resize(x, sizes = Shape(ref)[2:4]) built by a shape subgraph,
    the way PyTorch 1.9 exports F.interpolate(size=...) at opset 11 (Shape, Slice, Cast,
    Concat, Resize with empty roi and scales)."""
    rng = rng_for(name)
    xs = [1, 3, 8, 10]
    i64 = lambda n, v: init(n, np.array(v, np.int64))  # noqa: E731
    inits = [i64("st", [2]), i64("en", [4]),
             init("empty", np.array([], np.float32)),
             init("w", rnd(rng, [3, 3, 3, 3], -0.5, 0.5)), init("b", rnd(rng, [3]))]
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2],
                              ceil_mode=1),
             helper.make_node("Conv", ["p", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Shape", ["c"], ["sc"]),
             helper.make_node("Slice", ["sc", "i_zero", "i_two"], ["nc"]),
             helper.make_node("Shape", ["x"], ["sx"]),
             helper.make_node("Slice", ["sx", "st", "en"], ["hw"]),
             helper.make_node("Cast", ["hw"], ["hwf"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["hwf"], ["hwi"], to=TensorProto.INT64),
             helper.make_node("Concat", ["nc", "hwi"], ["sizes"], axis=0),
             helper.make_node("Resize", ["c", "empty", "empty", "sizes"], ["r"], mode="linear",
                              coordinate_transformation_mode="pytorch_half_pixel"),
             helper.make_node("Add", ["r", "x"], ["y"])]
    inits += [i64("i_zero", [0]), i64("i_two", [2])]
    m = model(nodes, [vinfo("x", xs)], [vinfo("y", xs)], inits, 11)
    return Case(m, [("x", rnd(rng, xs), xs)])


def dynamic_model(name):
    rng = rng_for("dynamic_input")
    inits = [init("w", rnd(rng, [4, 3, 3, 3], -0.5, 0.5)), init("b", rnd(rng, [4])),
             init("w2", rnd(rng, [1, 4, 1, 1], -0.5, 0.5))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2],
                              ceil_mode=1),
             helper.make_node("Conv", ["p", "w2"], ["c2"]),
             helper.make_node("Shape", ["x"], ["sx"]),
             helper.make_node("Slice", ["sx", "st", "en"], ["hw"]),
             helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
             helper.make_node("Resize", ["c2", "", "", "sizes"], ["u"], mode="linear"),
             helper.make_node("Sigmoid", ["u"], ["mask"])]
    inits += [init("st", np.array([2], np.int64)), init("en", np.array([4], np.int64)),
              init("nc", np.array([1, 1], np.int64))]
    return model(nodes, [vinfo("x", [1, 3, "height", "width"])],
                 [vinfo("mask", [1, 1, "height", "width"])], inits, 13)


def dynamic_case(shape):
    def build(name):
        rng = rng_for(name)
        return Case(dynamic_model(name), [("x", rnd(rng, shape), shape)],
                    size=(shape[2], shape[3]))
    return build


case("dynamic_input_8x8")(dynamic_case([1, 3, 8, 8]))
case("dynamic_input_13x10")(dynamic_case([1, 3, 13, 10]))


@case("segmenter_logits_two_class")
def _(name):
    """A tiny two-class segmenter (logits NCHW, class 1 = person): the main job's user-model
    test can wire it with a YAML description."""
    rng = rng_for(name)
    xs = [1, 3, 16, 16]
    inits = [init("w", rnd(rng, [4, 3, 3, 3], -0.5, 0.5)), init("b", rnd(rng, [4])),
             init("w2", rnd(rng, [2, 4, 1, 1], -1, 1)), init("b2", rnd(rng, [2]))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Conv", ["r", "w2", "b2"], ["l"]),
             helper.make_node("Resize", ["l", "", "s"], ["logits"], mode="linear",
                              coordinate_transformation_mode="half_pixel")]
    inits.append(init("s", np.array([1, 1, 2, 2], np.float32)))
    m = model(nodes, [vinfo("x", xs)], [vinfo("logits", None)], inits, 13)
    return Case(m, [("x", rnd(rng, xs, 0, 1), xs)])


def static_batch(build):
    """The case as built, its first dimension above 1 kept static (not made dynamic)."""
    def wrapped(name):
        c = build(name)
        c.static_batch = True
        return c
    return wrapped


case("conv_static_batch2")(static_batch(conv_case([2, 3, 6, 5], [4, 3, 3, 3], pads=[1, 1, 1, 1])))
case("softmax_static_rows3")(static_batch(unary("Softmax", [3, 7], attrs={"axis": -1})))
case("gemm_static_rows3")(static_batch(gemm_case([3, 6], [6, 4], [4])))


# ---- Driver -------------------------------------------------------------------------------------
def dynamic_batch(m):
    """A model whose inputs have a first dimension above 1 gets a dynamic first dimension 'N'
    on every input (and its outputs' shapes inferred again): keyer's graph is per item and a
    runtime sets the batch, so a batch > 1 is a dynamic batch run at that size (the cases
    marked static_batch keep theirs: keyer runs those at batch 1 with the file's first
    dimension). The manifest keeps the sizes ONNX Runtime ran."""
    ins = [i for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
    if not any(i.type.tensor_type.shape.dim[0].dim_value > 1 for i in ins
               if len(i.type.tensor_type.shape.dim)):
        return
    for i in ins:
        i.type.tensor_type.shape.dim[0].dim_param = "N"
    for o in m.graph.output:
        o.type.tensor_type.ClearField("shape")
    del m.graph.value_info[:]
    inferred = onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
    m.graph.CopyFrom(inferred.graph)
    onnx.checker.check_model(m, full_check=True)


def fname(name):
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def dims_str(shape):
    return "x".join(str(int(d)) for d in shape) if len(shape) else "scalar"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "data", "onnx"))
    ap.add_argument("--ort", help="ONNX Runtime directory (scripts/fetch-onnxruntime.sh)")
    args = ap.parse_args()
    ort = args.ort or subprocess.run([os.path.join(REPO, "scripts", "fetch-onnxruntime.sh")],
                                     check=True, capture_output=True,
                                     text=True).stdout.strip().splitlines()[-1]
    env = dict(os.environ, NODE_PATH=os.path.join(ort, "node_modules"))
    ort_run = os.path.join(REPO, "tests", "onnx", "ort_run.js")
    out_root = os.path.join(args.out, "ops")
    names = [n for n, _ in CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    if os.path.isdir(out_root):
        shutil.rmtree(out_root)
    models = {}
    lines = []
    for name, build in CASES:
        c = build(name)
        if not c.static_batch:
            dynamic_batch(c.model)
        d = os.path.join(out_root, name)
        os.makedirs(d, exist_ok=True)
        data = c.model.SerializeToString()
        # cases sharing one model (the dynamic-input model) share its file
        mfile = models.get(data)
        if mfile is None:
            mfile = f"ops/{name}/model.onnx"
            with open(os.path.join(d, "model.onnx"), "wb") as f:
                f.write(data)
            models[data] = mfile
        ins = []
        specs = []
        for iname, arr, shape in c.inputs:
            fn = f"in_{fname(iname)}.f32"
            arr.astype("<f4").tofile(os.path.join(d, fn))
            ins.append(f"{iname}=ops/{name}/{fn}:{dims_str(shape)}")
            specs.append(f"{iname}={os.path.join(d, fn)}:{'x'.join(map(str, shape))}")
        r = subprocess.run(["node", ort_run, os.path.join(args.out, mfile), d] + specs,
                           env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"make_graphs: {name}: ONNX Runtime failed:\n{r.stderr}")
        outs = []
        for line in r.stdout.splitlines():
            o = json.loads(line)
            outs.append(f"{o['name']}=ops/{name}/{o['file']}:{dims_str(o['dims'])}"
                        f":{o['type']}")
        opset = c.model.opset_import[0].version
        f16_tol = "-" if c.f16_tol is None else f"{c.f16_tol:g}"
        tol = "-" if c.tol is None else f"{c.tol:g}"
        size = "-" if c.size is None else f"{c.size[0]}x{c.size[1]}"
        lines.append("\t".join([name, mfile, str(opset), " ".join(ins), " ".join(outs), f16_tol,
                                tol, size]))
        print(f"{name}: opset {opset}, {len(outs)} output(s)")
    with open(os.path.join(args.out, "manifest.tsv"), "w") as f:
        f.write("# ONNX operator test graphs and ONNX Runtime's outputs: generated by\n"
                "# tests/onnx/make_graphs.py (PROVENANCE.md); do not edit by hand.\n"
                "# Columns (tab separated):\n"
                "#   case     name\n"
                "#   model    the .onnx file, relative to this folder\n"
                "#   opset    the model's default-domain opset\n"
                "#   inputs   space-separated NAME=FILE:D0xD1x...  (raw float32, the model's\n"
                "#            own layout; 'scalar' for rank 0)\n"
                "#   outputs  space-separated NAME=FILE:DIMS:TYPE  (ONNX Runtime's output as raw\n"
                "#            float32; TYPE is the model's output type, int64 for ArgMax)\n"
                "#   f16_tol  tolerance of the cuda f16 backend, per element x max(1,|ref|);\n"
                "#            '-' where f16 is not compared (ArgMax with ties)\n"
                "#   tol      the lowest tolerance for every backend, where ONNX Runtime computes\n"
                "#            in half (float16 data between Cast nodes), or '-'\n"
                "#   size     HxW: the height and width to give keyer's loader for a model with\n"
                "#            dynamic image dimensions, or '-' (static model)\n")
        for line in lines:
            f.write(line + "\n")
    print(f"make_graphs: {len(lines)} cases in {args.out}/manifest.tsv")


if __name__ == "__main__":
    main()
