"""The exported graph of every model kind, hashed and compared with stored hashes.

Each case exports one fitted model with one combination of options
(encoding, input dtype, opset, the If / Loop choice by model size, the
legacy-only operator of skl2onnx hosts, the row blocks dropped) and hashes
the serialized ONNX model. A change of any graph, by a single node name or
a single bit of a constant, fails its case.

The graphs are emitted from stored inputs, not from fits made here: the
description the exporter reads from each fitted model (hyp2onnx's IR
`Model`, or HyperDT's `HyperDTModel`) is stored in
``tests/data/graph_inputs.json`` and ``graph_inputs.npz`` and read back bit
for bit (``tests/_stored_ir.py``). A fit depends on the machine (the
training points pass through ``cosh`` and ``sinh``, whose last bits are the
CPU's libm's; BLAS; the tree libraries' versions); the emitted graph of a
description does not, so no case skips on any machine. A separate test
fits each model here and checks that it describes the model as stored and
that ``to_onnx`` of the fit gives the stored graphs. It fits on the training
rows stored beside the descriptions (``graph_training_rows.npz``), not on
rows generated here, so the CPU's libm cannot change them; where the fit
still comes out otherwise, that check alone is skipped, saying why: other
library versions, or, on the same rows and versions, another BLAS or a
change of the fit.

Two steps rewrite the files (run from the repository root):

- ``python tests/test_graph_hashes.py --write`` hashes the graphs of the
  stored descriptions again: after a change that is meant to alter graphs
  (say why in its commit), or a merge of such changes;
- ``python tests/test_graph_hashes.py --refit`` fits the models here,
  stores their descriptions, then writes the hashes: after a change of the
  fits, of the IR's fields, or of the cases' models.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from _stored_ir import decode, encode

import hyp2onnx as h
from hyp2onnx.blocks import Categorical, Euclidean, Hyperbolic
from hyp2onnx.datasets import make_geodesic_ray, make_wrapped_normal_mixture
from hyp2onnx.edge import without_row_blocks
from hyp2onnx.export import check_opset, compile_model, describe, input_dtype, kind_of
from hyp2onnx.export.hyperdt import HyperDTModel, compile_hyperdt, read_hyperdt
from hyp2onnx.ir import Model

DATA = Path(__file__).parent / "data"
HASHES = DATA / "graph_hashes.json"
#: The stored descriptions: their structure and scalars, and their arrays.
INPUTS = DATA / "graph_inputs.json"
ARRAYS = DATA / "graph_inputs.npz"
#: The rows each model was fitted on, so that a fit here reads the same bits: the
#: generators pass points through ``cosh`` and ``sinh``, whose last bits are the libm's.
ROWS = DATA / "graph_training_rows.npz"
#: The libraries a fit or a graph depends on, recorded with the hashes.
LIBRARIES = ("numpy", "scikit-learn", "xgboost", "lightgbm", "catboost", "hyperdt", "onnx")


# -- the models ------------------------------------------------------------------------------


def _mixture(n_classes: int, *, n: int = 240, d: int = 3, geometry: str = "hyperboloid"):
    return make_wrapped_normal_mixture(n, d, n_classes, geometry=geometry, random_state=0)


def _target(X: np.ndarray) -> np.ndarray:
    return np.sin(3.0 * X[:, min(1, X.shape[1] - 1)]) + X[:, -1]


#: An unfitted model and the rows it is fitted on (``y`` None: unsupervised).
Fit = tuple[Any, np.ndarray, np.ndarray | None]


def _classifier(
    make: Callable[[], Any], n_classes: int, geometry: str = "hyperboloid"
) -> Callable[[], Fit]:
    def fit() -> Fit:
        X, y = _mixture(n_classes, geometry=geometry)
        return make(), X, y

    return fit


def _regressor(
    make: Callable[[], Any], geometry: str = "hyperboloid", d: int = 3
) -> Callable[[], Fit]:
    def fit() -> Fit:
        X, _ = _mixture(3, geometry=geometry, d=d)
        return make(), X, _target(X)

    return fit


def _constant_fit(make: Callable[[], Any]) -> Callable[[], Fit]:
    """A model fitted on one class: a single leaf."""

    def fit() -> Fit:
        X, y = _mixture(3)
        return make(), X, np.zeros_like(y)

    return fit


FOREST = dict(n_estimators=5, max_depth=4, random_state=0)
XGB = dict(n_estimators=4, max_depth=3, n_jobs=1, random_state=0)
LGBM = dict(n_estimators=4, num_leaves=8, n_jobs=1, verbose=-1, random_state=0, deterministic=True)
CATBOOST = dict(iterations=4, depth=3, verbose=0, thread_count=1, random_seed=0)
BLOCKS = [Hyperbolic(2), Euclidean(1), Categorical(1)]


def _blocks_fit(make: Callable[[], Any]) -> Callable[[], Fit]:
    def fit() -> Fit:
        rng = np.random.default_rng(0)
        X, y = _mixture(2, d=2)
        codes = rng.integers(0, 5, size=(X.shape[0], 1)).astype(np.float64)
        euclid = rng.normal(size=(X.shape[0], 1))
        y = np.where(codes[:, 0] % 2 == 0, y, 1 - y)
        return make(), np.hstack([X, euclid, codes]), y

    return fit


def _far_fit() -> Fit:
    X, _ = make_geodesic_ray(400, 10.0, np.array([np.cos(0.3), np.sin(0.3)]), random_state=1)
    y = (np.arccosh(X[:, 0]) > 10.0).astype(np.int64)
    return h.HyperbolicRandomForestClassifier(**FOREST), X, y


def _plain(make: Callable[[], Any], classify: bool) -> Callable[[], Fit]:
    def fit() -> Fit:
        X, y = _mixture(3, d=2)
        klein = X[:, 1:] / X[:, :1]
        return make(), klein, y if classify else _target(X)

    return fit


def _isolation(**params: Any) -> Callable[[], Fit]:
    def fit() -> Fit:
        X, _ = _mixture(3)
        return h.HyperbolicIsolationForest(n_estimators=6, random_state=0, **params), X, None

    return fit


def _hyperdt(kind: str) -> Callable[[], Fit]:
    def fit() -> Fit:
        tree = import_module("hyperdt.tree")
        ensemble = import_module("hyperdt.ensemble")
        X, y = make_wrapped_normal_mixture(160, 2, 4, random_state=0)
        forest = dict(n_estimators=3, n_jobs=1, random_state=0)
        make = {
            "tree_classifier": lambda: tree.HyperbolicDecisionTreeClassifier(max_depth=3),
            "tree_regressor": lambda: tree.HyperbolicDecisionTreeRegressor(max_depth=3),
            "forest_classifier": lambda: ensemble.HyperbolicRandomForestClassifier(
                max_depth=3, **forest
            ),
            "forest_regressor": lambda: ensemble.HyperbolicRandomForestRegressor(
                max_depth=3, **forest
            ),
        }[kind]
        target = y if kind.endswith("classifier") else np.round(np.sin(3.0 * X[:, 1]) + y, 1)
        return make(), X, target

    return fit


def _sklearn(name: str) -> Callable[..., Any]:
    return lambda **kw: getattr(import_module("sklearn.tree"), name)(random_state=0, **kw)


def _lib(module: str, name: str, **params: Any) -> Callable[[], Any]:
    return lambda: getattr(import_module(module), name)(**params)


MODELS: dict[str, Callable[[], Fit]] = {
    "tree_clf": _classifier(
        lambda: h.HyperbolicDecisionTreeClassifier(max_depth=4, random_state=0), 3
    ),
    "tree_reg": _regressor(lambda: h.HyperbolicDecisionTreeRegressor(max_depth=4, random_state=0)),
    "rf_binary": _classifier(lambda: h.HyperbolicRandomForestClassifier(**FOREST), 2),
    "rf_3": _classifier(lambda: h.HyperbolicRandomForestClassifier(**FOREST), 3),
    "rf_5": _classifier(lambda: h.HyperbolicRandomForestClassifier(**FOREST), 5),
    "rf_reg": _regressor(lambda: h.HyperbolicRandomForestRegressor(**FOREST)),
    "rf_far": _far_fit,
    "rf_poincare": _classifier(
        lambda: h.HyperbolicRandomForestClassifier(**FOREST, input_geometry="poincare"),
        2,
        "poincare",
    ),
    "xgb_klein": _regressor(
        lambda: h.HyperbolicXGBRegressor(**XGB, input_geometry="klein"), "klein"
    ),
    "xgb_binary": _classifier(lambda: h.HyperbolicXGBClassifier(**XGB), 2),
    "xgb_3": _classifier(lambda: h.HyperbolicXGBClassifier(**XGB), 3),
    "xgb_reg": _regressor(lambda: h.HyperbolicXGBRegressor(**XGB)),
    "lgbm_binary": _classifier(lambda: h.HyperbolicLGBMClassifier(**LGBM), 2),
    "lgbm_3": _classifier(lambda: h.HyperbolicLGBMClassifier(**LGBM), 3),
    "lgbm_reg": _regressor(lambda: h.HyperbolicLGBMRegressor(**LGBM)),
    "catboost_3": _classifier(lambda: h.HyperbolicCatBoostClassifier(**CATBOOST), 3),
    "catboost_reg": _regressor(lambda: h.HyperbolicCatBoostRegressor(**CATBOOST)),
    "householder_clf": _classifier(
        lambda: h.HyperbolicHouseholderTreeClassifier(max_depth=3, random_state=0), 3
    ),
    "householder_reg": _regressor(
        lambda: h.HyperbolicHouseholderTreeRegressor(max_depth=3, random_state=0)
    ),
    "householder_1d": _regressor(
        lambda: h.HyperbolicHouseholderTreeRegressor(
            input_geometry="poincare", max_depth=3, random_state=0
        ),
        "poincare",
        d=1,
    ),
    "householder_leaf": _constant_fit(
        lambda: h.HyperbolicHouseholderTreeClassifier(random_state=0)
    ),
    "rotation_clf": _classifier(
        lambda: h.HyperbolicRotationForestClassifier(n_estimators=3, max_depth=3, random_state=0),
        3,
    ),
    "rotation_reg": _regressor(
        lambda: h.HyperbolicRotationForestRegressor(n_estimators=3, max_depth=3, random_state=0)
    ),
    "isolation_centred": _isolation(),
    "isolation_axis": _isolation(splits="axis"),
    "blocks_xgb": _blocks_fit(
        lambda: h.HyperbolicXGBClassifier(**XGB, max_cat_to_onehot=1, input_blocks=BLOCKS)
    ),
    "blocks_lgbm": _blocks_fit(lambda: h.HyperbolicLGBMClassifier(**LGBM, input_blocks=BLOCKS)),
    "blocks_tree": _blocks_fit(
        lambda: h.HyperbolicDecisionTreeClassifier(max_depth=4, random_state=0, input_blocks=BLOCKS)
    ),
    "plain_sklearn": _plain(lambda: _sklearn("DecisionTreeClassifier")(max_depth=4), True),
    "plain_xgb": _plain(_lib("xgboost", "XGBRegressor", **XGB), False),
    "plain_lgbm": _plain(_lib("lightgbm", "LGBMClassifier", **LGBM), True),
    **{f"hyperdt_{kind}": _hyperdt(kind) for kind in ("tree_classifier", "tree_regressor")},
    **{f"hyperdt_{kind}": _hyperdt(kind) for kind in ("forest_classifier", "forest_regressor")},
}

#: Module constants a case sets for its export (the If / Loop and operator choices by model size).
LOOP_ONLY = {"hyp2onnx.emit.strategy.SHORT_PATH_MAX_NODES": 0}
V5_ONLY = {"hyp2onnx.emit.strategy.LEGACY_MAX_NODES": 0}
NODE_WALK = {"hyp2onnx.emit.isolation.PERFECT_MAX_ENTRIES": 0}


@dataclasses.dataclass(frozen=True)
class Case:
    model: str
    encoding: str = "fast"
    dtype: str | None = None
    opset: int | None = None
    patch: tuple[tuple[str, Any], ...] = ()
    #: compile_model(..., legacy_only=True), as the skl2onnx converters call it
    legacy_only: bool = False
    #: hyp2onnx.edge.without_row_blocks of the graph
    no_row_blocks: bool = False
    geometry: str | None = None

    @property
    def id(self) -> str:
        parts = [self.model, self.encoding]
        parts += [f"dtype={self.dtype}"] if self.dtype else []
        parts += [f"opset={self.opset}"] if self.opset else []
        parts += [f"{k.rsplit('.', 1)[1]}={v}" for k, v in self.patch]
        parts += ["legacy_only"] if self.legacy_only else []
        parts += ["no_row_blocks"] if self.no_row_blocks else []
        parts += [f"geometry={self.geometry}"] if self.geometry else []
        return "-".join(parts)


ENCODINGS = ("fast", "exact", "compat", "standard")


#: The geometry stated for the plain models' export (they do not record one).
PLAIN_GEOMETRY = {"plain_sklearn": "poincare", "plain_xgb": "hyperboloid", "plain_lgbm": "klein"}


def _cases() -> Iterator[Case]:
    for model in MODELS:
        for encoding in ENCODINGS:
            yield Case(model, encoding, geometry=PLAIN_GEOMETRY.get(model))
    # input precision: float64 Klein coordinates against float32 thresholds' boundaries
    for model in ("rf_binary", "rf_reg", "xgb_reg", "tree_clf", "lgbm_3"):
        for encoding in ("fast", "exact"):
            yield Case(model, encoding, dtype="float64")
    yield Case("rf_far", "fast", dtype="float32")
    # the oldest opset (ReduceMax/ReduceMin and Split take attributes there)
    for model in ("rf_3", "xgb_3", "lgbm_binary", "isolation_centred", "hyperdt_forest_classifier"):
        for encoding in ("fast", "exact", "standard"):
            yield Case(model, encoding, opset=13)
    # the Loop alone (models past SHORT_PATH_MAX_NODES), opset 5 alone (past LEGACY_MAX_NODES)
    for model in ("rf_3", "rf_5", "xgb_3", "rf_binary", "rotation_clf", "lgbm_3"):
        for encoding in ("fast", "exact"):
            yield Case(model, encoding, patch=tuple(LOOP_ONLY.items()))
            yield Case(model, encoding, patch=tuple(V5_ONLY.items()))
    for model in ("isolation_centred",):
        for encoding in ("exact", "standard"):
            yield Case(model, encoding, patch=tuple(NODE_WALK.items()))
    # skl2onnx hosts: ai.onnx.ml opset 3 at most
    for model in ("rf_3", "rf_binary", "xgb_3", "tree_reg"):
        for encoding in ("fast", "exact", "compat"):
            yield Case(model, encoding, legacy_only=True)
    # hyp2onnx.edge.without_row_blocks
    for model in ("rf_3", "xgb_reg", "lgbm_3", "isolation_centred"):
        yield Case(model, "exact", no_row_blocks=True)


CASES = {case.id: case for case in _cases()}


# -- the stored inputs -----------------------------------------------------------------------


def fitted_or_skip(name: str) -> Any:
    """`fitted`, or a skip naming the library it needs (the hash cases need none of them)."""
    try:
        return fitted(name)
    except ImportError as exc:
        pytest.skip(
            f"{name} is fitted with a library that is not installed ({exc}); its graph "
            "hashes, built from the stored description, are checked all the same"
        )


def description(name: str, model: Any) -> Model | HyperDTModel:
    """What the export reads from the fitted ``model``: its IR, or HyperDT's description."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind_of(model) == "hyperdt":
            return read_hyperdt(model)
        return describe(model, input_geometry=PLAIN_GEOMETRY.get(name))


_FITTED: dict[str, Any] = {}
#: A hash of each fitted model's training rows, as generated on this machine.
_ROWS: dict[str, str] = {}
#: The training rows each fitted model was given.
_USED: dict[str, tuple[Any, Any]] = {}


@functools.cache
def stored_rows() -> dict[str, np.ndarray]:
    """The training rows stored by ``--refit`` (``NAME.X``, ``NAME.y``), or none yet."""
    if not ROWS.exists():
        return {}
    with np.load(ROWS, allow_pickle=False) as arrays:
        return dict(arrays)


def fitted(name: str, *, stored: bool = True) -> Any:
    """``MODELS[name]`` fitted on this machine (once per run), on its stored training
    rows where they exist (``stored``), else on the rows its generator gives here."""
    if name not in _FITTED:
        model, X, y = MODELS[name]()
        rows = stored_rows()
        if stored and f"{name}.X" in rows:
            X, y = rows[f"{name}.X"], rows.get(f"{name}.y")
        _USED[name] = (X, y)
        digest = hashlib.sha256()
        _feed(digest, (X, y))
        _ROWS[name] = digest.hexdigest()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _FITTED[name] = model.fit(X) if y is None else model.fit(X, y)
    return _FITTED[name]


@functools.cache
def stored_inputs() -> dict[str, Model | HyperDTModel]:
    """The descriptions stored by ``--refit``, read back bit for bit (`tests/_stored_ir.py`)."""
    if not (INPUTS.exists() and ARRAYS.exists()):
        pytest.fail(
            f"{INPUTS.name} or {ARRAYS.name} is missing: store them with "
            f"python tests/{Path(__file__).name} --refit"
        )
    data = json.loads(INPUTS.read_text())
    with np.load(ARRAYS, allow_pickle=False) as arrays:
        return {name: decode(entry, arrays) for name, entry in data["models"].items()}


def store_inputs() -> None:
    """Fit every model here and store its description; check that it reads back the same."""
    arrays: dict[str, np.ndarray] = {}
    _FITTED.clear()
    fits = {name: description(name, fitted(name, stored=False)) for name in MODELS}
    training: dict[str, np.ndarray] = {}
    for name, (X, y) in _USED.items():
        training[f"{name}.X"] = np.asarray(X)
        if y is not None:
            training[f"{name}.y"] = np.asarray(y)
    np.savez_compressed(ROWS, **training)
    stored_rows.cache_clear()
    models = {name: encode(ir, arrays, f"{name}.") for name, ir in fits.items()}
    ARRAYS.parent.mkdir(exist_ok=True)
    np.savez_compressed(ARRAYS, **arrays)
    rows = {name: _ROWS[name] for name in MODELS}
    record = {"versions": _versions(), "training_rows": rows, "models": models}
    INPUTS.write_text(json.dumps(record, indent=1) + "\n")
    stored_inputs.cache_clear()
    for name, ir in stored_inputs().items():
        assert description_hash(ir) == description_hash(fits[name]), f"{name} reads back otherwise"
    print(f"stored the descriptions of {len(models)} models in {INPUTS} and {ARRAYS}")


# -- hashing ---------------------------------------------------------------------------------


def _feed(digest: Any, value: Any) -> None:
    """Feed ``value`` (dataclasses, arrays, containers, scalars) into ``digest``, typed."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        digest.update(type(value).__name__.encode())
        for field in dataclasses.fields(value):
            digest.update(field.name.encode())
            _feed(digest, getattr(value, field.name))
    elif isinstance(value, np.ndarray):
        digest.update(f"{value.dtype.str}{value.shape}".encode())
        if value.dtype.kind == "O":
            digest.update(repr(value.tolist()).encode())
        else:
            digest.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, dict):
        digest.update(b"{")
        for key in sorted(value, key=repr):
            _feed(digest, key)
            _feed(digest, value[key])
        digest.update(b"}")
    elif isinstance(value, (list, tuple)):
        digest.update(f"{type(value).__name__}{len(value)}".encode())
        for item in value:
            _feed(digest, item)
    else:
        digest.update(f"{type(value).__name__}:{value!r}".encode())


def description_hash(ir: Model | HyperDTModel) -> str:
    """A hash of a description, every field, array bytes and scalar type included."""
    digest = hashlib.sha256()
    _feed(digest, ir)
    return digest.hexdigest()


def graph_hash(onnx_model: onnx.ModelProto) -> str:
    """sha256 of the serialized model, with hyp2onnx's version taken out."""
    model = onnx.ModelProto()
    model.CopyFrom(onnx_model)
    model.producer_version = ""
    model.doc_string = model.doc_string.replace(h.__version__, "VERSION")
    for prop in model.metadata_props:
        if prop.key == "hyp2onnx.version":
            prop.value = ""
    return hashlib.sha256(model.SerializeToString()).hexdigest()


@contextmanager
def _patched(patch: tuple[tuple[str, Any], ...]) -> Iterator[None]:
    saved = []
    try:
        for path, value in patch:
            module, name = path.rsplit(".", 1)
            target = import_module(module)
            saved.append((target, name, getattr(target, name)))
            setattr(target, name, value)
        yield
    finally:
        for target, name, value in reversed(saved):
            setattr(target, name, value)


@contextmanager
def _exporting(case: Case) -> Iterator[list[str]]:
    """The case's module constants set, warnings silenced; an export's error goes in the list."""
    raised: list[str] = []
    with warnings.catch_warnings(), _patched(case.patch):
        warnings.simplefilter("ignore")
        try:
            yield raised
        except (ValueError, h.UnsupportedModelError) as exc:
            raised.append(f"raises {type(exc).__name__}")


def export(case: Case, ir: Model | HyperDTModel) -> onnx.ModelProto | str:
    """The case's graph compiled from the description ``ir``, or the error it raises.

    The compile steps `hyp2onnx.to_onnx` takes after describing a model:
    the input dtype it picks (`input_dtype`; float64 for HyperDT), then the
    graph of the IR; ``test_fit_here_gives_the_stored_graphs`` checks that
    ``to_onnx`` of the fitted model gives the same graphs.
    """
    graph: onnx.ModelProto | None = None
    with _exporting(case) as raised:
        opset = check_opset(case.opset)
        if isinstance(ir, HyperDTModel):
            dtype = case.dtype or "float64"
            graph = compile_hyperdt(ir, dtype=dtype, encoding=case.encoding, opset=opset)
        else:
            graph = compile_model(
                ir,
                dtype=case.dtype or input_dtype(ir),
                encoding=case.encoding,
                opset=opset,
                legacy_only=case.legacy_only,
            )
        if case.no_row_blocks:
            graph = without_row_blocks(graph)
    return raised[0] if raised else _graph(graph)


def export_fitted(case: Case, model: Any) -> onnx.ModelProto | str:
    """The case's graph of the fitted ``model`` through the public entry points."""
    graph: onnx.ModelProto | None = None
    with _exporting(case) as raised:
        if case.legacy_only:
            described = describe(model)
            graph = compile_model(
                described,
                dtype=case.dtype or input_dtype(described),
                encoding=case.encoding,
                opset=check_opset(case.opset),
                legacy_only=True,
            )
        else:
            graph = h.to_onnx(
                model,
                encoding=case.encoding,
                dtype=case.dtype,
                target_opset=case.opset,
                input_geometry=case.geometry,
            )
        if case.no_row_blocks:
            graph = without_row_blocks(graph)
    return raised[0] if raised else _graph(graph)


def _graph(graph: onnx.ModelProto | None) -> onnx.ModelProto:
    assert graph is not None
    return graph


def hash_of(graph: onnx.ModelProto | str) -> str:
    return graph if isinstance(graph, str) else graph_hash(graph)


def _versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for library in LIBRARIES:
        try:
            found[library] = version(library)
        except PackageNotFoundError:
            found[library] = None
    return found


# -- the tests -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stored() -> dict[str, Any]:
    if not HASHES.exists():
        pytest.fail(
            f"{HASHES.name} is missing: write it with python tests/{Path(__file__).name} --write"
        )
    return json.loads(HASHES.read_text())


@pytest.mark.parametrize("case_id", list(CASES))
def test_graph_is_unchanged(case_id: str, stored: dict[str, Any]) -> None:
    """The graph emitted from the stored description hashes as stored: on every machine."""
    case = CASES[case_id]
    expected = stored["cases"].get(case_id)
    assert expected is not None, (
        f"no stored hash for {case_id}: a new case; rewrite the file with "
        f"python tests/{Path(__file__).name} --write"
    )
    got = hash_of(export(case, stored_inputs()[case.model]))
    onnx_then, onnx_now = stored["versions"]["onnx"], _versions()["onnx"]
    assert got == expected, (
        f"the graph of {case_id} changed. If that is intended, rewrite the hashes with "
        f"python tests/{Path(__file__).name} --write and say why in the commit."
        + (f" (Hashed with onnx {onnx_then}, running {onnx_now}.)" if onnx_then != onnx_now else "")
    )


@pytest.mark.parametrize("model", list(MODELS))
def test_fit_here_gives_the_stored_graphs(model: str, stored: dict[str, Any]) -> None:
    """The fit on this machine describes the model as stored, and ``to_onnx`` of it gives the
    stored graphs: the stored descriptions are what the estimators fit (where the fit repeats).

    A fit that comes out otherwise here (another BLAS, CPU libm or tree library) skips this
    check only: the graphs are hashed from the stored descriptions all the same.
    """
    here = description_hash(description(model, fitted_or_skip(model)))
    if here != description_hash(stored_inputs()[model]):
        pytest.skip(
            f"{_why_the_fit_differs(model)}; the graph hashes, built from the stored "
            "description, are checked all the same"
        )
    for case_id, case in CASES.items():
        if case.model == model and not case.patch:
            got = hash_of(export_fitted(case, fitted(model)))
            assert got == stored["cases"][case_id], f"to_onnx of the fit gives {case_id} otherwise"


def _why_the_fit_differs(model: str) -> str:
    """What differs between this machine's fit of ``model`` and the stored one's."""
    record = json.loads(INPUTS.read_text())
    now = _versions()
    differ = {k: (v, now.get(k)) for k, v in record["versions"].items() if now.get(k) != v}
    if differ:
        return f"the fit of {model} differs from the stored one: libraries then -> now {differ}"
    if record["training_rows"][model] != _ROWS[model]:
        return (
            f"the training rows of {model} differ here in their last bits (they pass through "
            "cosh and sinh, whose rounding is the CPU's libm's), so does its fit"
        )
    return (
        f"the fit of {model} differs from the stored one on the same training rows and "
        "libraries: another BLAS or CPU, or a change of the fit (if meant, store it with "
        f"python tests/{Path(__file__).name} --refit and say why in the commit)"
    )


def test_fits_read_the_stored_training_rows() -> None:
    """Every model has stored training rows, and its fit here is given those very arrays."""
    rows = stored_rows()
    for name in ("rf_reg", "lgbm_3", "rotation_clf", "isolation_centred"):
        _FITTED.pop(name, None)
        fitted_or_skip(name)
        assert _USED[name][0] is rows[f"{name}.X"], f"{name} was fitted on rows generated here"
    assert {key.split(".")[0] for key in rows} == set(MODELS), "store the rows again: --refit"


def test_every_model_kind_has_cases() -> None:
    """Each model of MODELS is exported in every encoding, and cases have distinct ids."""
    assert len(CASES) == sum(1 for _ in _cases())
    for model in MODELS:
        assert {c.encoding for c in CASES.values() if c.model == model} == set(ENCODINGS)
    assert set(stored_inputs()) == set(MODELS), "store the inputs again: --refit"


@pytest.mark.parametrize("case_id", ["rf_binary-fast", "lgbm_3-exact", "rotation_clf-fast"])
def test_fit_and_export_twice_give_the_same_hashes(case_id: str) -> None:
    """The stored descriptions can only be checked against fits that repeat exactly."""
    case = CASES[case_id]
    first = description_hash(description(case.model, fitted_or_skip(case.model)))
    graph = hash_of(export_fitted(case, fitted(case.model)))
    _FITTED.pop(case.model)  # fit again
    assert description_hash(description(case.model, fitted(case.model))) == first
    assert hash_of(export_fitted(case, fitted(case.model))) == graph


def write() -> None:
    """Hash every case's graph from the stored descriptions and write the hashes."""
    cases = {
        case_id: hash_of(export(case, stored_inputs()[case.model]))
        for case_id, case in CASES.items()
    }
    record = {"versions": {"onnx": _versions()["onnx"]}, "cases": cases}
    HASHES.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(cases)} cases to {HASHES}")


if __name__ == "__main__":
    if sys.argv[1:] not in (["--write"], ["--refit"]):
        sys.exit(
            f"usage: python {sys.argv[0]} --write | --refit\n"
            "  --write  hash the graphs of the stored descriptions (after a change of graphs)\n"
            "  --refit  fit the models here, store their descriptions, then --write"
        )
    if sys.argv[1:] == ["--refit"]:
        store_inputs()
    write()
