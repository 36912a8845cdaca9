"""oneDNN EP tests: run against the installed mosaicrt-ep-dnnl wheel (`nox -s test`) or a dev build.

Dev tree: MOSAICRT_EP_DNNL_LIBRARY=<build>/libmosaicrt_ep_dnnl.so selects the plugin library;
tests that need the mosaicrt core skip when it is not importable.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def plugin_library() -> str:
    env = os.environ.get("MOSAICRT_EP_DNNL_LIBRARY")
    if env:
        return env
    import mosaicrt_ep_dnnl

    return mosaicrt_ep_dnnl.library_path()


@pytest.fixture(scope="session")
def dnnl_library() -> str:
    return plugin_library()
