"""Generate the whole-model test data of the native model check (run once; the output is committed).

    python core/tests/native/make_model_data.py      # needs onnx and numpy

For each model this writes, into ``core/tests/native/data/``:

- ``<name>.onnx``          the model (fixed seed, tiny weights)
- ``<name>.<io>.bin``      raw little-endian tensor bytes of each input and each expected output
- ``<name>.case``          the text description model_check.c reads::

      model <file.onnx>
      input  <name> <onnx elem type> <rank> <dims...> <file.bin>
      output <name> <onnx elem type> <rank> <dims...> <file.bin> <tolerance>

Expected outputs come from onnx's reference evaluator (``onnx.reference.ReferenceEvaluator``), so
the native check compares the runtime against an independent implementation on every target,
including under qemu and wine. Shapes are chosen to hit kernel edge tiles (1, 7, 17, 65).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

OUT = Path(__file__).resolve().parent / "data"
OPSET = 17
ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.uint8): TensorProto.UINT8}


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(array, name)


def mlp(rng: np.random.Generator) -> tuple[onnx.ModelProto, dict[str, np.ndarray], float]:
    """MatMul + Add + Relu + MatMul + Add + Softmax (2 x 17 → 33 → 7)."""
    w1 = rng.standard_normal((17, 33)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(33).astype(np.float32) * 0.1
    w2 = rng.standard_normal((33, 7)).astype(np.float32) * 0.3
    b2 = rng.standard_normal(7).astype(np.float32) * 0.1
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h2"]),
        helper.make_node("MatMul", ["h2", "w2"], ["h3"]),
        helper.make_node("Add", ["h3", "b2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 17])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 7])],
        [_init("w1", w1), _init("b1", b1), _init("w2", w2), _init("b2", b2)],
    )
    x = rng.standard_normal((2, 17)).astype(np.float32)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), {"x": x}, 1e-5


def convnet(rng: np.random.Generator) -> tuple[onnx.ModelProto, dict[str, np.ndarray], float]:
    """Conv + Relu + MaxPool + Conv (stride 2) + Relu + GlobalAveragePool + Flatten + Gemm."""
    w1 = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(4).astype(np.float32) * 0.1
    w2 = rng.standard_normal((8, 4, 3, 3)).astype(np.float32) * 0.3
    b2 = rng.standard_normal(8).astype(np.float32) * 0.1
    wf = rng.standard_normal((5, 8)).astype(np.float32) * 0.3
    bf = rng.standard_normal(5).astype(np.float32) * 0.1
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "convnet",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 9, 9])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
        [_init("w1", w1), _init("b1", b1), _init("w2", w2), _init("b2", b2), _init("wf", wf), _init("bf", bf)],
    )
    x = rng.standard_normal((1, 3, 9, 9)).astype(np.float32)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), {"x": x}, 1e-4


def qmatmul(rng: np.random.Generator) -> tuple[onnx.ModelProto, dict[str, np.ndarray], float]:
    """The dynamic-quantized MatMul path: DynamicQuantizeLinear + MatMulInteger (u8 x s8) + rescale.

    M=7, K=65, N=17: odd sizes that leave edge tiles in every direction of an int8 GEMM kernel.
    """
    wq = rng.integers(-127, 128, size=(65, 17), dtype=np.int8)
    w_scale = np.array(0.02, dtype=np.float32)
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "x_scale", "x_zp"]),
        helper.make_node("MatMulInteger", ["xq", "wq", "x_zp"], ["acc"]),
        helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x_scale", "w_scale"], ["scale"]),
        helper.make_node("Mul", ["accf", "scale"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "qmatmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [7, 65])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [7, 17])],
        [_init("wq", wq), _init("w_scale", w_scale)],
    )
    x = rng.standard_normal((7, 65)).astype(np.float32)
    # Exact integer arithmetic after quantization; the tolerance only covers float rounding of
    # the scale product (and a one-step quantization tie, which these inputs do not hit).
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), {"x": x}, 1e-5


def _write_tensor(name: str, stem: str, array: np.ndarray) -> tuple[str, str]:
    file = f"{stem}.{name}.bin"
    (OUT / file).write_bytes(np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes())
    dims = " ".join(str(d) for d in array.shape)
    return file, f"{ELEM[array.dtype]} {array.ndim} {dims}".rstrip()


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for i, build in enumerate((mlp, convnet, qmatmul)):
        rng = np.random.default_rng(20240 + i)
        model, feeds, tol = build(rng)
        model.ir_version = 8
        onnx.checker.check_model(model, full_check=True)
        stem = model.graph.name
        (OUT / f"{stem}.onnx").write_bytes(model.SerializeToString())
        outputs = ReferenceEvaluator(model).run(None, feeds)
        lines = [f"model {stem}.onnx"]
        for name, value in feeds.items():
            file, desc = _write_tensor(name, stem, value)
            lines.append(f"input {name} {desc} {file}")
        for info, value in zip(model.graph.output, outputs, strict=True):
            file, desc = _write_tensor(info.name, stem, np.asarray(value))
            lines.append(f"output {info.name} {desc} {file} {tol:g}")
        (OUT / f"{stem}.case").write_text("\n".join(lines) + "\n", encoding="ascii")
        print(f"wrote {stem}: " + "; ".join(lines[1:]))


if __name__ == "__main__":
    main()
