"""Zero-copy hand-over of PyTorch tensors and NumPy arrays to the C++ engine.

Every tensor is described to the extension as ``(address, dtype, shape, strides)`` with strides in
elements, read from the caller's own object. Nothing is copied here, except a NumPy array with a stride
that is not a multiple of its item size, and int32 ``cu_seqlens`` (widened to int64). (Channel-major inputs,
such as transformers' q, k, v, are read block-wise by the engine's chunk loader: src/exec/chunk_kernels.)
Outputs are allocated here so that they are the caller's kind of object.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np

Descriptor = Tuple[int, str, Tuple[int, ...], Tuple[int, ...]]

# Element types hanpu reads, by the name NumPy and torch share ("torch.float32" -> "float32").
_DTYPES = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16", "int64": "I64"}


def _dtype_key(x: Any) -> str:
    return str(x.dtype).replace("torch.", "") if is_torch(x) else x.dtype.name


def torch_module():
    """The torch module if it is already imported by the caller, else None (hanpu never imports it)."""
    import sys

    return sys.modules.get("torch")


def is_torch(x: Any) -> bool:
    torch = torch_module()
    return torch is not None and isinstance(x, torch.Tensor)


def _from_dlpack(name: str, x: Any) -> np.ndarray:
    try:
        return np.from_dlpack(x)
    except Exception as e:  # the producer decides what it can export
        raise TypeError(f"{name}: cannot read a {type(x).__name__} through DLPack on the CPU ({e})") from None


def as_array(name: str, x: Any, *, index: bool = False) -> Any:
    """Checks that x is a CPU torch tensor or a NumPy array (other DLPack producers become NumPy views)
    of a supported dtype; integer index tensors (cu_seqlens) are widened to int64."""
    if is_torch(x):
        torch = torch_module()
        if x.device.type != "cpu":
            raise ValueError(f"{name} is on {x.device}; hanpu runs on the CPU (move it with .cpu())")
        if x.is_sparse or x.layout != torch.strided:
            raise TypeError(f"{name} must be a dense strided tensor, got layout {x.layout}")
        if index and x.dtype in (torch.int32, torch.int16, torch.int8, torch.uint8):
            return x.to(torch.int64)
        _check_dtype(name, x, index)
        return x
    if not isinstance(x, np.ndarray):
        if hasattr(x, "__dlpack__"):
            x = _from_dlpack(name, x)
        elif isinstance(x, (list, tuple)) and index:
            x = np.asarray(x, dtype=np.int64)
        else:
            raise TypeError(f"{name} must be a torch.Tensor or a numpy.ndarray, got {type(x).__name__}")
    if index and x.dtype.kind in "iu" and x.dtype != np.int64:
        return x.astype(np.int64)
    _check_dtype(name, x, index)
    if any(s % x.itemsize for s in x.strides):
        x = np.ascontiguousarray(x)
    return x


def _check_dtype(name: str, x: Any, index: bool) -> None:
    """Index arrays (cu_seqlens) must be integers, every other array floating point: a TypeError naming
    the argument, before the engine sees it."""
    key = _dtype_key(x)
    if index and key != "int64":
        raise TypeError(f"{name} has dtype {x.dtype}; expected an integer dtype (int64, or int32 which is widened)")
    if not index and (key not in _DTYPES or key == "int64"):
        raise TypeError(f"{name} has dtype {x.dtype}; expected float32, float16, bfloat16 or float64")


def dtype_of(x: Any) -> str:
    """hanpu's dtype name ("F32", "BF16", ...) of an array returned by as_array."""
    return _DTYPES[_dtype_key(x)]


def describe(x: Any) -> Descriptor:
    """(address, dtype name, shape, element strides) of an array returned by as_array."""
    if is_torch(x):
        return (x.data_ptr(), dtype_of(x), tuple(x.shape), tuple(x.stride()))
    return (x.ctypes.data, dtype_of(x), tuple(x.shape), tuple(s // x.itemsize for s in x.strides))


def empty_like_kind(like: Any, shape: Sequence[int], dtype: str, *, zero: bool = False) -> Any:
    """A new tensor of the kind of `like` (torch or NumPy) with the given shape and dtype name."""
    if is_torch(like):
        torch = torch_module()
        td = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
              "I64": torch.int64}[dtype]
        return (torch.zeros if zero else torch.empty)(tuple(shape), dtype=td)
    if dtype == "BF16":
        npd = like.dtype if like.dtype.name == "bfloat16" else _ml_bfloat16()
    else:
        npd = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64}[dtype]
    return (np.zeros if zero else np.empty)(tuple(shape), dtype=npd)


def _ml_bfloat16():
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError("a bfloat16 NumPy output needs the ml_dtypes package") from None
    return ml_dtypes.bfloat16


def copy_into(dst: Any, src: Any) -> None:
    """dst[...] = src with dtype conversion, for either kind (src may be the other kind)."""
    if is_torch(dst):
        torch = torch_module()
        dst.copy_(src if is_torch(src) else torch.from_numpy(np.asarray(src, dtype=np.float32)))
    else:
        dst[...] = src.float().numpy() if is_torch(src) else src


def optional(name: str, x: Optional[Any], *, index: bool = False) -> Optional[Any]:
    return None if x is None else as_array(name, x, index=index)
