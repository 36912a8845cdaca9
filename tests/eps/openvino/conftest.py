"""OpenVINO EP tests: run against the installed mosaicrt-ep-openvino wheel (`nox -s test`) or a dev build.

Dev tree: MOSAICRT_EP_OPENVINO_LIBRARY=<build>/libmosaicrt_ep_openvino.so registers that library
(with MOSAICRT_OPENVINO_LIBS=<site-packages>/openvino/libs when the openvino wheel is not beside it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


@pytest.fixture(scope="session")
def openvino_ep() -> str:
    """The EP's name, available in this process: registered by entry point (wheel) or by hand (dev build)."""
    import mosaicrt

    ep = "OpenVINOExecutionProvider"
    dev = os.environ.get("MOSAICRT_EP_OPENVINO_LIBRARY")
    if dev and ep not in mosaicrt.get_available_providers():
        mosaicrt.register_execution_provider_library("openvino", dev)
    return ep
