"""Loading trained models and exported graphs from the files the commands take.

Model files, by suffix:

* ``.pkl``, ``.pickle``, ``.joblib``: loaded with joblib (which reads plain
  pickles too). A pickle runs arbitrary code while it loads: only load
  files you trust.
* ``.skops``: loaded with `skops.io.load` and the explicit list of
  types in `trusted_types` (hyp2onnx estimators and the scikit-learn,
  XGBoost and LightGBM models they wrap); a file holding any other
  non-default type is refused, and the types are named.
* a backend's native model files (XGBoost ``.json``/``.ubj``, LightGBM
  ``.txt``, ...): the suffixes and readers come from the backend registry
  (`hyp2onnx.estimators._registry`, ``Backend.load_file``). Such a
  file does not say classifier or regressor; its objective decides.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import MissingExtraError
from ..estimators import _registry
from ..estimators._probe import UnreadableFileError, native_error, run_child
from ..estimators._registry import file_backend, fragile_libraries, model_suffixes
from ._common import InputError, existing_file, first_line

if TYPE_CHECKING:
    from ..export._metadata import GraphMetadata

__all__ = [
    "check_convertible",
    "load_model",
    "load_onnx",
    "model_formats",
    "model_kind",
    "native_formats_help",
    "onnx_metadata",
    "onnx_session",
    "trusted_types",
]

#: Model files that are not a backend's native files, and what reads them.
_OWN_FORMATS: dict[str, str] = {
    ".pkl": "pickle",
    ".pickle": "pickle",
    ".joblib": "pickle",
    ".skops": "skops",
}


def model_formats() -> dict[str, str]:
    """Model file suffixes and what reads them: the backends' native files by library.

    Read from the registry on each call, so a backend added with
    ``register_backend`` has its files read too.
    """
    natives = {suffix: spec.library for suffix, spec in model_suffixes().items()}
    return {**_OWN_FORMATS, **natives}


def native_formats_help() -> str:
    """The native model files, for help texts: ".json/.ubj (xgboost), .txt (lightgbm), ..."."""
    return ", ".join(
        f"{'/'.join(spec.formats)} ({spec.library})" for spec in _registry.BACKENDS if spec.formats
    )


def model_kind(path: Path) -> str:
    """How the model file ``path`` is read ("pickle", "skops", ...), from its suffix."""
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        raise InputError(
            path, "is an ONNX graph, not a trained model", "pass the model it was converted from"
        )
    kind = model_formats().get(suffix)
    if kind is None:
        raise InputError(
            path,
            f"unknown model file type {suffix or '(no suffix)'!r}",
            f"use .pkl/.pickle/.joblib, .skops, {native_formats_help()}",
        )
    return kind


def load_model(path: Path) -> Any:
    """The model stored in ``path``, read according to its suffix (see the module doc)."""
    kind = model_kind(path)
    existing_file(path, "model")
    loader = {"pickle": _load_pickle, "skops": _load_skops}.get(kind, _load_native)
    model = loader(path)
    check_loaded(model, path)
    return model


def check_loaded(model: Any, path: Path) -> None:
    """An `InputError` if a backend finds a model in ``model`` damaged (``Backend.check_loaded``).

    Only the backends of libraries already imported are asked: a model
    holds nothing of a library that loading it did not import.
    """
    for spec in _registry.BACKENDS:
        if spec.library in sys.modules:
            try:
                spec.load().check_loaded(model)
            except UnreadableFileError as exc:
                raise InputError(path, str(exc), "save the fitted model again") from exc


def _load_pickle(path: Path) -> Any:
    import joblib

    if _may_hold_native_models(path.read_bytes()):
        _probe_in_child(path, "pickle", "pickle/joblib", _PICKLE_FIX)
    try:
        return joblib.load(path)
    except Exception as exc:
        raise InputError(
            path,
            f"not a readable pickle/joblib file ({type(exc).__name__}: {first_line(exc)})",
            _PICKLE_FIX,
        ) from exc


_PICKLE_FIX = "pass a file written by pickle.dump or joblib.dump of a fitted model"


def _may_hold_native_models(data: bytes) -> bool:
    """Whether a pickle may hold models of a library a damaged model can crash (the
    registry's ``crashes_on_damage``): it names one, or is compressed."""
    compressed = data[:2] in (b"\x1f\x8b", b"BZ", b"\xfd7") or data[:1] in (b"\x78", b"\x04")
    return compressed or any(spec.library.encode() in data for spec in fragile_libraries())


def _probe_in_child(path: Path, kind: str, what: str, fix: str) -> None:
    """Read ``path`` in a child first (`hyp2onnx.cli._model_probe`); raise if it fails.

    ``kind`` is "pickle" or "skops". Loading them hands the models they
    hold to their native libraries, and some libraries crash their process
    on damaged models, CatBoost only later (``Backend.exercise``): the
    child makes those calls too. A crash, or a backend refusing a model,
    becomes an `InputError` saying the file is damaged.
    """
    probed = json.dumps([[s.library, _absolute(s.module), s.backend] for s in fragile_libraries()])
    # Run as a file, not a module, without its folder (which holds inspect.py) on the path.
    try:
        done = run_child(
            ["-c", _RUN_FILE, str(_MODEL_PROBE), kind, probed],
            path,
            crash=f"damaged {what} file: loading it crashed ({{signal}})",
            slow="loading it did not finish in {seconds} s",
        )
    except UnreadableFileError as exc:
        raise InputError(path, str(exc), fix) from exc
    if done.returncode == 3:
        library = next(
            (line[9:].strip() for line in done.stderr.splitlines() if line.startswith("Damaged: ")),
            "",
        )
        shown = next((s.shown for s in _registry.BACKENDS if s.library == library), library)
        raise InputError(path, f"holds a damaged {shown} model ({native_error(done)})", fix)


def _absolute(module: str) -> str:
    """A registry module name in full (the built-in ones are relative to the registry's)."""
    return f"hyp2onnx.estimators{module}" if module.startswith(".") else module


#: The child's script, named by path: it is run, never imported here (it imports this module).
_MODEL_PROBE = Path(__file__).with_name("_model_probe.py")
_RUN_FILE = (
    "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def trusted_types() -> list[str]:
    """Types a ``.skops`` file may hold beyond skops' defaults: the models hyp2onnx exports."""
    from .. import blocks, estimators
    from ..correction import CorrectionReport

    classes: list[type] = [
        CorrectionReport,
        *estimators.own_types(),  # the base classes, isolation and rotation forests
        blocks.Hyperbolic,  # input_blocks
        blocks.Spherical,
        blocks.Euclidean,
        blocks.Categorical,
    ]
    for spec in _registry.BACKENDS:  # the installed backends' estimators and native classes
        try:
            backend = spec.load()
        except MissingExtraError:
            continue
        classes += [getattr(estimators, name) for name in spec.estimators]
        classes += backend.trusted_types()
    names = [f"{c.__module__}.{c.__qualname__}" for c in classes]
    return [*names, *_dask_estimators(names), "collections.OrderedDict"]


def _dask_estimators(trusted: list[str]) -> list[str]:
    """The Dask estimators ([`hyp2onnx.dask`][hyp2onnx.distributed.dask]) whose single-machine twin is trusted.

    Named, not imported: building one needs only its booster library, and a
    fitted one pickles without its client, so its file holds the same
    native types as its twin's.
    """
    from ..distributed import dask

    twins = {name.rsplit(".", 1)[-1] for name in trusted}
    return [
        f"{module}.{name}"  # where pickle and skops find it: the module or its documented alias
        for name, (_, twin) in dask._ESTIMATORS.items()
        if twin in twins
        for module in (dask.__name__, "hyp2onnx.dask")
    ]


def _load_skops(path: Path) -> Any:
    import skops.io as sio

    try:
        untrusted = sio.get_untrusted_types(file=path)
    except Exception as exc:
        raise InputError(
            path,
            f"not a readable .skops file ({type(exc).__name__}: {first_line(exc)})",
            "pass a file written by skops.io.dump",
        ) from exc
    allowed = trusted_types()
    refused = sorted(set(untrusted) - set(allowed))
    fragile = tuple(spec.library + "." for spec in fragile_libraries())
    if not refused and any(t.startswith(fragile) for t in untrusted):
        _probe_in_child(path, "skops", ".skops", "pass a file written by skops.io.dump")
    if refused:
        raise InputError(
            path,
            "holds types outside hyp2onnx's trusted list: " + ", ".join(refused),
            "save only the fitted estimator with skops.io.dump",
        )
    try:
        return sio.load(path, trusted=allowed)
    except Exception as exc:
        raise InputError(path, f"could not load ({type(exc).__name__}: {first_line(exc)})") from exc


def _load_native(path: Path) -> Any:
    """A backend's native model file, read by the backend its suffix belongs to."""
    spec = file_backend(path.suffix)
    assert spec is not None  # load_model's model_kind() accepted the suffix
    try:
        backend = spec.load(f"reading {path.suffix} files")
    except MissingExtraError as exc:
        raise InputError(path, str(exc)) from exc
    fix = f"pass a file written by {backend.name}'s save_model ({'/'.join(spec.formats)})"
    try:
        backend.check_file(path)  # a child reads it first if a damaged file can crash the library
    except UnreadableFileError as exc:
        raise InputError(path, str(exc), fix) from exc
    try:
        return backend.load_file(path)
    except Exception as exc:
        raise InputError(path, f"not a {backend.name} model file ({first_line(exc)})", fix) from exc


def check_convertible(
    model: Any,
    path: Path,
    *,
    geometry: str | None,
    curvature: float | None = None,
    timelike_dim: int | None = None,
) -> None:
    """Raise an `InputError` naming ``path`` unless ``model`` can be exported as asked."""
    from sklearn.exceptions import NotFittedError

    from ..errors import UnsupportedModelError
    from ..export import kind_for

    try:
        kind = kind_for(model)
    except UnsupportedModelError as exc:
        raise InputError(
            path,
            f"holds a {type(model).__module__}.{type(model).__name__}, which hyp2onnx "
            "cannot export",
            "save a fitted hyp2onnx estimator, or a plain tree model: "
            + str(exc).split("Supported: ", 1)[-1].rstrip("."),
        ) from exc
    stated = {"geometry": geometry, "curvature": curvature, "timelike-dim": timelike_dim}
    if kind.geometry == "own" and any(v is not None for v in stated.values()):
        raise InputError(
            path,
            f"the {type(model).__name__} in it records its own geometry (hyperboloid points)",
            "leave out --geometry/--curvature/--timelike-dim",
        )
    try:
        kind.check(model)
    except NotFittedError as exc:
        raise InputError(
            path, f"the {type(model).__name__} in it is not fitted", "fit the model, then save it"
        ) from exc
    except UnsupportedModelError as exc:
        raise InputError(path, str(exc).rstrip(".")) from exc
    if kind.geometry == "recorded":
        _check_recorded_geometry(model, path, stated)
    if kind.geometry == "stated" and geometry is None:
        raise InputError(
            path,
            f"{type(model).__name__} is a plain (Euclidean) model: the geometry of its input "
            "points is not recorded",
            "pass --geometry hyperboloid|poincare|klein (and --curvature/--timelike-dim if not "
            "-1/0); it must have been trained on their unit-ball Klein coordinates",
        )


def _check_recorded_geometry(model: Any, path: Path, stated: dict[str, Any]) -> None:
    """Stated options must agree with the geometry a hyperbolic model records."""
    own = {
        "geometry": model.input_geometry,
        "curvature": model.curvature,
        "timelike-dim": model.timelike_dim,
    }
    for option, value in stated.items():
        if value is not None and value != own[option]:
            raise InputError(
                path,
                f"--{option} {value} contradicts the {type(model).__name__}'s own {own[option]}",
                "leave out --geometry/--curvature/--timelike-dim: hyperbolic estimators "
                "record their own",
            )


def load_onnx(path: Path) -> Any:
    """The ONNX model in ``path``, or an `InputError` naming it."""
    import onnx

    existing_file(path, "ONNX")
    fix = "pass a .onnx file written by 'hyp2onnx convert'"
    try:
        model = onnx.load(str(path))
    except Exception as exc:
        kind = model_formats().get(path.suffix.lower())
        if kind is not None:  # a trained model, not yet a graph
            raise InputError(
                path,
                f"this is a model file ({kind}), not an ONNX graph",
                f"convert it first: hyp2onnx convert {path}",
            ) from exc
        raise InputError(
            path, f"not a readable ONNX file ({type(exc).__name__}: {first_line(exc)})", fix
        ) from exc
    # Protobuf reads an empty file, and some other bytes, as an empty model.
    if model.ir_version <= 0 or not model.graph.input or not model.graph.output:
        size = path.stat().st_size
        what = "is empty (0 bytes)" if size == 0 else "holds no ONNX graph (no inputs or outputs)"
        raise InputError(path, f"not an ONNX model: the file {what}", fix)
    return model


def onnx_session(onnx_model: Any, path: Path) -> Any:
    """An onnxruntime session of a loaded graph, or an `InputError` naming ``path``."""
    from .._runtime import session

    try:
        return session(onnx_model)
    except Exception as exc:  # onnxruntime's own exception types
        raise InputError(
            path,
            f"onnxruntime cannot load this graph ({first_line(exc)})",
            "pass a .onnx file written by 'hyp2onnx convert'",
        ) from exc


def onnx_metadata(onnx_model: Any, path: Path) -> GraphMetadata:
    """hyp2onnx's metadata of a loaded graph, or an `InputError` naming ``path``."""
    from ..errors import DamagedMetadataError
    from ..export import read_metadata

    try:
        return read_metadata(onnx_model)
    except DamagedMetadataError as exc:
        raise InputError(path, str(exc), "re-export the graph with 'hyp2onnx convert'") from exc
    except (ValueError, KeyError) as exc:
        raise InputError(
            path,
            "has no hyp2onnx metadata, so its input geometry is unknown",
            "pass a graph written by 'hyp2onnx convert' or hyp2onnx.save_onnx",
        ) from exc
