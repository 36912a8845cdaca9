"""A small ResNet-style CNN built with onnx.helper (seeded weights), for the oneDNN EP model tests and bench."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.n = 0

    def _name(self, p: str) -> str:
        self.n += 1
        return f"{p}_{self.n}"

    def const(self, p: str, v: np.ndarray[Any, Any]) -> str:
        name = self._name(p)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(v.astype(np.float32)), name))
        return name

    def op(self, op: str, ins: list[str], **attrs: Any) -> str:
        out = self._name(op.lower())
        self.nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1,  # noqa: PLR0917
             bias: bool = False) -> str:
        fan = (cin // group) * k * k
        w = self.rng.normal(0, np.sqrt(2.0 / fan), (cout, cin // group, k, k))
        ins = [x, self.const("w", w)]
        if bias:
            ins.append(self.const("b", self.rng.normal(0, 0.05, cout)))
        return self.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group)

    def bn(self, x: str, c: int) -> str:
        r = self.rng
        stats = [r.uniform(0.6, 1.2, c), r.normal(0, 0.1, c), r.normal(0, 0.1, c), r.uniform(0.6, 1.4, c)]
        names = [self.const(p, v) for p, v in zip(("s", "b", "m", "v"), stats, strict=True)]
        return self.op("BatchNormalization", [x, *names], epsilon=1e-5)

    def conv_bn(self, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1,  # noqa: PLR0917
                relu: bool = True) -> str:
        y = self.bn(self.conv(x, cin, cout, k, stride, group), cout)
        return self.op("Relu", [y]) if relu else y


def resnet_small(batch: int = 2,  # noqa: PLR0917
                 size: int = 32, widths: tuple[int, ...] = (16, 32, 64), classes: int = 10,
                 seed: int = 3, head: str = "Gemm") -> onnx.ModelProto:
    """Stem conv-BN-Relu + MaxPool, basic residual blocks (Add) per stage with stride-2 1x1 projections,
    a depthwise-separable block, GlobalAveragePool, Flatten and a Gemm (or MatMul+Add) head, then Softmax."""
    g = _Builder(seed)
    x = g.conv_bn("input", 3, widths[0], 3)
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = widths[0]
    for stage, w in enumerate(widths):
        stride = 1 if stage == 0 else 2
        y = g.conv_bn(x, c, w, 3, stride)
        y = g.conv_bn(y, w, w, 3, relu=False)
        short = x if stride == 1 and c == w else g.conv_bn(x, c, w, 1, stride, relu=False)
        x = g.op("Relu", [g.op("Add", [y, short])])
        c = w
    # Depthwise-separable block (MobileNet-style), with a biased conv and Clip (Relu6).
    y = g.conv_bn(x, c, c, 3, group=c)
    y = g.op("Clip", [g.conv(y, c, c, 1, bias=True), g.const("lo", np.array(0.0)), g.const("hi", np.array(6.0))])
    x = g.op("Add", [x, y])
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    wt = g.rng.normal(0, np.sqrt(1.0 / c), (c, classes))
    b = g.rng.normal(0, 0.05, classes)
    if head == "Gemm":
        logits = g.op("Gemm", [x, g.const("fc_w", wt.T.copy()), g.const("fc_b", b)], transB=1)
    else:
        logits = g.op("Add", [g.op("MatMul", [x, g.const("fc_w", wt)]), g.const("fc_b", b)])
    g.nodes.append(helper.make_node("Softmax", [logits], ["probs"], name="softmax", axis=-1))
    graph = helper.make_graph(g.nodes, "resnet_small",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, size, size])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, classes]),
                               helper.make_tensor_value_info(logits, TensorProto.FLOAT, [batch, classes])],
                              g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="mosaicrt-tests")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model
