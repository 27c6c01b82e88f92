"""Loading trained models and exported graphs from the files the commands take.

Model files, by suffix:

* ``.pkl``, ``.pickle``, ``.joblib``: loaded with joblib (which reads plain
  pickles too). A pickle runs arbitrary code while it loads: only load
  files you trust.
* ``.skops``: loaded with :func:`skops.io.load` and the explicit list of
  types in :func:`trusted_types` (hyp2onnx estimators and the scikit-learn,
  XGBoost and LightGBM models they wrap); a file holding any other
  non-default type is refused, and the types are named.
* a backend's native model files (XGBoost ``.json``/``.ubj``, LightGBM
  ``.txt``, ...): the suffixes and readers come from the backend registry
  (:mod:`hyp2onnx.estimators._registry`, ``Backend.load_file``). Such a
  file does not say classifier or regressor; its objective decides.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import MissingExtraError
from ..estimators._registry import BACKENDS, file_backend
from ._common import InputError, existing_file

__all__ = [
    "MODEL_FORMATS",
    "NATIVE_FORMATS_HELP",
    "check_convertible",
    "load_model",
    "load_onnx",
    "model_kind",
    "onnx_metadata",
    "trusted_types",
]

#: Model file suffixes and what reads them.
MODEL_FORMATS: dict[str, str] = {
    ".pkl": "pickle",
    ".pickle": "pickle",
    ".joblib": "pickle",
    ".skops": "skops",
    **{suffix: spec.library for spec in BACKENDS for suffix in spec.formats},
}

#: The native model files, for help texts: ".json/.ubj (xgboost), .txt (lightgbm), ...".
NATIVE_FORMATS_HELP = ", ".join(
    f"{'/'.join(spec.formats)} ({spec.library})" for spec in BACKENDS if spec.formats
)

_FORMATS_HELP = f".pkl/.pickle/.joblib, .skops, {NATIVE_FORMATS_HELP}"


def model_kind(path: Path) -> str:
    """How the model file ``path`` is read ("pickle", "skops", ...), from its suffix."""
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        raise InputError(
            path, "is an ONNX graph, not a trained model", "pass the model it was converted from"
        )
    kind = MODEL_FORMATS.get(suffix)
    if kind is None:
        raise InputError(
            path, f"unknown model file type {suffix or '(no suffix)'!r}", f"use {_FORMATS_HELP}"
        )
    return kind


def load_model(path: Path) -> Any:
    """The model stored in ``path``, read according to its suffix (see the module doc)."""
    kind = model_kind(path)
    existing_file(path, "model")
    if kind == "pickle":
        return _load_pickle(path)
    if kind == "skops":
        return _load_skops(path)
    return _load_native(path)


def _load_pickle(path: Path) -> Any:
    import joblib

    try:
        return joblib.load(path)
    except Exception as exc:
        raise InputError(
            path,
            f"not a readable pickle/joblib file ({type(exc).__name__}: {_first_line(exc)})",
            "pass a file written by pickle.dump or joblib.dump of a fitted model",
        ) from exc


def trusted_types() -> list[str]:
    """Types a ``.skops`` file may hold beyond skops' defaults: the models hyp2onnx exports."""
    from .. import blocks, estimators
    from ..thresholds import CorrectionReport

    classes: list[type] = [
        CorrectionReport,
        estimators.HyperbolicEstimator,
        blocks.Hyperbolic,  # input_blocks
        blocks.Spherical,
        blocks.Euclidean,
        blocks.Categorical,
    ]
    for spec in BACKENDS:  # the installed backends' estimators and native classes
        try:
            backend = spec.load()
        except MissingExtraError:
            continue
        classes += [getattr(estimators, name) for name in spec.estimators]
        classes += backend.trusted_types()
    names = [f"{c.__module__}.{c.__qualname__}" for c in classes]
    return [*names, "collections.OrderedDict"]


def _load_skops(path: Path) -> Any:
    import skops.io as sio

    try:
        untrusted = sio.get_untrusted_types(file=path)
    except Exception as exc:
        raise InputError(
            path,
            f"not a readable .skops file ({type(exc).__name__}: {_first_line(exc)})",
            "pass a file written by skops.io.dump",
        ) from exc
    allowed = trusted_types()
    refused = sorted(set(untrusted) - set(allowed))
    if refused:
        raise InputError(
            path,
            "holds types outside hyp2onnx's trusted list: " + ", ".join(refused),
            "save only the fitted estimator with skops.io.dump",
        )
    try:
        return sio.load(path, trusted=allowed)
    except Exception as exc:
        raise InputError(
            path, f"could not load ({type(exc).__name__}: {_first_line(exc)})"
        ) from exc


def _load_native(path: Path) -> Any:
    """A backend's native model file, read by the backend its suffix belongs to."""
    spec = file_backend(path.suffix)
    try:
        backend = spec.load(f"reading {path.suffix} files")
    except MissingExtraError as exc:
        raise InputError(path, str(exc)) from exc
    try:
        return backend.load_file(path)
    except Exception as exc:
        raise InputError(
            path,
            f"not a {backend.name} model file ({_first_line(exc)})",
            f"pass a file written by {backend.name}'s save_model ({'/'.join(spec.formats)})",
        ) from exc


def check_convertible(
    model: Any,
    path: Path,
    *,
    geometry: str | None,
    curvature: float | None = None,
    timelike_dim: int | None = None,
) -> None:
    """Raise an :class:`InputError` naming ``path`` unless ``model`` can be exported as asked."""
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    from .. import hyperdt
    from ..errors import UnsupportedModelError
    from ..estimators import HyperbolicTreeModel, backend_for

    if hyperdt.handles(model):
        _check_hyperdt(model, path, geometry, curvature, timelike_dim)
        return
    hyperbolic = isinstance(model, HyperbolicTreeModel)
    if not hyperbolic:
        try:
            backend_for(model)
        except UnsupportedModelError as exc:
            raise InputError(
                path,
                f"holds a {type(model).__module__}.{type(model).__name__}, which hyp2onnx "
                "cannot export",
                "save a fitted hyp2onnx estimator, or a plain tree model: "
                + str(exc).split("Supported: ", 1)[-1].rstrip("."),
            ) from exc
    try:
        check_is_fitted(model)
    except NotFittedError as exc:
        raise InputError(
            path, f"the {type(model).__name__} in it is not fitted", "fit the model, then save it"
        ) from exc
    stated = {"geometry": geometry, "curvature": curvature, "timelike-dim": timelike_dim}
    if hyperbolic:
        own = {
            "geometry": model.input_geometry,
            "curvature": model.curvature,
            "timelike-dim": model.timelike_dim,
        }
        for option, value in stated.items():
            if value is not None and value != own[option]:
                raise InputError(
                    path,
                    f"--{option} {value} contradicts the {type(model).__name__}'s own "
                    f"{own[option]}",
                    "leave out --geometry/--curvature/--timelike-dim: hyperbolic estimators "
                    "record their own",
                )
    if not hyperbolic and geometry is None:
        raise InputError(
            path,
            f"{type(model).__name__} is a plain (Euclidean) model: the geometry of its input "
            "points is not recorded",
            "pass --geometry hyperboloid|poincare|klein (and --curvature/--timelike-dim if not "
            "-1/0); it must have been trained on their unit-ball Klein coordinates",
        )


def _check_hyperdt(model: Any, path: Path, *stated: Any) -> None:
    """A HyperDT (hyperdt 0.0.3) model: fitted, exportable, and no geometry options."""
    from ..errors import UnsupportedModelError
    from ..hyperdt import read_hyperdt

    if any(v is not None for v in stated):
        raise InputError(
            path,
            f"the HyperDT {type(model).__name__} in it records its own geometry",
            "leave out --geometry/--curvature/--timelike-dim",
        )
    try:
        read_hyperdt(model)
    except UnsupportedModelError as exc:
        raise InputError(path, str(exc).rstrip(".")) from exc


def load_onnx(path: Path) -> Any:
    """The ONNX model in ``path``, or an :class:`InputError` naming it."""
    import onnx

    existing_file(path, "ONNX")
    try:
        return onnx.load(str(path))
    except Exception as exc:
        raise InputError(
            path,
            f"not a readable ONNX file ({type(exc).__name__}: {_first_line(exc)})",
            "pass a .onnx file written by 'hyp2onnx convert'",
        ) from exc


def onnx_metadata(onnx_model: Any, path: Path) -> dict[str, Any]:
    """hyp2onnx's metadata of a loaded graph, or an :class:`InputError` naming ``path``."""
    from ..export import read_metadata

    try:
        return read_metadata(onnx_model)
    except (ValueError, KeyError) as exc:
        raise InputError(
            path,
            "has no hyp2onnx metadata, so its input geometry is unknown",
            "pass a graph written by 'hyp2onnx convert' or hyp2onnx.save_onnx",
        ) from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
