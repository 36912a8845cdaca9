"""Single-op cases of the CUDA EP suite: name -> (op, feeds, constants, attributes)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 20


def rand(*shape: int, seed: int = 0) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


# name -> (op, inputs, constants, attributes)
OP_CASES: dict[str, tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "matmul_2d": ("MatMul", {"a": rand(7, 9)}, {"b": rand(9, 5)}, {}),
    "matmul_batched_broadcast": ("MatMul", {"a": rand(2, 1, 4, 8), "b": rand(3, 8, 6)}, {}, {}),
    "matmul_folded_batch": ("MatMul", {"a": rand(3, 5, 16)}, {"b": rand(16, 4)}, {}),
    "matmul_vec": ("MatMul", {"a": rand(8), "b": rand(2, 8, 3)}, {}, {}),
    "gemm_trans_bias": (
        "Gemm",
        {"a": rand(6, 4)},
        {"b": rand(5, 6), "c": rand(5)},
        {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0},
    ),
    "gemm_col_bias": ("Gemm", {"a": rand(3, 4)}, {"b": rand(4, 5), "c": rand(3, 1)}, {}),
    "conv_pad_stride": (
        "Conv",
        {"x": rand(2, 3, 11, 9)},
        {"w": rand(8, 3, 3, 3), "bias": rand(8)},
        {"pads": [1, 2, 1, 0], "strides": [2, 1]},
    ),
    "conv_group_dilation": (
        "Conv",
        {"x": rand(1, 8, 10, 10)},
        {"w": rand(8, 2, 3, 3)},
        {"group": 4, "dilations": [2, 2], "auto_pad": "SAME_UPPER"},
    ),
    "conv_depthwise_same_lower": (
        "Conv",
        {"x": rand(1, 6, 7, 7)},
        {"w": rand(6, 1, 4, 4)},
        {"group": 6, "auto_pad": "SAME_LOWER", "strides": [2, 2]},
    ),
    "conv_pointwise": ("Conv", {"x": rand(2, 16, 5, 6)}, {"w": rand(12, 16, 1, 1), "bias": rand(12)}, {}),
    "conv_1d": ("Conv", {"x": rand(2, 4, 20)}, {"w": rand(6, 4, 5)}, {"pads": [2, 2], "strides": [3]}),
    "add_broadcast": ("Add", {"a": rand(2, 3, 4, 5), "b": rand(3, 1, 5)}, {}, {}),
    "sub_scalar": ("Sub", {"a": rand(4, 6)}, {"b": np.array(0.25, np.float32)}, {}),
    "mul_same": ("Mul", {"a": rand(5, 7), "b": rand(5, 7, seed=1)}, {}, {}),
    "div_row": ("Div", {"a": rand(3, 8)}, {"b": np.abs(rand(8)) + 0.5}, {}),
    "relu": ("Relu", {"x": rand(4, 33)}, {}, {}),
    "sigmoid": ("Sigmoid", {"x": rand(4, 33)}, {}, {}),
    "tanh": ("Tanh", {"x": rand(4, 33)}, {}, {}),
    "erf": ("Erf", {"x": rand(4, 33)}, {}, {}),
    "gelu": ("Gelu", {"x": rand(4, 33)}, {}, {}),
    "gelu_tanh": ("Gelu", {"x": rand(4, 33)}, {}, {"approximate": "tanh"}),
    "leaky_relu": ("LeakyRelu", {"x": rand(4, 33)}, {}, {"alpha": 0.2}),
    "softmax_last": ("Softmax", {"x": rand(3, 4, 1000)}, {}, {}),
    "softmax_middle": ("Softmax", {"x": rand(3, 17, 5)}, {}, {"axis": 1}),
    "log_softmax": ("LogSoftmax", {"x": rand(6, 40)}, {}, {}),
    "layer_norm": ("LayerNormalization", {"x": rand(4, 6, 64)}, {"scale": rand(64), "bias": rand(64, seed=2)}, {}),
    "layer_norm_axis1": ("LayerNormalization", {"x": rand(3, 5, 8)}, {"scale": rand(5, 8)}, {"axis": 1}),
    "transpose_perm": ("Transpose", {"x": rand(2, 3, 4, 5)}, {}, {"perm": [0, 2, 3, 1]}),
    "transpose_default": ("Transpose", {"x": rand(3, 7)}, {}, {}),
    "reduce_mean_middle": ("ReduceMean", {"x": rand(4, 5, 6)}, {"axes": np.array([1], np.int64)}, {"keepdims": 1}),
    "reduce_sum_two_axes": ("ReduceSum", {"x": rand(4, 5, 6)}, {"axes": np.array([0, 2], np.int64)}, {"keepdims": 0}),
    "reduce_max_last": ("ReduceMax", {"x": rand(8, 300)}, {"axes": np.array([-1], np.int64)}, {}),
    "reduce_mean_all": ("ReduceMean", {"x": rand(3, 4, 5)}, {}, {"keepdims": 0}),
}


def _value(name: str, shape: list[int] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def single_op(
    op: str,
    inputs: dict[str, np.ndarray[Any, Any]],
    consts: dict[str, np.ndarray[Any, Any]] | None = None,
    outputs: int = 1,
    **attrs: Any,
) -> onnx.ModelProto:
    consts = consts or {}
    names = list(inputs) + list(consts)
    inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    outs = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op, names, outs, name=f"{op}_0", **attrs)
    graph = helper.make_graph(
        [node], op, [_value(k, list(v.shape)) for k, v in inputs.items()], [_value(o, None) for o in outs], inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
