"""The OpenVINO EP end to end: discovery, compiled whole partitions matching the CPU EP and
onnxruntime on random-weight CNN and transformer models, the onnx package's light models, provider
options, Compile failures falling back to the CPU EP, OpenVINO missing or of another release, and
OpenVINO's compiled-blob cache (including a tampered blob)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import mosaicrt
import numpy as np
import onnx
import onnxruntime as ort
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "wheel"))  # the shared random-weight model builders
import models  # noqa: E402

EP = "OpenVINOExecutionProvider"
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _options(threads: int = 2) -> mosaicrt.SessionOptions:
    so = mosaicrt.SessionOptions()
    so.intra_op_num_threads = threads
    return so


def _feed(sess: Any, seed: int = 0) -> dict[str, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    feed = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        feed[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feed


def _partitions(sess: mosaicrt.InferenceSession) -> dict[str, int]:
    counts: dict[str, int] = {}
    for a in sess.get_node_assignments():
        key = f"{a.provider}:{a.partition}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def test_found_without_registration_and_packaging_convention(openvino_ep: str) -> None:
    assert openvino_ep in mosaicrt.get_available_providers()
    devices = [d for d in mosaicrt.get_ep_devices() if d.ep_name == EP]
    assert any(d.device.type == mosaicrt.HardwareDeviceType.CPU for d in devices)
    if not os.environ.get("MOSAICRT_EP_OPENVINO_LIBRARY"):  # the installed wheel
        import mosaicrt_ep_openvino as pkg

        assert pkg.get_ep_names() == [EP]
        assert Path(pkg.get_library_path()).is_file()
        assert pkg.openvino_problem() is None


@pytest.mark.parametrize("name", ["cnn", "transformer"])
def test_random_weight_models_match_cpu_ep_and_onnxruntime(openvino_ep: str, name: str) -> None:
    model = (models.resnet(64, batch=1, widths=(16, 32, 64, 128)) if name == "cnn"
             else models.transformer(seq=16, batch=1, d_model=64, heads=4))
    data = model.SerializeToString()
    sess = mosaicrt.InferenceSession(data, _options(), providers=[openvino_ep])
    parts = _partitions(sess)
    assert list(parts) == [f"{EP}:{EP}_0"], parts  # one whole partition, not a group per node
    assert parts[f"{EP}:{EP}_0"] == len(sess.get_node_assignments()) > 10
    feed = _feed(sess)
    got = sess.run(None, feed)
    cpu = mosaicrt.InferenceSession(data, _options()).run(None, feed)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feed)
    for g, c, r in zip(got, cpu, ref, strict=True):
        np.testing.assert_allclose(g, c, rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(g, r, rtol=1e-3, atol=1e-4)


# light_squeezenet: OpenVINO's own runtime (openvino.Core, f32) gives the same all-zero output as this
# EP, where onnxruntime and the CPU EP give 0.001 everywhere: an OpenVINO difference, not the EP's.
OPENVINO_DIFFERS_FROM_ORT = {"squeezenet"}


@pytest.mark.parametrize("name", ["resnet50", "inception_v1", "densenet121", "squeezenet", "shufflenet"])
def test_onnx_light_models_run_as_whole_partitions(openvino_ep: str, name: str) -> None:
    import openvino

    path = LIGHT / f"light_{name}.onnx"
    if not path.exists():
        pytest.skip(f"{path.name} is not shipped by this onnx")
    sess = mosaicrt.InferenceSession(str(path), _options(), providers=[openvino_ep])
    parts = _partitions(sess)
    assert len(parts) == 1 and next(iter(parts)).startswith(f"{EP}:"), parts
    feed = _feed(sess)
    got = sess.run(None, feed)[0]
    core = openvino.Core()
    direct = core.compile_model(core.read_model(str(path)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    np.testing.assert_allclose(got, direct(list(feed.values()))[0], rtol=1e-4, atol=1e-5)
    if name not in OPENVINO_DIFFERS_FROM_ORT:
        ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feed)[0]
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)


def test_failed_compile_falls_back_to_the_cpu_ep_with_the_reason(openvino_ep: str) -> None:
    model = models.float_mlp((16, 32, 8), batch=1)
    sess = mosaicrt.InferenceSession(model.SerializeToString(), _options(),
                                     providers=[(openvino_ep, {"device_type": "NO_SUCH_DEVICE"})])
    nodes = sess.get_node_assignments()
    assert {a.provider for a in nodes} == {"CPUExecutionProvider"}
    assert all(a.note.startswith(f"{EP} could not compile partition '{EP}_0': compiling the partition for OpenVINO "
                                 "device NO_SUCH_DEVICE failed") for a in nodes)
    feed = _feed(sess)
    np.testing.assert_allclose(sess.run(None, feed)[0],
                               ort.InferenceSession(model.SerializeToString()).run(None, feed)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("options", "message"), [
    ({"precision": "int3"}, "precision must be f32, f16 or bf16, got 'int3'"),
    ({"num_of_threads": "0"}, "num_of_threads must be a positive integer"),
    ({"bogus": "1"}, "unknown provider option 'bogus'"),
])
def test_bad_provider_options(openvino_ep: str, options: dict[str, str], message: str) -> None:
    with pytest.raises(mosaicrt.MosaicrtError, match=message):
        mosaicrt.InferenceSession(models.float_mlp((8, 8), batch=1).SerializeToString(),
                                  providers=[(openvino_ep, options)])


def test_precision_and_threads_options_run(openvino_ep: str) -> None:
    data = models.float_mlp((16, 32, 8), batch=1).SerializeToString()
    sess = mosaicrt.InferenceSession(data, _options(1), providers=[(openvino_ep, {"precision": "f32",
                                                                                  "num_of_threads": "1"})])
    feed = _feed(sess)
    np.testing.assert_allclose(sess.run(None, feed)[0], ort.InferenceSession(data).run(None, feed)[0],
                               rtol=1e-3, atol=1e-4)


def test_compiled_blob_cache_is_reused_and_stale_or_tampered_blobs_are_rebuilt(
        openvino_ep: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    data = models.resnet(32, batch=1, widths=(8, 16, 16, 16)).SerializeToString()
    cache = tmp_path / "cache"
    cache.mkdir()

    def session(**extra: str) -> mosaicrt.InferenceSession:
        options = {"cache_dir": str(cache), **extra}
        return mosaicrt.InferenceSession(data, _options(), providers=[(openvino_ep, options)])

    first = session()
    feed = _feed(first)
    expected = first.run(None, feed)[0]
    blobs = sorted(cache.glob("*.mrtov"))
    assert len(blobs) == 1, list(cache.iterdir())
    blob = blobs[0]
    stamp = blob.stat().st_mtime_ns
    np.testing.assert_array_equal(session().run(None, feed)[0], expected)
    assert blob.stat().st_mtime_ns == stamp  # loaded, not rewritten
    assert "not used" not in capfd.readouterr().err

    raw = bytearray(blob.read_bytes())  # tampered: flip bytes in the middle of the compiled weights
    for i in range(len(raw) // 2, len(raw) // 2 + 64):
        raw[i] ^= 0xFF
    blob.write_bytes(bytes(raw))
    np.testing.assert_allclose(session().run(None, feed)[0], expected, rtol=1e-5, atol=1e-6)
    err = capfd.readouterr().err
    assert f"compiled blob {blob} of partition '{EP}_0' not used: its checksum does not match" in err
    assert blob.read_bytes() != bytes(raw)  # rebuilt

    f16 = session(num_of_threads="1")  # other options: another key, another file
    assert len(list(cache.glob("*.mrtov"))) == 2
    other = next(p for p in cache.glob("*.mrtov") if p != blob)
    del f16
    other.write_bytes(blob.read_bytes())  # a valid blob under the wrong key: stale
    np.testing.assert_allclose(session(num_of_threads="1").run(None, feed)[0], expected, rtol=1e-4, atol=1e-5)
    assert "(stale key)" in capfd.readouterr().err


_FAKE_OPENVINO = r"""
#include <stddef.h>
typedef struct { const char* buildNumber; const char* description; } ov_version_t;
int ov_get_openvino_version(ov_version_t* v) { v->buildNumber = "1999.1.0-fake"; v->description = "fake"; return 0; }
#define STUB(name) int name(void) { return -1; }
STUB(ov_version_free) STUB(ov_core_create) STUB(ov_core_free) STUB(ov_core_get_available_devices)
STUB(ov_available_devices_free) STUB(ov_core_read_model_from_memory_buffer) STUB(ov_model_free)
STUB(ov_core_compile_model) STUB(ov_compiled_model_free) STUB(ov_compiled_model_create_infer_request)
STUB(ov_infer_request_free) STUB(ov_infer_request_set_input_tensor_by_index)
STUB(ov_infer_request_get_output_tensor_by_index) STUB(ov_infer_request_infer) STUB(ov_tensor_create_from_host_ptr)
STUB(ov_tensor_get_shape) STUB(ov_tensor_get_element_type) STUB(ov_tensor_data) STUB(ov_tensor_free)
STUB(ov_shape_create) STUB(ov_shape_free) STUB(ov_compiled_model_export_model) STUB(ov_core_import_model)
STUB(ov_core_set_properties)
const char* ov_get_last_err_msg(void) { return ""; }
"""

_PROBE = textwrap.dedent("""
    import sys, warnings, mosaicrt
    mosaicrt.register_execution_provider_library("ov", sys.argv[1])
    devices = [d for d in mosaicrt.get_ep_devices() if d.ep_name == "OpenVINOExecutionProvider"]
    print("devices", len(devices))
    sess = mosaicrt.InferenceSession(sys.argv[2], providers=["OpenVINOExecutionProvider"])
    print("providers", sess.get_providers())
""")


def _plugin_library() -> Path:
    dev = os.environ.get("MOSAICRT_EP_OPENVINO_LIBRARY")
    if dev:
        return Path(dev)
    import mosaicrt_ep_openvino

    return Path(mosaicrt_ep_openvino.get_library_path())


@pytest.mark.parametrize("case", ["missing", "other_release"])
def test_openvino_missing_or_of_another_release_reports_no_devices(tmp_path: Path, case: str) -> None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if case == "other_release" and cc is None:
        pytest.skip("no C compiler to build a fake libopenvino_c")
    # A copy of the plugin away from the openvino wheel, pointed at an empty or fake OpenVINO folder.
    lib = tmp_path / "plugin" / _plugin_library().name
    lib.parent.mkdir()
    shutil.copy(_plugin_library(), lib)
    ov_dir = tmp_path / "openvino_libs"
    ov_dir.mkdir()
    if case == "other_release":
        soname = next(p.name for p in _real_openvino_libs().iterdir() if p.name.startswith("libopenvino_c.so"))
        src = tmp_path / "fake.c"
        src.write_text(_FAKE_OPENVINO)
        subprocess.run([cc, "-shared", "-fPIC", str(src), "-o", str(ov_dir / soname)], check=True)
    model = tmp_path / "m.onnx"
    model.write_bytes(models.float_mlp((8, 8), batch=1).SerializeToString())
    env = {**os.environ, "MOSAICRT_OPENVINO_LIBS": str(ov_dir), "LD_LIBRARY_PATH": "",
           "MOSAICRT_DISABLE_EP_DISCOVERY": "1"}  # only the copy: not the installed wheel
    out = subprocess.run([sys.executable, "-W", "default", "-c", _PROBE, str(lib), str(model)], env=env,
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "devices 0" in out.stdout and "providers ['CPUExecutionProvider']" in out.stdout
    assert out.stderr.count("Warning:") == 1 and EP in out.stderr, out.stderr  # one warning: the unusable EP


def _real_openvino_libs() -> Path:
    import importlib.metadata

    dist = importlib.metadata.distribution("openvino")
    f = next(f for f in dist.files or () if f.name.startswith("libopenvino_c.so"))
    return Path(str(dist.locate_file(f))).resolve().parent


def test_package_warns_once_when_the_installed_openvino_is_another_release(monkeypatch: pytest.MonkeyPatch) -> None:
    if os.environ.get("MOSAICRT_EP_OPENVINO_LIBRARY"):
        pytest.skip("the installed mosaicrt-ep-openvino package is tested in its wheel's venv")
    import mosaicrt_ep_openvino as pkg

    monkeypatch.setattr(pkg, "OPENVINO_RELEASE", "1999.1.0")
    monkeypatch.setattr(pkg, "_warned", [])
    with pytest.warns(RuntimeWarning, match=r"built against openvino 1999\.1\.0; pip install openvino==1999\.1\.0"):
        pkg.get_library_path()
    pkg.get_library_path()  # no second warning (filterwarnings = error would raise it)
