"""Read an XGBoost or LightGBM model file with the native library alone, in a child process.

``python -I -S _native_probe.py XGBoost|LightGBM LIBRARY MODEL_FILE``, run by
`hyp2onnx.estimators._probe.read_natively` for the two backends' ``check_file``,
loads the shared library with `ctypes`, loads the model file and
writes it back out, the native calls that loading and exporting it make.
Exit status 0: the file is safe to load; 3: the library refused it (its
message on stderr); a crash (the libraries segfault or abort on some
damaged files) shows as a signal, in this process only. It imports
nothing but the standard library, so it starts in a tenth of a second.
"""

import ctypes
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


def _lightgbm(lib, model: bytes) -> None:
    handle, iterations, n = ctypes.c_void_p(), ctypes.c_int(), ctypes.c_int64()
    if lib.LGBM_BoosterCreateFromModelfile(model, ctypes.byref(iterations), ctypes.byref(handle)):
        _refused(lib.LGBM_GetLastError)
    for call in (
        lambda: lib.LGBM_BoosterGetNumFeature(handle, ctypes.byref(ctypes.c_int())),
        lambda: lib.LGBM_BoosterSaveModelToString(
            handle, 0, -1, 0, ctypes.c_int64(0), ctypes.byref(n), None
        ),
    ):
        if call() != 0:
            _refused(lib.LGBM_GetLastError)
    text = ctypes.create_string_buffer(max(n.value, 1))
    if lib.LGBM_BoosterSaveModelToString(handle, 0, -1, 0, n, ctypes.byref(n), text) != 0:
        _refused(lib.LGBM_GetLastError)


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash here is expected: no core file
    kind, library, path = sys.argv[1:4]
    {"XGBoost": _xgboost, "LightGBM": _lightgbm}[kind](ctypes.CDLL(library), path.encode())
