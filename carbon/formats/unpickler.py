"""A safe unpickler: plain containers, numbers and strings only, never globals."""

from __future__ import annotations

import io
import pickle
import struct
from typing import Any

SAFE_GLOBALS = {("copyreg", "_reconstructor"), ("copy_reg", "_reconstructor"),
                ("builtins", "object"), ("__builtin__", "object")}

# Everything a malformed or hostile pickle can raise while loading.
PICKLE_ERRORS = (pickle.UnpicklingError, ValueError, TypeError, IndexError, KeyError,
                 EOFError, AttributeError, ImportError, OverflowError, MemoryError,
                 UnicodeDecodeError, RecursionError, struct.error)


class SafeUnpickler(pickle.Unpickler):
    """Refuses every global except the two carbon 1.1.10 allows."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in SAFE_GLOBALS:
            raise pickle.UnpicklingError("Attempting to unpickle unsafe class %s.%s"
                                         % (module, name))
        return super().find_class(module, name)


def safe_loads(data: bytes) -> Any:
    """Unpickle ``data`` without running arbitrary code."""
    return SafeUnpickler(io.BytesIO(data), encoding="utf-8").load()


def loads(data: bytes, insecure: bool = False) -> Any:
    """USE_INSECURE_UNPICKLER chooses plain pickle.loads, as in the reference."""
    if insecure:
        return pickle.loads(data)
    return safe_loads(data)
