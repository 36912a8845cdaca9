"""CUDA EP wheel tests: run in a venv where mosaicrt, mosaicrt-ep-cuda and the nvidia runtime wheels
are installed (eps/cuda/tools/gpu_check.sh sets one up). Without an NVIDIA GPU and driver the
tests that need one skip with the reason; the rest check that the plugin loads harmlessly.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The wheel suite's model builders (tests/wheel/models.py) are reused for the model tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "wheel"))
