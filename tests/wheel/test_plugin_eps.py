"""Plugin EPs through the Python API, with a test-only plugin library (plugins/fake_ep.cc)
compiled here: registration, ABI negotiation, bad libraries, devices, AutoEP policies, the
selection delegate, partitioning/fallback and failing kernels."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import mosaicrt
import numpy as np
import onnx
import pytest
from mosaicrt import ExecutionProviderDevicePolicy as Policy
from onnx import TensorProto, helper

HERE = Path(__file__).resolve().parent
PLUGINS = HERE.parent.parent / "core" / "tests" / "plugins"  # test-only libraries, shared with native tests
SOURCE = PLUGINS / "fake_ep.cc"
CXX = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler (c++/g++) to build the test plugin library")
_tags = itertools.count()


def _tag() -> str:
    return f"t{next(_tags)}"


def _compile(out_dir: Path, name: str, *defines: str, cxx: str | None = None) -> Path:
    out = out_dir / f"lib{name}.so"
    cmd = [cxx or str(CXX), "-std=c++17", "-O1", "-shared", "-fPIC", "-fvisibility=hidden",
           f"-I{mosaicrt.get_include()}", *[f"-D{d}" for d in defines], str(SOURCE), "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("plugins")
    return {
        "good": _compile(d, "fake_ep"),
        "future_major": _compile(d, "fake_future_major", "FAKE_ABI_VERSION=0x00020000u"),
        "future_minor": _compile(d, "fake_future_minor", "FAKE_ABI_VERSION=0x00010063u"),
        "past_major": _compile(d, "fake_past_major", "FAKE_ABI_VERSION=0x00000009u"),
        "factory_skew": _compile(d, "fake_factory_skew", "FAKE_FACTORY_ABI=0x00030001u"),
        "no_entry": _compile(d, "fake_no_entry", "FAKE_NO_ENTRY"),
    }


@pytest.fixture
def register(libs: dict[str, Path]) -> Callable[..., str]:
    """Register the good fake library as '<tag>:<kinds>'; unregistered after the test."""
    names: list[str] = []

    def do(kinds: str = "npu") -> str:
        tag = _tag()
        name = f"{tag}:{kinds}"
        mosaicrt.register_execution_provider_library(name, libs["good"])
        names.append(name)
        return tag

    yield do
    import gc

    gc.collect()
    for n in names:
        mosaicrt.unregister_execution_provider_library(n)


def _model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Add", ["x", "x"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("Sigmoid", ["r"], ["y"], name="sigmoid")]
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])


X = np.array([[-1.0, 0.5, 2.0], [3.0, -4.0, 0.0]], np.float32)
EXPECTED = 1 / (1 + np.exp(-np.maximum(X + X, 0)))


def _session(providers: list[object] | None = None, options: mosaicrt.SessionOptions | None = None
             ) -> mosaicrt.InferenceSession:
    return mosaicrt.InferenceSession(_model().SerializeToString(), options, providers=providers)


def _policy_session(policy: Policy) -> mosaicrt.InferenceSession:
    so = mosaicrt.SessionOptions()
    so.set_provider_selection_policy(policy)
    return _session(options=so)


def test_explicit_provider_runs_and_reports_assignment(register: Callable[..., str]) -> None:
    tag = register("npu")
    ep = f"FakeNpu_{tag}"
    assert ep in mosaicrt.get_available_providers()
    sess = _session([ep])
    assert sess.get_providers() == [ep, "CPUExecutionProvider"]
    by_node = {a.node_name: a.provider for a in sess.get_node_assignments()}
    assert by_node == {"add": ep, "relu": ep, "sigmoid": "CPUExecutionProvider"}
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], EXPECTED, rtol=1e-6)


def test_provider_options_and_tuple_form(register: Callable[..., str]) -> None:
    tag = register("npu")
    ep = f"FakeNpu_{tag}"
    sess = _session([(ep, {"ops": "Relu"})])
    by_node = {a.node_name: a.provider for a in sess.get_node_assignments()}
    assert by_node["add"] == "CPUExecutionProvider" and by_node["relu"] == ep
    with pytest.raises(mosaicrt.InvalidArgument, match="unknown provider option 'bogus'"):
        _session([(ep, {"bogus": "1"})])


def test_ep_devices_list_fake_devices_and_cpu(register: Callable[..., str]) -> None:
    tag = register("npu,gpu,cpu")
    devices = mosaicrt.get_ep_devices()
    mine = {(d.ep_name, d.device.type) for d in devices if d.ep_name.endswith(tag)}
    assert mine == {(f"FakeNpu_{tag}", mosaicrt.HardwareDeviceType.NPU),
                    (f"FakeGpu_{tag}", mosaicrt.HardwareDeviceType.GPU),
                    (f"FakeCpu_{tag}", mosaicrt.HardwareDeviceType.CPU)}
    cpu = devices[-1]
    assert cpu.ep_name == "CPUExecutionProvider" and cpu.device.type == mosaicrt.HardwareDeviceType.CPU
    assert cpu.device.metadata["arch"] and "isa" in cpu.device.metadata
    npu = next(d for d in devices if d.ep_name == f"FakeNpu_{tag}")
    assert npu.device.vendor_id == 0xFA4E and npu.ep_version == "9.9.9" and npu.library_path.endswith(".so")


@pytest.mark.parametrize(("policy", "kinds", "winner"), [
    (Policy.PREFER_NPU, "npu,gpu", "Npu"),
    (Policy.PREFER_GPU, "npu,gpu", "Gpu"),
    (Policy.MAX_PERFORMANCE, "npu,gpu", "Gpu"),
    (Policy.MAX_PERFORMANCE, "npu", "Npu"),  # no GPU: NPU before CPU
    (Policy.MAX_EFFICIENCY, "npu,gpu", "Npu"),
    (Policy.MIN_OVERALL_POWER, "npu,gpu", "Npu"),
    (Policy.PREFER_CPU, "npu,gpu,cpu", "Cpu"),
    (Policy.DEFAULT, "npu,gpu,cpu", "Cpu"),
    (Policy.PREFER_GPU, "npu", None),  # no GPU: falls back to the CPU EP
    (Policy.MAX_EFFICIENCY, "gpu", None),  # no NPU: CPU
    (Policy.PREFER_CPU, "npu,gpu", None),  # no plugin EP for the CPU: the CPU EP
])
def test_policies_pick_by_definition(register: Callable[..., str], policy: Policy, kinds: str,
                                     winner: str | None) -> None:
    tag = register(kinds)
    sess = _policy_session(policy)
    expected = ([f"Fake{winner}_{tag}"] if winner else []) + ["CPUExecutionProvider"]
    assert sess.get_providers() == expected
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], EXPECTED, rtol=1e-6)


def test_no_policy_means_cpu_only(register: Callable[..., str]) -> None:
    register("npu,gpu,cpu")
    assert _session().get_providers() == ["CPUExecutionProvider"]


def test_delegate_is_honoured(register: Callable[..., str]) -> None:
    tag = register("npu,gpu")
    seen: list[list[mosaicrt.EpDevice]] = []

    def choose(devices: list[mosaicrt.EpDevice], model_meta: dict[str, str], runtime_meta: dict[str, str],
               max_selections: int) -> list[mosaicrt.EpDevice]:
        seen.append(devices)
        return [d for d in devices if d.ep_name == f"FakeGpu_{tag}"]

    so = mosaicrt.SessionOptions()
    so.set_provider_selection_policy_delegate(choose)
    sess = _session(options=so)
    assert sess.get_providers() == [f"FakeGpu_{tag}", "CPUExecutionProvider"]
    assert seen and any(d.ep_name == "CPUExecutionProvider" for d in seen[0])


def test_delegate_exception_surfaces(register: Callable[..., str]) -> None:
    register("npu")

    class Boom(Exception):
        pass

    def choose(*_: object) -> list[mosaicrt.EpDevice]:
        raise Boom("no suitable device for this model")

    so = mosaicrt.SessionOptions()
    so.set_provider_selection_policy_delegate(choose)
    with pytest.raises(Boom, match="no suitable device"):
        _session(options=so)


def test_delegate_selecting_nothing_is_an_error(register: Callable[..., str]) -> None:
    register("npu")
    so = mosaicrt.SessionOptions()
    so.set_provider_selection_policy_delegate(lambda *_: [])
    with pytest.raises(mosaicrt.ExecutionProviderError, match="selected no EP device"):
        _session(options=so)


def test_add_provider_for_devices(register: Callable[..., str]) -> None:
    tag = register("npu,gpu")
    gpu = [d for d in mosaicrt.get_ep_devices() if d.ep_name == f"FakeGpu_{tag}"]
    so = mosaicrt.SessionOptions()
    so.add_provider_for_devices(gpu, {"ops": "Add"})
    sess = _session(options=so)
    assert sess.get_providers() == [f"FakeGpu_{tag}", "CPUExecutionProvider"]
    assert next(a.provider for a in sess.get_node_assignments()) == f"FakeGpu_{tag}"
    mixed = [d for d in mosaicrt.get_ep_devices() if d.ep_name.endswith(tag)]
    with pytest.raises(mosaicrt.InvalidArgument, match="several EPs"):
        mosaicrt.SessionOptions().add_provider_for_devices(mixed)


def test_kernel_failure_names_library_and_node(register: Callable[..., str], libs: dict[str, Path]) -> None:
    tag = register("npu")
    sess = _session([(f"FakeNpu_{tag}", {"fail": "compute"})])
    with pytest.raises(mosaicrt.RuntimeFailure) as info:
        sess.run(None, {"x": X})
    msg = str(info.value)
    assert "simulated kernel crash" in msg and str(libs["good"]) in msg and "'add'" in msg


def test_kernel_preparation_failure_falls_back_to_cpu(register: Callable[..., str]) -> None:
    tag = register("npu")
    sess = _session([(f"FakeNpu_{tag}", {"fail": "create_kernel"})])
    assignments = sess.get_node_assignments()
    assert all(a.provider == "CPUExecutionProvider" for a in assignments)
    assert "could not prepare it: cannot prepare Add" in assignments[0].note
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], EXPECTED, rtol=1e-6)


@pytest.mark.parametrize("step", ["capability", "create_ep"])
def test_ep_setup_failure_falls_back_or_is_a_clear_error(register: Callable[..., str], libs: dict[str, Path],
                                                         step: str) -> None:
    tag = register("npu")
    ep = f"FakeNpu_{tag}"
    with pytest.warns(UserWarning, match="falling back") as record:  # onnxruntime's fallback to the CPU EP
        sess = _session([(ep, {"fail": step})])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    warning = str(record[0].message)
    assert ep in warning and str(libs["good"]) in warning
    sess.disable_fallback()
    with pytest.raises(mosaicrt.MosaicrtError) as info:
        sess.set_providers([(ep, {"fail": step})])
    assert ep in str(info.value) and str(libs["good"]) in str(info.value)


def test_unknown_provider_warns_lists_available_and_falls_back() -> None:
    with pytest.warns(UserWarning, match=r"'NopeExecutionProvider' is not in available provider names.*CPUExecution"):
        sess = _session(["NopeExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]


def test_register_twice_and_unregister_while_in_use(libs: dict[str, Path]) -> None:
    name = f"{_tag()}:npu"
    mosaicrt.register_execution_provider_library(name, libs["good"])
    try:
        with pytest.raises(mosaicrt.ExecutionProviderError, match="already registered"):
            mosaicrt.register_execution_provider_library(name, libs["good"])
        sess = _session([f"FakeNpu_{name.split(':', maxsplit=1)[0]}"])
        with pytest.raises(mosaicrt.ExecutionProviderError, match="in use by 1 live session"):
            mosaicrt.unregister_execution_provider_library(name)
        del sess
        import gc

        gc.collect()
    finally:
        mosaicrt.unregister_execution_provider_library(name)
    assert name not in mosaicrt.get_registered_execution_provider_libraries()
    with pytest.raises(mosaicrt.ExecutionProviderError, match="no EP library is registered"):
        mosaicrt.unregister_execution_provider_library(name)


@pytest.mark.parametrize(("variant", "plugin_abi"), [("future_major", "2.0"), ("future_minor", "1.99"),
                                                     ("past_major", "0.9"), ("factory_skew", "3.1")])
def test_abi_skew_is_refused_with_both_versions(libs: dict[str, Path], variant: str, plugin_abi: str) -> None:
    with pytest.raises(mosaicrt.ExecutionProviderError) as info:
        mosaicrt.register_execution_provider_library(f"{_tag()}:npu", libs[variant])
    msg = str(info.value)
    assert f"EP ABI {plugin_abi}" in msg and "provides EP ABI 1." in msg and str(libs[variant]) in msg


def test_library_without_entry_point(libs: dict[str, Path]) -> None:
    with pytest.raises(mosaicrt.ExecutionProviderError, match="does not export MrtEpCreateFactories") as info:
        mosaicrt.register_execution_provider_library(_tag(), libs["no_entry"])
    assert str(libs["no_entry"]) in str(info.value)


def test_not_a_library(tmp_path: Path) -> None:
    junk = tmp_path / "libjunk.so"
    junk.write_bytes(b"not a shared library")
    with pytest.raises(mosaicrt.ExecutionProviderError, match=r"cannot load EP library '.*libjunk\.so'"):
        mosaicrt.register_execution_provider_library(_tag(), junk)
    with pytest.raises(mosaicrt.ExecutionProviderError, match="does not exist"):
        mosaicrt.register_execution_provider_library(_tag(), tmp_path / "missing.so")


def test_library_for_another_architecture(tmp_path: Path) -> None:
    machine = mosaicrt.get_build_details().get("arch")
    cross = "arm-linux-gnueabihf-g++" if machine != "armv7" else "aarch64-linux-gnu-g++"
    if shutil.which(cross) is None:
        pytest.skip(f"{cross} not installed: cannot build a plugin for another architecture")
    lib = _compile(tmp_path, "fake_foreign", cxx=cross)
    with pytest.raises(mosaicrt.ExecutionProviderError, match=r"is built for arm.*but this process runs on") as info:
        mosaicrt.register_execution_provider_library(_tag(), lib)
    assert str(lib) in str(info.value)


def _fake_distribution(root: Path, entry_points: str) -> None:
    info = root / "mosaicrt_fake_ep-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mosaicrt-fake-ep\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[mosaicrt.execution_providers]\n{entry_points}\n")


def _run_python(code: str, path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(path), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-W", "always", "-c", code], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_installed_ep_is_discovered_through_entry_points(tmp_path: Path, libs: dict[str, Path]) -> None:
    (tmp_path / "fake_ep_pkg.py").write_text(f"def library_path():\n    return {str(libs['good'])!r}\n")
    _fake_distribution(tmp_path, "fakeep = fake_ep_pkg:library_path")
    code = ("import mosaicrt; print(mosaicrt.get_available_providers()); "
            "print(mosaicrt.get_registered_execution_provider_libraries())")
    out = _run_python(code, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "FakeNpu_fakeep" in out.stdout and str(libs["good"]) in out.stdout


def test_broken_installed_ep_warns_and_the_rest_works(tmp_path: Path, libs: dict[str, Path]) -> None:
    (tmp_path / "fake_ep_pkg.py").write_text(f"def library_path():\n    return {str(libs['future_major'])!r}\n")
    _fake_distribution(tmp_path, "skewed = fake_ep_pkg:library_path")
    code = "import mosaicrt; print(mosaicrt.get_available_providers()); print(mosaicrt.get_ep_discovery_problems())"
    out = _run_python(code, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "RuntimeWarning" in out.stderr and "EP ABI 2.0" in out.stderr
    assert "'CPUExecutionProvider'" in out.stdout and "mosaicrt-fake-ep 1.0" in out.stdout


def test_nvidia_gpus_are_discovered_through_the_driver_library(tmp_path: Path, libs: dict[str, Path]) -> None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the simulated NVIDIA driver library")
    nvml_dir = tmp_path / "driver"
    nvml_dir.mkdir()
    subprocess.run([cc, "-shared", "-fPIC", str(PLUGINS / "fake_nvml.c"), "-o",
                    str(nvml_dir / "libnvidia-ml.so.1")], check=True, capture_output=True)
    code = (f"import mosaicrt; mosaicrt.register_execution_provider_library('nv:nvgpu', {str(libs['good'])!r}); "
            "gpus = [d.device for d in mosaicrt.get_ep_devices() if d.ep_name == 'FakeNvgpu_nv']; "
            "print([(g.name, hex(g.vendor_id), hex(g.device_id), g.metadata) for g in gpus]); "
            "print(mosaicrt.get_device())")
    env = {"LD_LIBRARY_PATH": os.pathsep.join([str(nvml_dir), os.environ.get("LD_LIBRARY_PATH", "")])}
    with_driver = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True,
                                 text=True, timeout=120, check=False)
    assert with_driver.returncode == 0, with_driver.stderr
    assert "NVIDIA Simulated GPU 0" in with_driver.stdout and "NVIDIA Simulated GPU 1" in with_driver.stdout
    assert "'0x10de', '0x2330'" in with_driver.stdout and "'memory_mb': '81920'" in with_driver.stdout
    assert "'cuda_device_ordinal': '1'" in with_driver.stdout and with_driver.stdout.strip().endswith("GPU")
    # Without the driver: no GPU, and not a word on stderr.
    without = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert without.returncode == 0 and without.stderr == ""
    assert without.stdout.startswith("[]")
