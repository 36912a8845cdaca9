"""Builders for real-architecture ONNX models with deterministic random weights.

Used by the wheel model tests (test_models.py) and by the benchmark (bench/run_bench.py). Everything is built
with onnx.helper and numpy: no downloads, no framework. Weights are drawn from a seeded generator with
He-style scales (std = sqrt(2 / fan_in)) and BatchNormalization statistics near identity, so activations stay
O(1) through deep stacks and a float32 comparison against onnxruntime with rtol 1e-3 is meaningful.

Each builder takes the input size (and width/depth knobs) so tests can use small inputs while the benchmark
uses the full-size architecture. The batch dimension is the symbolic "N" unless ``batch`` is an int.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DEFAULT_OPSET = 17
IR_VERSION = 8  # an IR version every onnxruntime release that reads opset 17 accepts


class GraphBuilder:
    """Accumulates nodes and initializers with unique names and seeded random weights."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._counter = 0

    def name(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}_{self._counter}"

    def const(self, prefix: str, value: np.ndarray[Any, Any]) -> str:
        name = self.name(prefix)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def ints(self, prefix: str, values: Sequence[int]) -> str:
        return self.const(prefix, np.asarray(values, dtype=np.int64))

    def op(self, op_type: str, inputs: Sequence[str], **attrs: Any) -> str:
        """Add a single-output node; returns its output name."""
        return self.op_multi(op_type, inputs, 1, **attrs)[0]

    def op_multi(self, op_type: str, inputs: Sequence[str], n_out: int, **attrs: Any) -> list[str]:
        """Add a node with n_out outputs; returns their names."""
        base = self.name(op_type.lower())
        outputs = [base] if n_out == 1 else [f"{base}_o{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outputs, name=base, **attrs))
        return outputs

    # --- layers -------------------------------------------------------------------------------------------

    def conv(self, x: str, c_in: int, c_out: int, k: int, *, stride: int = 1, pad: int | None = None,
             group: int = 1, bias: bool = False) -> str:
        pad = k // 2 if pad is None else pad
        fan_in = (c_in // group) * k * k
        w = self.rng.normal(0.0, np.sqrt(2.0 / fan_in), size=(c_out, c_in // group, k, k)).astype(np.float32)
        inputs = [x, self.const("w", w)]
        if bias:
            inputs.append(self.const("b", self.rng.normal(0.0, 0.05, size=c_out).astype(np.float32)))
        return self.op("Conv", inputs, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4,
                       group=group)

    def bn(self, x: str, c: int) -> str:
        scale = self.rng.uniform(0.6, 1.2, size=c).astype(np.float32)
        bias = self.rng.normal(0.0, 0.1, size=c).astype(np.float32)
        mean = self.rng.normal(0.0, 0.1, size=c).astype(np.float32)
        var = self.rng.uniform(0.6, 1.4, size=c).astype(np.float32)
        return self.op("BatchNormalization", [x, self.const("bn_s", scale), self.const("bn_b", bias),
                                              self.const("bn_m", mean), self.const("bn_v", var)],
                       epsilon=1e-5)

    def relu(self, x: str) -> str:
        return self.op("Relu", [x])

    def conv_bn(self, x: str, c_in: int, c_out: int, k: int, *, stride: int = 1, group: int = 1,
                relu: bool = True) -> str:
        y = self.bn(self.conv(x, c_in, c_out, k, stride=stride, group=group), c_out)
        return self.relu(y) if relu else y

    def linear_weight(self, c_in: int, c_out: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        w = self.rng.normal(0.0, np.sqrt(1.0 / c_in), size=(c_in, c_out)).astype(np.float32)
        b = self.rng.normal(0.0, 0.05, size=c_out).astype(np.float32)
        return w, b

    def classifier(self, x: str, c: int, classes: int) -> str:
        """GlobalAveragePool -> Flatten -> Gemm(transB=1), the usual CNN head."""
        pooled = self.op("Flatten", [self.op("GlobalAveragePool", [x])], axis=1)
        w, b = self.linear_weight(c, classes)
        return self.op("Gemm", [pooled, self.const("fc_w", w.T.copy()), self.const("fc_b", b)], transB=1)

    def model(self, name: str, inputs: Sequence[onnx.ValueInfoProto], outputs: Sequence[tuple[str, list[Any]]],
              opset: int = DEFAULT_OPSET, extra_opsets: Sequence[tuple[str, int]] = ()) -> onnx.ModelProto:
        out_infos = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n, shape in outputs]
        graph = helper.make_graph(self.nodes, name, list(inputs), out_infos, self.initializers)
        imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
        model = helper.make_model(graph, opset_imports=imports, producer_name="mosaicrt-tests")
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model, full_check=True)
        return model


def _image_input(batch: int | str, channels: int, size: int) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, channels, size, size])


def _rename_output(g: GraphBuilder, last: str, new: str) -> None:
    """Give the final node's output a stable graph-output name."""
    node = g.nodes[-1]
    assert node.output[0] == last
    node.output[0] = new


# --- ResNet ---------------------------------------------------------------------------------------------------


def resnet(size: int = 224, *, batch: int | str = "N", widths: Sequence[int] = (64, 128, 256, 512),
           blocks: Sequence[int] = (2, 2, 2, 2), classes: int = 1000, seed: int = 1) -> onnx.ModelProto:
    """ResNet-18-style: 7x7/2 stem + BN + Relu + MaxPool 3x3/2, basic residual blocks (two 3x3 conv-BN),
    stride-2 downsampling with 1x1 conv-BN projections, GlobalAveragePool, Flatten, Gemm."""
    g = GraphBuilder(seed)
    x = g.conv_bn("input", 3, widths[0], 7, stride=2)
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = widths[0]
    for stage, (width, count) in enumerate(zip(widths, blocks, strict=True)):
        for i in range(count):
            stride = 2 if stage > 0 and i == 0 else 1
            y = g.conv_bn(x, c, width, 3, stride=stride)
            y = g.conv_bn(y, width, width, 3, relu=False)
            shortcut = x if stride == 1 and c == width else g.conv_bn(x, c, width, 1, stride=stride, relu=False)
            x = g.relu(g.op("Add", [y, shortcut]))
            c = width
    out = g.classifier(x, c, classes)
    _rename_output(g, out, "logits")
    return g.model("resnet", [_image_input(batch, 3, size)], [("logits", [batch, classes])])


# --- MobileNetV2 ----------------------------------------------------------------------------------------------


def mobilenet_v2(size: int = 224, *, batch: int | str = "N", classes: int = 1000, seed: int = 8) -> onnx.ModelProto:
    """MobileNetV2 (width 1.0): a 3x3/2 stem, 17 inverted residual blocks (1x1 expansion by 6, depthwise 3x3,
    linear 1x1 projection, the residual Add where the shape allows), a 1x1 to 1280, the classifier. Conv + BN +
    Relu6 (Clip 0..6) as exported by torch."""
    g = GraphBuilder(seed)
    lo, hi = g.const("clip_lo", np.array(0, np.float32)), g.const("clip_hi", np.array(6, np.float32))

    def conv_bn_relu6(x: str, c_in: int, c_out: int, k: int, *, stride: int = 1, group: int = 1) -> str:
        return g.op("Clip", [g.bn(g.conv(x, c_in, c_out, k, stride=stride, group=group), c_out), lo, hi])

    x, c = conv_bn_relu6("input", 3, 32, 3, stride=2), 32
    for expand, width, count, first_stride in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                                               (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(count):
            stride = first_stride if i == 0 else 1
            h = x if expand == 1 else conv_bn_relu6(x, c, c * expand, 1)
            h = conv_bn_relu6(h, c * expand, c * expand, 3, stride=stride, group=c * expand)
            h = g.bn(g.conv(h, c * expand, width, 1), width)
            x = g.op("Add", [x, h]) if stride == 1 and c == width else h
            c = width
    x = conv_bn_relu6(x, c, 1280, 1)
    out = g.classifier(x, 1280, classes)
    _rename_output(g, out, "logits")
    return g.model("mobilenet_v2", [_image_input(batch, 3, size)], [("logits", [batch, classes])])


# --- Inception ------------------------------------------------------------------------------------------------


def _inception_module(g: GraphBuilder, x: str, c_in: int, widths: tuple[int, int, int, int, int, int]
                      ) -> tuple[str, int]:
    """widths: 1x1 branch, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool projection."""
    c1, c3r, c3, c5r, c5, cp = widths
    b1 = g.relu(g.conv(x, c_in, c1, 1, bias=True))
    b3 = g.relu(g.conv(g.relu(g.conv(x, c_in, c3r, 1, bias=True)), c3r, c3, 3, bias=True))
    b5 = g.relu(g.conv(g.relu(g.conv(x, c_in, c5r, 1, bias=True)), c5r, c5, 5, bias=True))
    pooled = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    bp = g.relu(g.conv(pooled, c_in, cp, 1, bias=True))
    return g.op("Concat", [b1, b3, b5, bp], axis=1), c1 + c3 + c5 + cp


def inception(size: int = 224, *, batch: int | str = "N", classes: int = 1000, seed: int = 2) -> onnx.ModelProto:
    """GoogLeNet-style: 7x7/2 stem conv + Relu + MaxPool + LRN, 1x1/3x3 convs + LRN + MaxPool, two inception
    modules (parallel 1x1 / 1x1-3x3 / 1x1-5x5 / maxpool-1x1 branches joined by Concat), head."""
    g = GraphBuilder(seed)
    x = g.relu(g.conv("input", 3, 64, 7, stride=2, bias=True))
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1])
    x = g.op("LRN", [x], size=5, alpha=1e-4, beta=0.75, bias=1.0)
    x = g.relu(g.conv(x, 64, 64, 1, bias=True))
    x = g.relu(g.conv(x, 64, 192, 3, bias=True))
    x = g.op("LRN", [x], size=5, alpha=1e-4, beta=0.75, bias=1.0)
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1])
    x, c = _inception_module(g, x, 192, (64, 96, 128, 16, 32, 32))
    x, c = _inception_module(g, x, c, (128, 128, 192, 32, 96, 64))
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1])
    x, c = _inception_module(g, x, c, (192, 96, 208, 16, 48, 64))
    out = g.classifier(x, c, classes)
    _rename_output(g, out, "logits")
    return g.model("inception", [_image_input(batch, 3, size)], [("logits", [batch, classes])])


# --- DenseNet -------------------------------------------------------------------------------------------------


def densenet(size: int = 224, *, batch: int | str = "N", growth: int = 32, layers: Sequence[int] = (6, 12, 8),
             classes: int = 1000, seed: int = 3) -> onnx.ModelProto:
    """DenseNet-style: stem conv + BN + Relu + MaxPool, dense blocks whose layers are BN-Relu-Conv1x1(4k)-
    BN-Relu-Conv3x3(k) concatenated onto their input, transitions BN-Relu-Conv1x1(c/2)-AveragePool 2x2/2."""
    g = GraphBuilder(seed)
    c = 2 * growth
    x = g.conv_bn("input", 3, c, 7, stride=2)
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for block, count in enumerate(layers):
        for _ in range(count):
            y = g.conv(g.relu(g.bn(x, c)), c, 4 * growth, 1)
            y = g.conv(g.relu(g.bn(y, 4 * growth)), 4 * growth, growth, 3)
            x = g.op("Concat", [x, y], axis=1)
            c += growth
        if block != len(layers) - 1:
            x = g.conv(g.relu(g.bn(x, c)), c, c // 2, 1)
            c //= 2
            x = g.op("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.relu(g.bn(x, c))
    out = g.classifier(x, c, classes)
    _rename_output(g, out, "logits")
    return g.model("densenet", [_image_input(batch, 3, size)], [("logits", [batch, classes])])


# --- ShuffleNet -----------------------------------------------------------------------------------------------


def _channel_shuffle(g: GraphBuilder, x: str, c: int, groups: int, hw: int) -> str:
    # [N, C, H, W] -> [N, g, C/g, H, W] -> swap the group axes -> [N, C, H, W]; 0 copies the (dynamic) batch.
    y = g.op("Reshape", [x, g.ints("shuffle_shape", [0, groups, c // groups, hw, hw])])
    y = g.op("Transpose", [y], perm=[0, 2, 1, 3, 4])
    return g.op("Reshape", [y, g.ints("unshuffle_shape", [0, -1, hw, hw])])


def shufflenet(size: int = 224, *, batch: int | str = "N",
               stages: Sequence[tuple[int, int]] = ((116, 4), (232, 8), (464, 4)), groups: int = 2,
               classes: int = 1000, seed: int = 4) -> onnx.ModelProto:
    """ShuffleNet-style (v2 units with grouped 1x1 convs): stem 3x3/2 conv + MaxPool; each stage opens with a
    stride-2 unit (two branches: depthwise 3x3/2 + 1x1, and grouped 1x1 + depthwise 3x3/2 + grouped 1x1,
    Concat) followed by units that Split the channels in half, transform one half (grouped 1x1 -> channel
    shuffle -> depthwise 3x3 -> grouped 1x1), Concat, and channel-shuffle the result."""
    g = GraphBuilder(seed)
    c = 24
    x = g.conv_bn("input", 3, c, 3, stride=2)
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    hw = (size + 1) // 2
    hw = (hw + 1) // 2
    for width, count in stages:
        half = width // 2
        hw_out = (hw + 1) // 2
        left = g.conv_bn(g.conv_bn(x, c, c, 3, stride=2, group=c, relu=False), c, half, 1)
        right = g.conv_bn(x, c, half, 1, group=groups)
        right = g.conv_bn(right, half, half, 3, stride=2, group=half, relu=False)
        right = g.conv_bn(right, half, half, 1, group=groups)
        x = _channel_shuffle(g, g.op("Concat", [left, right], axis=1), width, 2, hw_out)
        hw, c = hw_out, width
        for _ in range(count - 1):
            keep, branch = g.op_multi("Split", [x, g.ints("split", [half, half])], 2, axis=1)
            y = g.conv_bn(branch, half, half, 1, group=groups)
            y = _channel_shuffle(g, y, half, groups, hw)
            y = g.conv_bn(y, half, half, 3, group=half, relu=False)
            y = g.conv_bn(y, half, half, 1, group=groups)
            x = _channel_shuffle(g, g.op("Concat", [keep, y], axis=1), width, 2, hw)
    x = g.conv_bn(x, c, 1024, 1)
    out = g.classifier(x, 1024, classes)
    _rename_output(g, out, "logits")
    return g.model("shufflenet", [_image_input(batch, 3, size)], [("logits", [batch, classes])])


# --- Transformer encoder --------------------------------------------------------------------------------------


def transformer(*, seq: int | str = "S", batch: int | str = "N", d_model: int = 256, heads: int = 4,
                d_ff: int = 1024, layers: int = 2, gelu: str = "erf", seed: int = 5) -> onnx.ModelProto:
    """Pre-LN transformer encoder: per layer LayerNormalization, Q/K/V MatMul+Add, Reshape/Transpose to
    heads, Q.K^T scaled by 1/sqrt(d_head), Softmax, .V, heads merged, output projection, residual Add, then
    LayerNormalization + MLP (MatMul+Add, GELU, MatMul+Add) + residual Add; a final LayerNormalization.

    gelu="erf" spells GELU as 0.5*x*(1+Erf(x/sqrt 2)) at opset 17; gelu="op" uses the Gelu op (opset 20)."""
    if gelu not in ("erf", "op"):
        raise ValueError(f"gelu must be 'erf' or 'op', got {gelu!r}")
    g = GraphBuilder(seed)
    d_head = d_model // heads

    def layer_norm(x: str) -> str:
        gamma = g.rng.uniform(0.8, 1.2, size=d_model).astype(np.float32)
        beta = g.rng.normal(0.0, 0.05, size=d_model).astype(np.float32)
        return g.op("LayerNormalization", [x, g.const("ln_g", gamma), g.const("ln_b", beta)], axis=-1,
                    epsilon=1e-5)

    def dense(x: str, c_in: int, c_out: int) -> str:
        w, b = g.linear_weight(c_in, c_out)
        return g.op("Add", [g.op("MatMul", [x, g.const("w", w)]), g.const("b", b)])

    def split_heads(x: str) -> str:  # [N, S, D] -> [N, H, S, Dh]
        y = g.op("Reshape", [x, g.ints("heads_shape", [0, 0, heads, d_head])])
        return g.op("Transpose", [y], perm=[0, 2, 1, 3])

    x = "input"
    for _ in range(layers):
        h = layer_norm(x)
        q, k, v = (split_heads(dense(h, d_model, d_model)) for _ in range(3))
        k_t = g.op("Transpose", [k], perm=[0, 1, 3, 2])
        scores = g.op("Mul", [g.op("MatMul", [q, k_t]),
                              g.const("scale", np.array(1.0 / np.sqrt(d_head), dtype=np.float32))])
        attn = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        merged = g.op("Reshape", [g.op("Transpose", [attn], perm=[0, 2, 1, 3]),
                                  g.ints("merge_shape", [0, 0, d_model])])
        x = g.op("Add", [x, dense(merged, d_model, d_model)])
        h = dense(layer_norm(x), d_model, d_ff)
        if gelu == "op":
            h = g.op("Gelu", [h])
        else:
            erf = g.op("Erf", [g.op("Div", [h, g.const("sqrt2", np.array(np.sqrt(2.0), dtype=np.float32))])])
            one_plus = g.op("Add", [erf, g.const("one", np.array(1.0, dtype=np.float32))])
            h = g.op("Mul", [g.op("Mul", [h, one_plus]), g.const("half", np.array(0.5, dtype=np.float32))])
        x = g.op("Add", [x, dense(h, d_ff, d_model)])
    out = layer_norm(x)
    _rename_output(g, out, "hidden")
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, seq, d_model])
    return g.model("transformer", [inp], [("hidden", [batch, seq, d_model])],
                   opset=20 if gelu == "op" else DEFAULT_OPSET)


# --- Dynamically quantized MLP --------------------------------------------------------------------------------


def float_mlp(sizes: Sequence[int] = (256, 512, 512, 10), *, batch: int | str = "N", seed: int = 6) -> onnx.ModelProto:
    """MatMul+Add(+Relu) layers; the last layer has no Relu. Input "input" [N, sizes[0]], output "logits"."""
    g = GraphBuilder(seed)
    x = "input"
    for i, (c_in, c_out) in enumerate(itertools.pairwise(sizes)):
        w, b = g.linear_weight(c_in, c_out)
        x = g.op("Add", [g.op("MatMul", [x, g.const("w", w)]), g.const("b", b)])
        if i != len(sizes) - 2:
            x = g.relu(x)
    _rename_output(g, x, "logits")
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, sizes[0]])
    return g.model("mlp", [inp], [("logits", [batch, sizes[-1]])])


def quantized_mlp(weight_type: str = "QUInt8", *, sizes: Sequence[int] = (256, 512, 512, 10),
                  batch: int | str = "N", seed: int = 6) -> onnx.ModelProto:
    """float_mlp quantized by onnxruntime.quantization.quantize_dynamic (weight_type "QUInt8" or "QInt8"):
    each MatMul becomes DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(scales) (+ Add bias)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    qtype = {"QUInt8": QuantType.QUInt8, "QInt8": QuantType.QInt8}[weight_type]
    with tempfile.TemporaryDirectory(prefix="mosaicrt-qmlp-") as tmp:
        src = Path(tmp) / "mlp.onnx"
        dst = Path(tmp) / "mlp.quant.onnx"
        onnx.save(float_mlp(sizes, batch=batch, seed=seed), src)
        quantize_dynamic(src, dst, weight_type=qtype)
        return onnx.load(dst)


def qdq_resnet(size: int = 224, *, calibration_batches: int = 2, seed: int = 7) -> onnx.ModelProto:
    """resnet(size) prepared the way onnxruntime's quantization docs say (quant_pre_process: shape inference and
    BatchNormalization folded into the convolutions), then quantized by quantize_static in the QDQ format (uint8
    activations, int8 per-channel weights): every Conv/Gemm sits between DequantizeLinear and QuantizeLinear,
    which is what the quantizer emits by default."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(seed)
            self.feeds = iter([{"input": rng.standard_normal((1, 3, size, size)).astype(np.float32)}
                               for _ in range(calibration_batches)])

        def get_next(self) -> dict[str, np.ndarray[Any, Any]] | None:
            return next(self.feeds, None)

    with tempfile.TemporaryDirectory(prefix="mosaicrt-qdq-") as tmp:
        src, pre, dst = Path(tmp) / "resnet.onnx", Path(tmp) / "resnet.pre.onnx", Path(tmp) / "resnet.qdq.onnx"
        onnx.save(resnet(size, batch=1), src)
        quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)  # static shapes: onnx inference suffices
        quantize_static(str(pre), str(dst), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        return onnx.load(dst)


# --- registry -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    """A named model with a builder and a deterministic input generator."""

    name: str
    build: Callable[[], onnx.ModelProto]
    make_input: Callable[[int, np.random.Generator], dict[str, np.ndarray[Any, Any]]]


def image_feed(size: int) -> Callable[[int, np.random.Generator], dict[str, np.ndarray[Any, Any]]]:
    def make(batch: int, rng: np.random.Generator) -> dict[str, np.ndarray[Any, Any]]:
        return {"input": rng.standard_normal((batch, 3, size, size)).astype(np.float32)}
    return make


def sequence_feed(seq: int, d_model: int) -> Callable[[int, np.random.Generator], dict[str, np.ndarray[Any, Any]]]:
    def make(batch: int, rng: np.random.Generator) -> dict[str, np.ndarray[Any, Any]]:
        return {"input": rng.standard_normal((batch, seq, d_model)).astype(np.float32)}
    return make


def vector_feed(width: int) -> Callable[[int, np.random.Generator], dict[str, np.ndarray[Any, Any]]]:
    def make(batch: int, rng: np.random.Generator) -> dict[str, np.ndarray[Any, Any]]:
        return {"input": rng.standard_normal((batch, width)).astype(np.float32)}
    return make


def benchmark_models() -> dict[str, ModelSpec]:
    """Full-size models for bench/run_bench.py."""
    return {
        "resnet18": ModelSpec("resnet18", lambda: resnet(224), image_feed(224)),
        "inception": ModelSpec("inception", lambda: inception(224), image_feed(224)),
        "densenet": ModelSpec("densenet", lambda: densenet(224), image_feed(224)),
        "shufflenet": ModelSpec("shufflenet", lambda: shufflenet(224), image_feed(224)),
        "mobilenet_v2": ModelSpec("mobilenet_v2", lambda: mobilenet_v2(224), image_feed(224)),
        "transformer": ModelSpec("transformer", lambda: transformer(d_model=256, heads=4, d_ff=1024, layers=4),
                                 sequence_feed(128, 256)),
        # the same block on 4 tokens: weight-bound matrix products of 4 rows (a decoding step's shape)
        "transformer_4tok": ModelSpec("transformer_4tok",
                                      lambda: transformer(d_model=256, heads=4, d_ff=1024, layers=4),
                                      sequence_feed(4, 256)),
        "qmlp_u8": ModelSpec("qmlp_u8", lambda: quantized_mlp("QUInt8"), vector_feed(256)),
        "qmlp_s8": ModelSpec("qmlp_s8", lambda: quantized_mlp("QInt8"), vector_feed(256)),
        "qdq_resnet18": ModelSpec("qdq_resnet18", lambda: qdq_resnet(224), image_feed(224)),
    }
