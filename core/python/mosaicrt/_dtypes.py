"""ONNX element types <-> numpy dtypes and onnxruntime's type strings ("tensor(float)")."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ._errors import InvalidArgument

# ONNX element type code -> (numpy type, onnxruntime-style type string). The types numpy lacks (bfloat16,
# float8, float4, int4, int2) come from the optional ml_dtypes package, whose import alone costs most of a
# second: it is imported the first time such a type is asked for (`numpy_type_of`), or picked up once the
# caller has imported it (an ml_dtypes array can only exist then), never by `import mosaicrt`.
ELEM_TYPES: dict[int, tuple[Any, str]] = {
    1: (np.float32, "tensor(float)"),
    2: (np.uint8, "tensor(uint8)"),
    3: (np.int8, "tensor(int8)"),
    4: (np.uint16, "tensor(uint16)"),
    5: (np.int16, "tensor(int16)"),
    6: (np.int32, "tensor(int32)"),
    7: (np.int64, "tensor(int64)"),
    8: (None, "tensor(string)"),
    9: (np.bool_, "tensor(bool)"),
    10: (np.float16, "tensor(float16)"),
    11: (np.float64, "tensor(double)"),
    12: (np.uint32, "tensor(uint32)"),
    13: (np.uint64, "tensor(uint64)"),
    14: (np.complex64, "tensor(complex64)"),
    15: (np.complex128, "tensor(complex128)"),
}
# code -> (ml_dtypes attribute, ONNX type name); held one element per byte, as the runtime holds them
_ML_DTYPES = {16: ("bfloat16", "bfloat16"), 17: ("float8_e4m3fn", "float8e4m3fn"),
              18: ("float8_e4m3fnuz", "float8e4m3fnuz"), 19: ("float8_e5m2", "float8e5m2"),
              20: ("float8_e5m2fnuz", "float8e5m2fnuz"), 21: ("uint4", "uint4"), 22: ("int4", "int4"),
              23: ("float4_e2m1fn", "float4e2m1"), 24: ("float8_e8m0fnu", "float8e8m0"), 25: ("uint2", "uint2"),
              26: ("int2", "int2")}
for _code, (_, _onnx) in _ML_DTYPES.items():
    ELEM_TYPES[_code] = (None, f"tensor({_onnx})")
CODE_OF_DTYPE: dict[np.dtype[Any], int] = {
    np.dtype(t): code for code, (t, _) in ELEM_TYPES.items() if t is not None and code not in (14, 15)
}
TYPE_STRINGS: dict[str, int] = {s: code for code, (_, s) in ELEM_TYPES.items()}
_ml_state = {"registered": False}


def _register_ml_dtypes(module: Any) -> None:
    for code, (attr, _) in _ML_DTYPES.items():
        t = getattr(module, attr, None)
        if t is None:  # an older ml_dtypes
            continue
        ELEM_TYPES[code] = (t, ELEM_TYPES[code][1])
        CODE_OF_DTYPE[np.dtype(t)] = code
    _ml_state["registered"] = True


def _ml_dtypes_if_imported() -> bool:
    """Registers ml_dtypes' types once the caller has imported it; True when that added them."""
    module = sys.modules.get("ml_dtypes")
    if module is None or _ml_state["registered"]:
        return False
    _register_ml_dtypes(module)
    return True


def code_of_dtype(dtype: Any) -> int | None:
    """The ONNX element type code of a numpy dtype, or None when mosaicrt has none for it."""
    dt = np.dtype(dtype)
    code = CODE_OF_DTYPE.get(dt)
    if code is None and _ml_dtypes_if_imported():
        code = CODE_OF_DTYPE.get(dt)
    return code


def numpy_type_of(code: int) -> Any:
    """The numpy type of an ONNX element type code (None for strings, or without ml_dtypes for the types
    numpy lacks); imports ml_dtypes the first time one of those is asked for."""
    if code in _ML_DTYPES and not _ml_state["registered"]:
        try:
            import ml_dtypes
        except ImportError:
            return None
        _register_ml_dtypes(ml_dtypes)
    return ELEM_TYPES.get(code, (None, ""))[0]


def type_string(dtype: np.dtype[Any]) -> str:
    code = code_of_dtype(dtype)
    if code is None:
        raise InvalidArgument(f"numpy dtype {dtype} has no ONNX element type mosaicrt supports")
    return ELEM_TYPES[code][1]


def dtype_of_element_type(code: int) -> np.dtype[Any]:
    """numpy dtype of an ONNX element type code."""
    np_type = numpy_type_of(int(code))
    if np_type is None:
        raise InvalidArgument(f"ONNX element type {code} has no numpy dtype mosaicrt supports")
    result: np.dtype[Any] = np.dtype(np_type)
    return result
