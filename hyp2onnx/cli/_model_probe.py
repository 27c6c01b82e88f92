"""Read a pickle or ``.skops`` file in a child first: ``python _model_probe.py KIND PROBED FILE``.

KIND is "pickle" or "skops"; PROBED names, as JSON
``[[library, module, backend class], ...]``, the backends
whose library a damaged model can crash (the registry's
``crashes_on_damage``). Loading the file (a pickle with joblib, a
``.skops`` file with skops and hyp2onnx's trusted types) hands their
models to their libraries; every object of such a library then found in
it goes to its backend's ``exercise``, which makes the native calls
hyp2onnx makes later (CatBoost crashes on some damaged trees only then).

Exit status 0: nothing failed (or the file itself could not be read,
which the parent reports itself); 3: a model in it is damaged (the reason
on stderr after ``Error: ``, its library after ``Damaged: ``); a crash shows as a signal, in this process only.
"""

import importlib
import json
import resource
import sys
from typing import Any


class _Damaged(Exception):
    """A native call on a model failed: the exception and the model's library."""


def _exercise(obj: Any, backends: dict[str, Any], depth: int = 0) -> None:
    """Hand every object of a probed library reachable from ``obj`` to its backend."""
    library = type(obj).__module__.partition(".")[0]
    backend = backends.get(library)
    if backend is not None and not isinstance(obj, type):
        try:
            if backend.exercise(obj):
                return  # a model its backend exercised: nothing below it to walk
        except Exception as exc:
            raise _Damaged(exc, library) from exc
    if depth > 6:
        return
    if isinstance(obj, dict):
        items = list(obj.values())
    elif isinstance(obj, (list, tuple)):
        items = list(obj)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        items = list(vars(obj).values())
    else:
        return
    for item in items:
        _exercise(item, backends, depth + 1)


def _backends(probed: list[list[str]]) -> dict[str, Any]:
    """The backend class of each probed library that the loading imported, by library."""
    return {
        library: getattr(importlib.import_module(module), backend)
        for library, module, backend in probed
        if library in sys.modules  # the file holds no model of a library it did not import
    }


def main(kind: str, probed: str, path: str) -> int:
    """Load ``path`` as ``kind`` and exercise its models of probed libraries: the exit status."""
    try:
        loaded = _load(kind, path)
    except Exception:  # not readable: the parent's own load reports it
        return 0
    try:
        _exercise(loaded, _backends(json.loads(probed)))
    except _Damaged as damaged:
        exc, library = damaged.args
        text = str(exc).strip()
        sys.stderr.write(f"Damaged: {library}\n")
        sys.stderr.write(f"Error: {text.splitlines()[0] if text else type(exc).__name__}\n")
        return 3
    return 0


def _load(kind: str, path: str) -> Any:
    """A pickle (joblib reads plain pickles too) or a ``.skops`` file, as the commands load it."""
    if kind == "skops":
        import skops.io as sio

        from hyp2onnx.cli._models import trusted_types

        return sio.load(path, trusted=trusted_types())
    import joblib

    return joblib.load(path)


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash here is expected: no core file
    sys.exit(main(*sys.argv[1:4]))
