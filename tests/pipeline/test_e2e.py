"""End to end on the real core: build the linux-x86_64 wheel, rebuild as a no-op, test it, bind the record.

Slow (compiles the core; ccache makes reruns quicker) but run by `nox -s ci`. It builds into a
temporary dist folder with its own state, so it never touches dist/ or a running `nox -s build`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.hashing import sha256_file
from pipeline.records import records_for_wheel

from .conftest import REPO

pytestmark = pytest.mark.slow

for _module in ("build", "scikit_build_core", "auditwheel", "conans", "virtualenv"):
    pytest.importorskip(_module, reason="build tools are installed by `nox -s ci`")


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    # Same depth as build/pipeline so ccache (base dir = repository root) shares hits with `nox -s build`.
    folder = REPO / "build" / "e2e-test"
    shutil.rmtree(folder, ignore_errors=True)
    monkeypatch.setenv("CCACHE_DIR", str(REPO / "build" / "pipeline" / "ccache"))
    # the winml cell signs its EP catalog root with development keys: keep them out of the user's config
    monkeypatch.setenv("MOSAICRT_CONFIG_DIR", str(tmp_path / "config"))
    for name in [k for k in os.environ if k.startswith("MOSAICRT_CATALOG_")]:
        monkeypatch.delenv(name)
    return folder


def test_core_wheel_build_noop_and_test_record(tmp_path: Path, work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dist = tmp_path / "dist"
    common = ["--dist-dir", str(dist), "--work-dir", str(work)]
    t0 = time.monotonic()
    assert main(["build", *common]) == 0
    cold = time.monotonic() - t0
    # every host cell: the core and the plugin EPs whose SDKs are here, each with its own VERSION
    wheels = sorted((dist / "linux-x86_64").glob("*.whl"))
    cells = json.loads((work / "reports" / "build-report.json").read_text())["cells"]
    built = [c for c in cells if c["status"] == "built"]
    assert sorted(Path(c["wheel"]).name for c in built) == [w.name for w in wheels]
    for c in built:
        path = REPO / ("core" if c["component"] == "core" else f"eps/{c['component']}") / "VERSION"
        assert c["version"] == path.read_text().strip() and f"-{c['version']}-" in Path(c["wheel"]).name
    wheel = next(w for w in wheels if w.name.startswith("mosaicrt-"))
    version = (REPO / "core" / "VERSION").read_text().strip()
    assert re.fullmatch(rf"mosaicrt-{re.escape(version)}-py3-none-manylinux_\d+_\d+_x86_64\.whl", wheel.name)
    assert wheel.stat().st_size < 3_000_000

    t0 = time.monotonic()
    assert main(["build", *common]) == 0
    noop = time.monotonic() - t0
    report = json.loads((work / "reports" / "build-report.json").read_text())
    core = next(c for c in report["cells"] if c["cell"] == "core/default/linux-x86_64")
    assert core["status"] == "up-to-date"
    assert core["sha256"] == sha256_file(wheel)
    assert noop < 5.0, f"no-op build took {noop:.1f}s (cold {cold:.1f}s)"
    capsys.readouterr()

    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    # the core wheel only: the release test (test_e2e_release.py) tests every host wheel on every CPython
    rc = main(["test", *common, "--python", python, "--wheel", str(wheel)])
    out = capsys.readouterr().out
    records = records_for_wheel(work / "records" / "tests", wheel)
    assert python in records, out
    rec = records[python]
    assert rec.sha256 == sha256_file(wheel)
    assert rec.counts.tests > 0
    assert rec.outcome == "passed" and rc == 0, f"wheel suite failed: {rec.counts} (log {rec.log})"

    tampered = tmp_path / wheel.name
    data = bytearray(wheel.read_bytes())
    data[len(data) // 2] ^= 0xFF
    tampered.write_bytes(bytes(data))
    assert records_for_wheel(work / "records" / "tests", tampered) == {}
