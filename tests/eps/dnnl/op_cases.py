"""Single-node float32 cases for the oneDNN EP: (id, model, feeds), plus cases it must decline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

Feeds = dict[str, np.ndarray[Any, Any]]
Case = tuple[str, onnx.ModelProto, Feeds]

OPSET = 17


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def single(op: str, inputs: dict[str, np.ndarray[Any, Any]], consts: dict[str, np.ndarray[Any, Any]],  # noqa: PLR0917
           order: Sequence[str], n_out: int = 1, domain: str = "", opset: int = OPSET, **attrs: Any) -> onnx.ModelProto:
    """A one-node model: `order` lists the node's inputs by name ("" = omitted)."""
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, list(order), outs, name=f"{op.lower()}_node", domain=domain, **attrs)
    g_in = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in inputs.items()]
    g_out = [helper.make_tensor_value_info(o, TensorProto.INT64 if (op, i) == ("MaxPool", 1) else TensorProto.FLOAT,
                                           None) for i, o in enumerate(outs)]
    inits = [numpy_helper.from_array(np.ascontiguousarray(v), k) for k, v in consts.items()]
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(helper.make_graph([node], op, g_in, g_out, inits), opset_imports=imports)
    model.ir_version = 8
    return model


def _f(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray[Any, Any]:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def conv_case(cid: str, x_shape: tuple[int, ...], w_shape: tuple[int, ...], *, bias: bool = True, seed: int = 0,
              op: str = "Conv", domain: str = "", **attrs: Any) -> Case:
    rng = _rng(seed)
    x = _f(rng, *x_shape)
    consts = {"w": _f(rng, *w_shape, scale=0.3)}
    order = ["x", "w"]
    if bias:
        consts["b"] = _f(rng, w_shape[0], scale=0.1)
        order.append("b")
    return cid, single(op, {"x": x}, consts, order, domain=domain, **attrs), {"x": x}


def supported_cases() -> list[Case]:
    rng = _rng(42)
    cases: list[Case] = [
        conv_case("conv_3x3_pad1", (1, 8, 10, 10), (16, 8, 3, 3), pads=[1, 1, 1, 1]),
        conv_case("conv_no_bias_stride2", (2, 4, 9, 9), (6, 4, 3, 3), bias=False, strides=[2, 2]),
        conv_case("conv_asym_pads", (1, 3, 7, 8), (5, 3, 2, 3), pads=[0, 1, 2, 0]),
        conv_case("conv_dilation2", (1, 4, 12, 12), (8, 4, 3, 3), dilations=[2, 2], pads=[2, 2, 2, 2]),
        conv_case("conv_groups2", (1, 8, 6, 6), (8, 4, 3, 3), group=2, pads=[1, 1, 1, 1]),
        conv_case("conv_depthwise", (1, 16, 8, 8), (16, 1, 3, 3), group=16, pads=[1, 1, 1, 1]),
        conv_case("conv_same_upper_stride2", (1, 3, 9, 9), (4, 3, 3, 3), auto_pad="SAME_UPPER", strides=[2, 2]),
        conv_case("conv_same_lower", (1, 3, 8, 8), (4, 3, 2, 2), auto_pad="SAME_LOWER"),
        conv_case("conv_valid", (1, 3, 8, 8), (4, 3, 3, 3), auto_pad="VALID"),
        conv_case("conv_1x1_wide", (1, 32, 5, 5), (64, 32, 1, 1)),
        conv_case("conv_1d", (2, 3, 20), (4, 3, 5), pads=[2, 2]),
        conv_case("conv_3d", (1, 2, 5, 6, 6), (3, 2, 3, 3, 3), pads=[1, 1, 1, 1, 1, 1]),
        conv_case("conv_stem_7x7", (1, 3, 32, 32), (16, 3, 7, 7), strides=[2, 2], pads=[3, 3, 3, 3]),
        conv_case("conv_kernel_shape_attr", (1, 3, 6, 6), (2, 3, 3, 3), kernel_shape=[3, 3]),
    ]
    # Pooling.
    x = _f(rng, 2, 3, 9, 9)
    cases += [
        ("maxpool_3x3_s2_p1", single("MaxPool", {"x": x}, {}, ["x"], kernel_shape=[3, 3], strides=[2, 2],
                                     pads=[1, 1, 1, 1]), {"x": x}),
        ("maxpool_dilated", single("MaxPool", {"x": x}, {}, ["x"], kernel_shape=[2, 2], dilations=[2, 2]), {"x": x}),
        ("maxpool_same_upper", single("MaxPool", {"x": x}, {}, ["x"], kernel_shape=[2, 2], strides=[2, 2],
                                      auto_pad="SAME_UPPER"), {"x": x}),
        ("avgpool_exclude_pad", single("AveragePool", {"x": x}, {}, ["x"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
         {"x": x}),
        ("avgpool_include_pad", single("AveragePool", {"x": x}, {}, ["x"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                       count_include_pad=1), {"x": x}),
        ("avgpool_1d", single("AveragePool", {"x": x[:, :, 0]}, {}, ["x"], kernel_shape=[4], strides=[2]),
         {"x": x[:, :, 0].copy()}),
        ("globalavgpool", single("GlobalAveragePool", {"x": x}, {}, ["x"]), {"x": x}),
        ("globalmaxpool", single("GlobalMaxPool", {"x": x}, {}, ["x"]), {"x": x}),
    ]
    # BatchNormalization (inference).
    c = 3
    bn = {"s": _f(rng, c) + 1.0, "b": _f(rng, c), "m": _f(rng, c, scale=0.1),
          "v": np.abs(_f(rng, c)).astype(np.float32) + 0.5}
    cases += [
        ("batchnorm_4d", single("BatchNormalization", {"x": x}, bn, ["x", "s", "b", "m", "v"], epsilon=1e-3),
         {"x": x}),
        ("batchnorm_2d", single("BatchNormalization", {"x": x[:, :, 0, 0]}, bn, ["x", "s", "b", "m", "v"]),
         {"x": x[:, :, 0, 0].copy()}),
    ]
    # MatMul / Gemm.
    a, b = _f(rng, 5, 7), _f(rng, 7, 3)
    a3, b3 = _f(rng, 2, 5, 7), _f(rng, 1, 7, 4)
    cases += [
        ("matmul_2d_const_b", single("MatMul", {"a": a}, {"b": b}, ["a", "b"]), {"a": a}),
        ("matmul_2d_runtime_b", single("MatMul", {"a": a, "b": b}, {}, ["a", "b"]), {"a": a, "b": b}),
        ("matmul_batched_broadcast", single("MatMul", {"a": a3, "b": b3}, {}, ["a", "b"]), {"a": a3, "b": b3}),
        ("matmul_3d_by_2d_const", single("MatMul", {"a": a3}, {"b": b3[0]}, ["a", "b"]), {"a": a3}),
        ("matmul_vector_rhs", single("MatMul", {"a": a}, {"b": b[:, 0].copy()}, ["a", "b"]), {"a": a}),
        ("matmul_vector_lhs", single("MatMul", {"a": a[0].copy()}, {"b": b}, ["a", "b"]), {"a": a[0].copy()}),
    ]
    c_row, c_full, c_col = _f(rng, 3), _f(rng, 5, 3), _f(rng, 5, 1)
    cases += [
        ("gemm_plain", single("Gemm", {"a": a}, {"b": b, "c": c_row}, ["a", "b", "c"]), {"a": a}),
        ("gemm_transB_alpha_beta", single("Gemm", {"a": a}, {"b": b.T.copy(), "c": c_full}, ["a", "b", "c"],
                                          transB=1, alpha=0.5, beta=2.0), {"a": a}),
        ("gemm_transA", single("Gemm", {"a": a.T.copy()}, {"b": b, "c": c_col}, ["a", "b", "c"], transA=1),
         {"a": a.T.copy()}),
        ("gemm_both_trans_no_c", single("Gemm", {"a": a.T.copy(), "b": b.T.copy()}, {}, ["a", "b"], transA=1,
                                        transB=1), {"a": a.T.copy(), "b": b.T.copy()}),
        ("gemm_runtime_c", single("Gemm", {"a": a, "c": c_full}, {"b": b}, ["a", "b", "c"], alpha=1.5),
         {"a": a, "c": c_full}),
        ("gemm_scalar_c", single("Gemm", {"a": a}, {"b": b, "c": np.array(0.25, np.float32)}, ["a", "b", "c"]),
         {"a": a}),
    ]
    # Elementwise.
    e = _f(rng, 2, 3, 4, 5)
    cases += [
        ("relu", single("Relu", {"x": e}, {}, ["x"]), {"x": e}),
        ("sigmoid", single("Sigmoid", {"x": e}, {}, ["x"]), {"x": e}),
        ("tanh", single("Tanh", {"x": e}, {}, ["x"]), {"x": e}),
        ("leakyrelu", single("LeakyRelu", {"x": e}, {}, ["x"], alpha=0.2), {"x": e}),
        ("clip_min_max", single("Clip", {"x": e}, {"lo": np.array(-0.5, np.float32), "hi": np.array(0.7, np.float32)},
                                ["x", "lo", "hi"]), {"x": e}),
        ("clip_max_only", single("Clip", {"x": e}, {"hi": np.array(0.3, np.float32)}, ["x", "", "hi"]), {"x": e}),
        ("clip_opset6_attrs", single("Clip", {"x": e}, {}, ["x"], opset=6, min=-0.1, max=0.2), {"x": e}),
    ]
    y_same, y_row, y_chan = _f(rng, 2, 3, 4, 5), _f(rng, 5), _f(rng, 1, 3, 1, 1)
    both_a, both_b = _f(rng, 2, 1, 4, 1), _f(rng, 1, 3, 1, 5)
    for op in ("Add", "Sub", "Mul", "Div"):
        denom = (lambda v: np.where(np.abs(v) < 0.2, 1.0, v).astype(np.float32)) if op == "Div" else (lambda v: v)
        cases += [
            (f"{op.lower()}_same", single(op, {"a": e, "b": denom(y_same)}, {}, ["a", "b"]),
             {"a": e, "b": denom(y_same)}),
            (f"{op.lower()}_row_bcast", single(op, {"a": e, "b": denom(y_row)}, {}, ["a", "b"]),
             {"a": e, "b": denom(y_row)}),
            (f"{op.lower()}_lhs_bcast", single(op, {"a": y_chan, "b": denom(e)}, {}, ["a", "b"]),
             {"a": y_chan, "b": denom(e)}),
            (f"{op.lower()}_both_bcast", single(op, {"a": both_a, "b": denom(both_b)}, {}, ["a", "b"]),
             {"a": both_a, "b": denom(both_b)}),
        ]
    cases += [
        ("add_const_bias", single("Add", {"a": e}, {"b": y_chan}, ["a", "b"]), {"a": e}),
        ("softmax_last", single("Softmax", {"x": e}, {}, ["x"]), {"x": e}),
        ("softmax_axis1", single("Softmax", {"x": e}, {}, ["x"], axis=1), {"x": e}),
        ("softmax_opset11_flatten", single("Softmax", {"x": e}, {}, ["x"], opset=11, axis=2), {"x": e}),
    ]
    # com.microsoft FusedConv (what the core's optimizer makes of Conv+Relu).
    for act, params in (("Relu", []), ("LeakyRelu", [0.1]), ("Sigmoid", []), ("Tanh", []), ("Clip", [-0.5, 0.5])):
        kw: dict[str, Any] = {"activation": act}
        if params:
            kw["activation_params"] = params
        cases.append(conv_case(f"fusedconv_{act.lower()}", (1, 8, 6, 6), (8, 8, 3, 3), op="FusedConv",
                               domain="com.microsoft", pads=[1, 1, 1, 1], **kw))
    return cases


def declined_cases() -> list[Case]:
    """Valid float32 nodes the EP must leave to the CPU EP (unsupported attribute combinations)."""
    rng = _rng(7)
    x = _f(rng, 1, 3, 9, 9)
    e = _f(rng, 2, 3)
    cases: list[Case] = [
        ("maxpool_ceil_mode", single("MaxPool", {"x": x}, {}, ["x"], kernel_shape=[2, 2], strides=[2, 2],
                                     ceil_mode=1), {"x": x}),
        ("maxpool_with_indices", single("MaxPool", {"x": x}, {}, ["x"], n_out=2, kernel_shape=[2, 2]), {"x": x}),
        ("conv_runtime_weights", single("Conv", {"x": x, "w": _f(rng, 4, 3, 3, 3)}, {}, ["x", "w"]),
         {"x": x, "w": _f(rng, 4, 3, 3, 3)}),
        ("clip_runtime_bounds", single("Clip", {"x": e, "lo": np.array(-0.1, np.float32)}, {}, ["x", "lo"]),
         {"x": e, "lo": np.array(-0.1, np.float32)}),
        ("gemm_runtime_c_beta", single("Gemm", {"a": e, "c": _f(rng, 2, 4)}, {"b": _f(rng, 3, 4)}, ["a", "b", "c"],
                                       beta=0.5), {"a": e, "c": _f(rng, 2, 4)}),
    ]
    return cases
