"""Read an XGBoost or LightGBM model file with the native library alone, in a child process.

``python -I -S _native_probe.py XGBoost|LightGBM LIBRARY MODEL_FILE``, run by
`hyp2onnx.estimators._probe.read_natively` for the two backends' ``check_file``,
loads the shared library with `ctypes`, loads the model file and makes
the native calls that loading and exporting it make (writing it back
out; for LightGBM, every call in `LIGHTGBM_CALLS`).
Exit status 0: the file is safe to load; 3: the library refused it (its
message on stderr); a crash (the libraries segfault or abort on some
damaged files) shows as a signal, in this process only. It imports
nothing but the standard library, so it starts in a tenth of a second.
"""

import ctypes
import json
import resource
import sys


def _refused(get_error) -> None:
    get_error.restype = ctypes.c_char_p
    message = (get_error() or b"").decode(errors="replace").strip()
    sys.stderr.write("Error: " + (message.splitlines() or ["unreadable"])[0] + "\n")
    sys.exit(3)


def _xgboost(lib, model: bytes) -> None:
    handle, n, out = ctypes.c_void_p(), ctypes.c_uint64(), ctypes.c_char_p()
    calls = (
        lambda: lib.XGBoosterCreate(None, ctypes.c_uint64(0), ctypes.byref(handle)),
        lambda: lib.XGBoosterLoadModel(handle, model),
        lambda: lib.XGBoosterSaveJsonConfig(handle, ctypes.byref(n), ctypes.byref(out)),
        lambda: lib.XGBoosterSaveModelToBuffer(
            handle, b'{"format": "ubj"}', ctypes.byref(n), ctypes.byref(out)
        ),
    )
    for call in calls:
        if call() != 0:
            _refused(lib.XGBGetLastError)


#: The LightGBM C functions the child calls: every one that loading a model file makes
#: (``lightgbm.Booster(model_str=...)``, ``LightGBMBackend.load_file``) and that reading it
#: makes (``model_to_string`` and ``Booster(model_str=...)`` on its text). A test checks
#: that loading and reading a file call none beyond these.
LIGHTGBM_CALLS = (
    "LGBM_BoosterGetNumClasses",
    "LGBM_BoosterGetLoadedParam",
    "LGBM_BoosterGetNumFeature",
    "LGBM_BoosterNumModelPerIteration",
    "LGBM_BoosterSaveModelToString",
    "LGBM_BoosterLoadModelFromString",
    "LGBM_BoosterFree",
    "LGBM_GetLastError",
)


def _lightgbm_text(lib, handle, call: str, *args) -> bytes:
    """The text a LightGBM ``call(handle, *args, size, &length, buffer)`` writes."""
    n = ctypes.c_int64()
    function = getattr(lib, call)
    if function(handle, *args, ctypes.c_int64(0), ctypes.byref(n), None) != 0:
        _refused(lib.LGBM_GetLastError)
    text = ctypes.create_string_buffer(max(n.value, 1))
    if function(handle, *args, ctypes.c_int64(len(text)), ctypes.byref(n), text) != 0:
        _refused(lib.LGBM_GetLastError)
    return text.value


def _lightgbm_booster(lib, handle) -> bytes:
    """Ask a loaded booster what loading it asks (its parameters too: a ``parameters:``
    section cut short crashes LightGBM there, not in loading); its model text."""
    for call in ("LGBM_BoosterGetNumClasses", "LGBM_BoosterGetNumFeature"):
        if getattr(lib, call)(handle, ctypes.byref(ctypes.c_int())) != 0:
            _refused(lib.LGBM_GetLastError)
    try:
        json.loads(_lightgbm_text(lib, handle, "LGBM_BoosterGetLoadedParam").decode())
    except ValueError:
        sys.stderr.write("Error: its parameters section is not readable\n")
        sys.exit(3)
    if lib.LGBM_BoosterNumModelPerIteration(handle, ctypes.byref(ctypes.c_int())) != 0:
        _refused(lib.LGBM_GetLastError)
    # model_to_string(num_iteration=-1): from iteration 0, all of them, split importances
    return _lightgbm_text(lib, handle, "LGBM_BoosterSaveModelToString", 0, -1, 0)


def _lightgbm(lib, model: bytes) -> None:
    # Loaded from its text, as LightGBMBackend.load_file loads it: a Python bytes object
    # ends in a NUL, so LightGBM reads no further than the file's last byte.
    with open(model, "rb") as f:
        text = f.read()
    iterations = ctypes.c_int()
    for _ in range(2):  # the file's text, then the text hyp2onnx reads, loaded again
        handle = ctypes.c_void_p()
        if lib.LGBM_BoosterLoadModelFromString(
            text, ctypes.byref(iterations), ctypes.byref(handle)
        ):
            _refused(lib.LGBM_GetLastError)
        text = _lightgbm_booster(lib, handle)
        lib.LGBM_BoosterFree(handle)


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash here is expected: no core file
    kind, library, path = sys.argv[1:4]
    {"XGBoost": _xgboost, "LightGBM": _lightgbm}[kind](ctypes.CDLL(library), path.encode())
