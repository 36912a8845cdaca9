"""When onnxruntime is a valid oracle for integer kernels on this CPU."""

from __future__ import annotations

import functools
import platform
from pathlib import Path


@functools.cache
def onnxruntime_u8s8_is_exact() -> bool:
    """Whether onnxruntime's uint8 x int8 matrix kernels (MatMulInteger, QGemm, QLinearConv, its fused QDQ groups)
    sum their products exactly on this CPU. On x86-64 without VNNI they multiply with AVX2's vpmaddubsw, which adds
    each pair of products into a saturated int16: two products of 255 x 127 overflow it. Its integer results then
    differ from the operators' definition (a QGemm output off by 43 levels, a QDQ CNN's by 148 steps on an AMD
    Zen 3 here), and its unfused float QDQ graph or an exact reference is the oracle instead. Other CPUs are
    taken as exact (Arm's dot-product kernels widen to int32)."""
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686"):
        return True
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False  # not known here: the exact reference is safe on every CPU
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return "avx512_vnni" in flags or "avx_vnni" in flags
