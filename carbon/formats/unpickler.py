"""The safe unpickler: plain containers, numbers and strings, and only the globals a
table names (never anything else a pickle asks for).

One mechanism for every reader of pickles: carbon's receivers, carbonlink and its
client use carbon 1.1.10's table (``CARBON_GLOBALS``); the render app passes
graphite-web 1.1.10's larger one (``webapp.storage.nodes.GraphiteUnpickler``) and the
/render/local/ view its own (``webapp.render.local``).
"""

from __future__ import annotations

import copyreg
import io
import pickle
import struct
from typing import Any, Mapping

# (module, name) -> what a pickle naming it gets: the two globals carbon 1.1.10 lets
# through, under their Python 2 and 3 module names (a protocol-2 pickle from Python 2
# names copy_reg and __builtin__; find_class sees the names as written).
_RECONSTRUCTOR: Any = vars(copyreg)["_reconstructor"]  # not in typeshed's copyreg
CARBON_GLOBALS: Mapping[tuple[str, str], Any] = {
    ("copyreg", "_reconstructor"): _RECONSTRUCTOR,
    ("copy_reg", "_reconstructor"): _RECONSTRUCTOR,
    ("builtins", "object"): object, ("__builtin__", "object"): object}

# Everything a malformed or hostile pickle can raise while loading.
PICKLE_ERRORS = (pickle.UnpicklingError, ValueError, TypeError, IndexError, KeyError,
                 EOFError, AttributeError, ImportError, OverflowError, MemoryError,
                 UnicodeDecodeError, RecursionError, struct.error)


class SafeUnpickler(pickle.Unpickler):
    """Refuses every global not in ``allowed`` (a subclass sets its own table)."""

    allowed: Mapping[tuple[str, str], Any] = CARBON_GLOBALS

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self.allowed[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError("Attempting to unpickle unsafe class %s.%s"
                                         % (module, name)) from None


def safe_loads(data: bytes, unpickler: type[SafeUnpickler] = SafeUnpickler) -> Any:
    """Unpickle ``data`` without running arbitrary code (str from Python 2 pickles
    decoded as UTF-8)."""
    return unpickler(io.BytesIO(data), encoding="utf-8").load()


def loads(data: bytes, insecure: bool = False) -> Any:
    """USE_INSECURE_UNPICKLER chooses plain pickle.loads, as in the reference."""
    if insecure:
        return pickle.loads(data)
    return safe_loads(data)
