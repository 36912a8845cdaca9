"""Real-architecture models run through mosaicrt and compared with onnxruntime as the oracle.

The models (tests/wheel/models.py) are ResNet-, Inception-, DenseNet- and ShuffleNet-style CNNs, a transformer
encoder and a dynamically quantized MLP, built with seeded random weights. Inputs are smaller than the
benchmark's so the module stays well under a minute on two cores.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import models  # tests/wheel is on sys.path (conftest.py)
import mosaicrt
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

THREADS = 2
RTOL = 1e-3
ATOL = 1e-4

Feed = dict[str, np.ndarray[Any, Any]]


@functools.cache
def _float_models() -> dict[str, tuple[Callable[[], onnx.ModelProto], Callable[[int, np.random.Generator], Feed]]]:
    return {
        "resnet": (lambda: models.resnet(64), models.image_feed(64)),
        "inception": (lambda: models.inception(64), models.image_feed(64)),
        "densenet": (lambda: models.densenet(64, layers=(4, 6, 4)), models.image_feed(64)),
        "shufflenet": (lambda: models.shufflenet(64), models.image_feed(64)),
        "mobilenet_v2": (lambda: models.mobilenet_v2(64), models.image_feed(64)),
        "transformer_erf": (lambda: models.transformer(d_model=128, heads=4, d_ff=512, layers=2, gelu="erf"),
                            models.sequence_feed(24, 128)),
        "transformer_gelu": (lambda: models.transformer(d_model=128, heads=4, d_ff=512, layers=2, gelu="op"),
                             models.sequence_feed(24, 128)),
        # odd spatial sizes exercise the border/padding paths of Conv and the pools
        "resnet_odd": (lambda: models.resnet(57, widths=(16, 32, 48, 64), blocks=(1, 1, 1, 1), classes=10),
                       models.image_feed(57)),
        "inception_odd": (lambda: models.inception(45, classes=10), models.image_feed(45)),
        "shufflenet_odd": (lambda: models.shufflenet(51, stages=((48, 2), (96, 2)), classes=10),
                           models.image_feed(51)),
        "mobilenet_v2_odd": (lambda: models.mobilenet_v2(61, classes=10), models.image_feed(61)),
    }


FLOAT_MODELS = sorted(_float_models())
QUANT_TYPES = ["QUInt8", "QInt8"]


@functools.cache
def _model_bytes(name: str) -> bytes:
    model = models.quantized_mlp(name.removeprefix("qmlp_")) if name.startswith("qmlp_") else _float_models()[name][0]()
    data: bytes = model.SerializeToString()
    return data


def _feed(name: str, batch: int, seed: int = 0) -> Feed:
    rng = np.random.default_rng(1000 + seed)
    if name.startswith("qmlp_"):
        return models.vector_feed(256)(batch, rng)
    return _float_models()[name][1](batch, rng)


def _mosaicrt(model: bytes, threads: int = THREADS) -> mosaicrt.InferenceSession:
    options = mosaicrt.SessionOptions()
    options.intra_op_num_threads = threads
    return mosaicrt.InferenceSession(model, options, providers=["CPUExecutionProvider"])


@functools.cache
def _ort(model: bytes) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


@functools.cache
def _session(name: str, threads: int = THREADS) -> mosaicrt.InferenceSession:
    return _mosaicrt(_model_bytes(name), threads)


def _assert_close(actual: list[np.ndarray[Any, Any]], expected: list[np.ndarray[Any, Any]]) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, a.shape, e.dtype, e.shape)
        np.testing.assert_allclose(a, e, rtol=RTOL, atol=ATOL)


# --- float models -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FLOAT_MODELS)
def test_matches_onnxruntime(name: str) -> None:
    feed = _feed(name, batch=1)
    _assert_close(_session(name).run(None, feed), _ort(_model_bytes(name)).run(None, feed))


@pytest.mark.parametrize("name", FLOAT_MODELS)
def test_dynamic_batch(name: str) -> None:
    sess = _session(name)
    shape = sess.get_inputs()[0].shape
    assert shape is not None and shape[0] == "N"
    feed = _feed(name, batch=3, seed=1)
    out = sess.run(None, feed)
    _assert_close(out, _ort(_model_bytes(name)).run(None, feed))
    # each sample of the batch gives what it gives alone
    single = sess.run(None, {k: v[1:2] for k, v in feed.items()})
    _assert_close([out[0][1:2]], single)


@pytest.mark.parametrize("seq", [1, 7, 33])
def test_dynamic_sequence_length(seq: int) -> None:
    name = "transformer_erf"
    sess = _session(name)
    assert sess.get_inputs()[0].shape == ["N", "S", 128]
    feed = {"input": np.random.default_rng(seq).standard_normal((2, seq, 128)).astype(np.float32)}
    _assert_close(sess.run(None, feed), _ort(_model_bytes(name)).run(None, feed))


@pytest.mark.parametrize("name", ["resnet", "transformer_erf"])
def test_repeated_runs_are_identical(name: str) -> None:
    sess = _session(name)
    feed = _feed(name, batch=2, seed=2)
    first = sess.run(None, feed)
    second = sess.run(None, feed)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["resnet", "shufflenet", "transformer_erf"])
def test_thread_counts_agree(name: str) -> None:
    feed = _feed(name, batch=2, seed=3)
    one = _session(name, threads=1).run(None, feed)
    two = _session(name, threads=2).run(None, feed)
    _assert_close(two, one)


def test_io_metadata() -> None:
    sess = _session("resnet")
    (inp,) = sess.get_inputs()
    (out,) = sess.get_outputs()
    assert (inp.name, inp.type, inp.shape) == ("input", "tensor(float)", ["N", 3, 64, 64])
    assert (out.name, out.type, out.shape) == ("logits", "tensor(float)", ["N", 1000])


# --- dynamically quantized MLP ----------------------------------------------------------------------------------


def _last_layer_step(model: onnx.ModelProto, feed: Feed) -> tuple[bytes, float]:
    """The dequantization step of the last MatMulInteger: activation scale x weight scale.

    quantize_dynamic turns each MatMul into DynamicQuantizeLinear(x) -> MatMulInteger(xq, wq, xz, wz) -> Cast
    -> Mul(x_scale * w_scale) (-> Add bias). The activation scale is computed at run time, so it is exposed
    as an extra graph output and read from the oracle's run (_quantized_oracle). Returns the extended model and
    the step."""
    producers = {out: node for node in model.graph.node for out in node.output}
    last_mm = [n for n in model.graph.node if n.op_type == "MatMulInteger"][-1]
    dql = producers[last_mm.input[0]]
    assert dql.op_type == "DynamicQuantizeLinear", dql.op_type
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    w_scale_name = next(n for n in model.graph.node if n.op_type == "Mul" and dql.output[1] in n.input).input
    w_scale = float(next(inits[n] for n in w_scale_name if n in inits).reshape(-1)[0])
    extended = onnx.ModelProto()
    extended.CopyFrom(model)
    extended.graph.output.append(onnx.helper.make_tensor_value_info(dql.output[1], onnx.TensorProto.FLOAT, []))
    data = extended.SerializeToString()
    x_scale = float(_quantized_oracle(data).run([dql.output[1]], feed)[0])
    return data, x_scale * w_scale


def _quantized_oracle(data: bytes) -> Any:
    """onnxruntime where its uint8 x int8 products are exact on this CPU, else onnx's reference implementation
    (numpy, exact integer products): see oracles.onnxruntime_u8s8_is_exact."""
    from oracles import onnxruntime_u8s8_is_exact

    if onnxruntime_u8s8_is_exact():
        return _ort(data)
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(onnx.load_from_string(data))


@pytest.mark.parametrize("weight_type", QUANT_TYPES)
@pytest.mark.parametrize("batch", [1, 5])
def test_quantized_mlp(weight_type: str, batch: int) -> None:
    name = f"qmlp_{weight_type}"
    model = onnx.load_from_string(_model_bytes(name))
    ops = {n.op_type for n in model.graph.node}
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= ops, ops
    feed = _feed(name, batch=batch)
    data, step = _last_layer_step(model, feed)
    got = _mosaicrt(data).run(None, feed)
    want = _quantized_oracle(data).run(None, feed)
    # The int8/uint8 products are accumulated exactly in int32 by both runtimes, so the only differences come
    # from float work around them: the Mul by x_scale * w_scale (a few ulps) and the bias Add. One unit of the
    # last layer's int32 accumulator dequantizes to `step` = x_scale * w_scale, so agreeing within one step
    # means both runtimes produced the same quantized activations and integer results; a single activation
    # quantized one level differently would already move an output by |w_q| steps (typically tens).
    assert got[0].shape == want[0].shape == (batch, 10)
    assert got[1] == pytest.approx(want[1], rel=1e-6), "activation scale of the last layer"
    diff = float(np.max(np.abs(got[0] - want[0])))
    assert diff <= step, f"max abs diff {diff:.3g} exceeds one dequantization step {step:.3g}"
