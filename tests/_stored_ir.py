"""Fitted model descriptions written to files and read back bit for bit.

`tests/test_graph_hashes.py` hashes graphs emitted from stored
descriptions (hyp2onnx's IR `Model`, HyperDT's `HyperDTModel`), not from
fits made on the machine that runs the test: a fit depends on the BLAS, the
CPU's libm (the training data pass through ``cosh``/``sinh``) and the tree
libraries' versions, the emitters do not.

A description is a tree of dataclasses, named tuples, enums, arrays, dicts,
lists, tuples and scalars. `encode` turns it into JSON (types by module
and name; Python floats as JSON numbers, which Python writes and reads back
exactly, NaN and infinities included) plus named numpy arrays (stored with
``np.savez_compressed``: their bytes, dtype and shape as they were); `decode`
rebuilds it, calling each class's constructor, so its checks run. Only classes
of hyp2onnx are rebuilt; a field the class no longer has, or one it now
requires, is an error asking to refit.
"""

from __future__ import annotations

import dataclasses
import enum
from importlib import import_module
from typing import Any

import numpy as np

#: Classes are rebuilt only from modules of this package.
PACKAGE = "hyp2onnx"


def _type_name(value: Any) -> str:
    cls = type(value)
    if not cls.__module__.startswith(PACKAGE):
        raise TypeError(f"cannot store a {cls.__module__}.{cls.__qualname__}: not a {PACKAGE} type")
    return f"{cls.__module__}:{cls.__qualname__}"


def _class(name: str) -> Any:
    module, qualname = name.split(":")
    if module.split(".")[0] != PACKAGE:
        raise ValueError(f"stored type {name} is not a {PACKAGE} type")
    found: Any = import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def encode(value: Any, arrays: dict[str, np.ndarray], prefix: str) -> Any:
    """JSON for ``value``; its arrays go into ``arrays`` under keys starting ``prefix``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            f.name: encode(getattr(value, f.name), arrays, prefix)
            for f in dataclasses.fields(value)
            if f.init
        }
        return {"dataclass": _type_name(value), "fields": fields}
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):  # a NamedTuple
        fields = {name: encode(getattr(value, name), arrays, prefix) for name in value._fields}
        return {"namedtuple": _type_name(value), "fields": fields}
    if isinstance(value, enum.Enum):
        return {"enum": _type_name(value), "value": value.value}
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "O":
            items = [encode(v, arrays, prefix) for v in value.reshape(-1).tolist()]
            return {"object_array": items, "shape": list(value.shape)}
        key = f"{prefix}{len(arrays)}"
        arrays[key] = value
        return {"array": key}
    if isinstance(value, np.generic):
        return {"scalar": value.dtype.str, "hex": value.tobytes().hex()}
    if isinstance(value, dict):
        return {
            "dict": [
                [encode(k, arrays, prefix), encode(v, arrays, prefix)] for k, v in value.items()
            ]
        }
    if isinstance(value, tuple):
        return {"tuple": [encode(v, arrays, prefix) for v in value]}
    if isinstance(value, list):
        return [encode(v, arrays, prefix) for v in value]
    if value is None or type(value) in (bool, int, float, str):
        return value
    raise TypeError(f"cannot store a {type(value).__name__}: {value!r}")


def decode(data: Any, arrays: Any) -> Any:
    """The value `encode` wrote, arrays taken from ``arrays`` (an ``np.load`` of the npz)."""
    if isinstance(data, list):
        return [decode(v, arrays) for v in data]
    if not isinstance(data, dict):
        return data
    if "array" in data:
        return np.asarray(arrays[data["array"]])
    if "scalar" in data:
        return np.frombuffer(bytes.fromhex(data["hex"]), dtype=np.dtype(data["scalar"]))[0]
    if "object_array" in data:
        out = np.empty(len(data["object_array"]), dtype=object)
        out[:] = [decode(v, arrays) for v in data["object_array"]]
        return out.reshape(data["shape"])
    if "tuple" in data:
        return tuple(decode(v, arrays) for v in data["tuple"])
    if "dict" in data:
        return {decode(k, arrays): decode(v, arrays) for k, v in data["dict"]}
    if "enum" in data:
        return _class(data["enum"])(data["value"])
    kind = "dataclass" if "dataclass" in data else "namedtuple"
    cls = _class(data[kind])
    fields = {name: decode(v, arrays) for name, v in data["fields"].items()}
    try:
        return cls(**fields)
    except TypeError as exc:
        raise ValueError(
            f"the stored {data[kind]} no longer fits its class ({exc}): store the inputs "
            "again with python tests/test_graph_hashes.py --refit"
        ) from exc
