"""ONNX element types <-> numpy dtypes and onnxruntime's type strings ("tensor(float)")."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._errors import InvalidArgument

# ONNX element type code -> (numpy dtype, onnxruntime-style type string)
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
    16: (None, "tensor(bfloat16)"),
}
CODE_OF_DTYPE: dict[np.dtype[Any], int] = {
    np.dtype(t): code for code, (t, _) in ELEM_TYPES.items() if t is not None and code not in (14, 15)
}
TYPE_STRINGS: dict[str, int] = {s: code for code, (_, s) in ELEM_TYPES.items()}


def _register_bfloat16() -> None:
    """bfloat16 arrays need the optional ml_dtypes package (numpy has no bfloat16)."""
    try:
        import ml_dtypes
    except ImportError:
        return
    ELEM_TYPES[16] = (ml_dtypes.bfloat16, "tensor(bfloat16)")
    CODE_OF_DTYPE[np.dtype(ml_dtypes.bfloat16)] = 16


_register_bfloat16()


def _register_narrow_types() -> None:
    """float8/float4/int4/int2 arrays (ml_dtypes), one element per byte as the runtime holds them."""
    try:
        import ml_dtypes
    except ImportError:
        return
    names = {17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz", 21: "uint4",
             22: "int4", 23: "float4_e2m1fn", 24: "float8_e8m0fnu", 25: "uint2", 26: "int2"}
    onnx_names = {17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4",
                  22: "int4", 23: "float4e2m1", 24: "float8e8m0", 25: "uint2", 26: "int2"}
    for code, attr in names.items():
        t = getattr(ml_dtypes, attr, None)
        if t is None:
            continue
        ELEM_TYPES[code] = (t, f"tensor({onnx_names[code]})")
        CODE_OF_DTYPE[np.dtype(t)] = code
        TYPE_STRINGS[f"tensor({onnx_names[code]})"] = code


_register_narrow_types()


def type_string(dtype: np.dtype[Any]) -> str:
    code = CODE_OF_DTYPE.get(np.dtype(dtype))
    if code is None:
        raise InvalidArgument(f"numpy dtype {dtype} has no ONNX element type mosaicrt supports")
    return ELEM_TYPES[code][1]


def dtype_of_element_type(code: int) -> np.dtype[Any]:
    """numpy dtype of an ONNX element type code."""
    np_type = ELEM_TYPES.get(int(code), (None, ""))[0]
    if np_type is None:
        raise InvalidArgument(f"ONNX element type {code} has no numpy dtype mosaicrt supports")
    result: np.dtype[Any] = np.dtype(np_type)
    return result
