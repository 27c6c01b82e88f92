"""A compiled scorer: the corrected trees as machine code (lleaves), outside ONNX.

`compile_model_lleaves` turns a hyperbolic tree model into a
`CompiledScorer` that predicts in three steps:

1. numpy's projection ``x_s / x_0`` (`hyp2onnx.geometry.to_klein`: the
   same IEEE division as the Python model);
2. the trees, written as LightGBM model text (`lightgbm_model_text`) with
   float64 thresholds that make LightGBM's ``x <= t`` the model's own
   comparison, compiled by lleaves (LLVM) to raw scores;
3. the model's own aggregation, link and label rule, in numpy.

The compiled booster adds the trees in tree order, one class column at a time
(a block of lleaves' loop holds one class's trees, `_block`), so the raw scores are the
Python model's bit for bit (scikit-learn, LightGBM and CatBoost add in
float64), and labels decided on them are exact; probabilities go through
numpy's ``exp`` (within ``1e-15``), rows near a softmax tie through the C
library's ``exp`` as the libraries call it. Models that add in float32
(XGBoost) are refused: lleaves' float32 code gave sums one float32 step off
XGBoost's on some rows, so labels near the threshold could differ.
`SUPPORTED` names the rest of what is refused (docs/export.md, "Compiled
scoring").

Compiling takes long (minutes for hundreds of trees), so the machine code is
cached on disk, keyed by `model_key` (the model text, lleaves' and llvmlite's
versions and the CPU it was compiled for), and each process keeps one
compiled booster per key: a Dask or Spark worker compiles or loads a model
once. lleaves is an optional extra, ``pip install 'hyp2onnx[compiled]'``.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..emit.outputs import NEAR_TIE
from ..emit.trees import float32_boundaries
from ..errors import MissingExtraError, UnsupportedModelError
from ..geometry import from_klein, to_klein
from ..ir import Ensemble, Model, Task

if TYPE_CHECKING:  # onnx is loaded only when a graph is checked
    from ._metadata import GraphMetadata

__all__ = [
    "CompiledScorer",
    "compile_model_lleaves",
    "lightgbm_model_text",
    "model_key",
]

#: The extra that installs lleaves.
EXTRA = "compiled"
#: Where compiled models are cached, unless ``cache_dir`` or ``HYP2ONNX_CACHE`` says otherwise.
DEFAULT_CACHE = Path.home() / ".cache" / "hyp2onnx" / "compiled"
#: What the compiled scorer takes: axis-aligned numeric splits on one hyperbolic
#: geometry's Klein coordinates, classification or regression.
SUPPORTED = (
    "axis-aligned numeric splits on the Klein coordinates of one hyperbolic geometry "
    "(no oblique or rotated splits, categorical splits, input blocks or isolation forests)"
)
#: Points on which a graph and a compiled model must agree to be taken for one model.
AGREEMENT_POINTS = 256
#: Compiled boosters of this process, by `model_key` (one per worker).
_LOADED: dict[str, Any] = {}
_LOCK = threading.Lock()


def _lleaves() -> Any:
    try:
        import lleaves
    except ModuleNotFoundError as exc:
        raise MissingExtraError(
            "the compiled scorer needs lleaves, which is not installed: "
            f"pip install 'hyp2onnx[{EXTRA}]'"
        ) from exc
    return lleaves


def _check(model: Model) -> None:
    e = model.ensemble
    if e.sum_dtype != "float64":
        raise UnsupportedModelError(
            "the compiled scorer adds in float64; this model adds its trees in float32 "
            "(XGBoost), which lleaves' float32 code does not reproduce bit for bit, so its "
            "labels could differ near their threshold: use the ONNX graph."
        )
    if (
        e.projection is not None
        or e.frames is not None
        or e.categories is not None
        or model.space.blocks is not None
        or model.task == Task.ANOMALY
    ):
        raise UnsupportedModelError(f"the compiled scorer takes {SUPPORTED}.")


def _boundaries(e: Ensemble, threshold: np.ndarray) -> np.ndarray:
    """Float64 thresholds ``b`` with lleaves' ``x <= b`` the model's comparison of a
    float64 ``x``: the threshold itself, the float below it (``<``), or for models
    comparing in float32 the boundary of ``float32(x) OP t`` (`float32_boundaries`)."""
    if e.compare_dtype == "float32":  # float64 inputs against float32 boundaries
        bounds = float32_boundaries(threshold, e.op)
        if not np.all(np.isfinite(bounds)):
            raise UnsupportedModelError("a threshold has no finite float32 boundary")
        return bounds
    return threshold if e.op == "<=" else np.nextafter(threshold, -np.inf)


def _columns(e: Ensemble) -> list[tuple[int, int]]:
    """(tree, output column) of each LightGBM tree, iteration by iteration, one tree per
    class an iteration: a tree feeding one column stays one tree where the trees already
    cycle through the columns, else each tree is written once per column."""
    C = e.n_outputs
    target = e.tree_target
    if C == 1 or (target is not None and np.array_equal(target, np.arange(e.n_trees) % C)):
        return [(t, t % C) for t in range(e.n_trees)]
    return [(t, c) for t in range(e.n_trees) for c in range(C)]


#: LightGBM's decision types (bit 1: default left; bits 2-3: missing type): a plain
#: numeric split, and one whose missing value is zero, taken left.
_NUMERIC, _ZERO_LEFT = 0, 2 | (1 << 2)


def _splits(threshold: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Thresholds and decision types for lleaves' ``x <= b``.

    lleaves refuses a threshold of zero (it asserts the threshold is truthy), so
    ``x <= 0`` becomes "missing (``x == 0``, either sign) or ``x <= -d``", ``d`` the
    smallest positive subnormal: the same set of values.
    """
    zero = threshold == 0
    b = np.where(zero, -np.nextafter(0.0, 1.0), threshold)
    return b, np.where(zero, _ZERO_LEFT, _NUMERIC)


def _tree_text(e: Ensemble, index: int, tree: int, column: int, bounds: np.ndarray) -> str:
    arrays, values = e.tree(tree)
    split = np.flatnonzero(arrays.feature >= 0)
    leaves = np.flatnonzero(arrays.feature < 0)
    code = np.empty(arrays.feature.shape[0], dtype=np.int64)
    code[split] = np.arange(split.size)
    code[leaves] = -np.arange(1, leaves.size + 1)  # LightGBM: leaf j is ~j
    leaf_value = values[leaves, column].astype(np.float64)
    if split.size == 0:  # one leaf: a split whose two sides hold it
        feature, threshold, left, right = np.zeros(1, np.int64), np.ones(1), [-1], [-2]
        leaf_value = np.repeat(leaf_value, 2)
    else:
        feature, threshold = arrays.feature[split], bounds[split]
        left, right = code[arrays.left[split]], code[arrays.right[split]]
    threshold, decision = _splits(np.asarray(threshold, dtype=np.float64))

    def line(name: str, items: Any) -> str:
        return f"{name}=" + " ".join(
            repr(float(v)) if isinstance(v, float) else str(v) for v in items
        )

    return "\n".join(
        [
            f"Tree={index}",
            f"num_leaves={leaf_value.size}",
            "num_cat=0",
            line("split_feature", [int(f) for f in feature]),
            line("threshold", [float(t) for t in threshold]),
            line("decision_type", [int(d) for d in decision]),
            line("left_child", [int(c) for c in left]),
            line("right_child", [int(c) for c in right]),
            line("leaf_value", [float(v) for v in leaf_value]),
            "",
        ]
    )


def lightgbm_model_text(e: Ensemble) -> str:
    """The trees of ``e`` as LightGBM model text, raw scores only, that lleaves compiles.

    Thresholds are float64 (written to round-trip) and made LightGBM's ``x <= b``
    for the model's comparison (`_boundaries`); each LightGBM tree adds its leaf
    value to one class column, iteration by iteration (`_columns`).
    """
    bounds = _boundaries(e, e.threshold)
    starts = np.append(e.roots, e.n_nodes)
    pairs = _columns(e)
    C = e.n_outputs
    trees = [
        _tree_text(e, i, t, c, bounds[starts[t] : starts[t + 1]]) for i, (t, c) in enumerate(pairs)
    ]
    head = [
        "tree",
        "version=v4",
        f"num_class={C}",
        f"num_tree_per_iteration={C}",
        "label_index=0",
        f"max_feature_idx={e.n_features - 1}",
        f"objective={'multiclass num_class:' + str(C) if C > 1 else 'regression'}",
        "feature_infos=" + " ".join(["[-1:1]"] * e.n_features),
        "tree_sizes=" + " ".join(str(len(tree) + 1) for tree in trees),
        "",
    ]
    return "\n".join(head + trees + ["end of trees", "", "pandas_categorical:null", ""])


def _block(e: Ensemble) -> int:
    """Trees per block of lleaves' row loop: the trees of one class.

    lleaves runs the trees class by class (sorted by class, in order) in blocks,
    each block over every row: a block's trees add up from zero in order, and
    the block's sum is then added to the sum so far. With one class per block
    each column's sum is the trees' in tree order, as the model adds them; a
    smaller block would add partial sums (another rounding), a larger one loses
    the instruction cache (benchmarks/results/compiled.md).
    """
    return len(_columns(e)) // e.n_outputs


def _versions() -> str:
    found = []
    for package in ("lleaves", "llvmlite"):
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package} -")
    return ", ".join(found)


def _host() -> str:
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    try:
        features = llvm.get_host_cpu_features().flatten()
    except RuntimeError:
        features = ""
    return f"{llvm.get_host_cpu_name()} {features}"


def model_key(text: str, *, block: int) -> str:
    """The cache key of a compiled model: sha256 of its model text, the compile options,
    lleaves' and llvmlite's versions and the CPU the code is made for."""
    digest = hashlib.sha256()
    for part in (text, f"block={block}", _versions(), _host()):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _cache_dir(cache_dir: str | os.PathLike[str] | None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    return Path(os.environ.get("HYP2ONNX_CACHE", DEFAULT_CACHE))


def _compiled(text: str, key: str, block: int, cache: Path) -> Any:
    """This process's compiled booster for ``key``: loaded from ``cache``, else compiled
    there (written whole or not at all)."""
    with _LOCK:
        if key in _LOADED:
            return _LOADED[key]
        lleaves = _lleaves()
        cache.mkdir(parents=True, exist_ok=True)
        target = cache / f"{key}.o"
        with tempfile.TemporaryDirectory(dir=cache) as work:
            model_file = Path(work) / "model.txt"
            model_file.write_text(text)
            booster = lleaves.Model(model_file=str(model_file))
            if target.exists():
                booster.compile(cache=str(target), raw_score=True, fblocksize=block)
            else:
                fresh = Path(work) / "compiled.o"
                booster.compile(cache=str(fresh), raw_score=True, fblocksize=block)
                os.replace(fresh, target)
        _LOADED[key] = booster
        return booster


@dataclass(eq=False)
class CompiledScorer:
    """A model's trees compiled by lleaves, with numpy's projection and its label rule.

    Picklable: the compiled code stays behind, and each process compiles or loads
    it from the cache on its first call (`predict_outputs`).
    """

    model: Model
    text: str  #: the LightGBM model text compiled
    key: str  #: `model_key`
    cache_dir: Path
    #: largest difference of a raw score from the Python model's (0: bit for bit)
    value_bound: float = 0.0
    _booster: Any = field(default=None, repr=False)

    @property
    def block(self) -> int:
        """Trees per block of lleaves' loop (`_block`)."""
        return _block(self.model.ensemble)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_booster": None}

    def metadata(self) -> GraphMetadata:
        """What a graph's metadata would say of the model, with the exact encoding's
        tolerance: ``hyp2onnx.verify`` checks the scorer with it like a graph."""
        from ._metadata import GraphMetadata, tree_metadata

        entries = tree_metadata(self.model, "exact", "float64", {"compiled": self.key})
        return GraphMetadata.parse(entries)

    def check_graph(self, graph: bytes, tolerance: Callable[..., float]) -> None:
        """Refuse a graph (serialized) of another model than this scorer's: the Dask and
        Spark scorers take the graph's columns and checks, and these trees.

        The two must describe the same model (metadata) and give the same labels, and
        values within ``tolerance(metadata, rows=n)`` (``hyp2onnx.verification.default_tolerance``),
        on `AGREEMENT_POINTS` points spread over the ball (a fixed seed).
        """
        import onnx

        from .._runtime import session
        from ._metadata import read_metadata

        metadata = read_metadata(onnx.load_from_string(graph))
        mine = self.metadata()
        keys = ["backend", "estimator_class", "n_trees", "n_features_in", "classes"]
        keys += ["input_geometry", "curvature", "timelike_dim", "sum_dtype", "post_transform"]
        differ = [key for key in keys if metadata.get(key) != mine.get(key)]
        if not differ:
            space = self.model.space
            d = space.n_klein_features
            rng = np.random.default_rng(0)
            k = rng.normal(size=(AGREEMENT_POINTS, d))
            k *= rng.uniform(0, 0.95, (AGREEMENT_POINTS, 1)) / np.linalg.norm(k, axis=1)[:, None]
            X = from_klein(k, space.geometry, space.curvature, space.timelike_dim)
            run = session(graph, threads=1)
            dtype = np.float32 if run.get_inputs()[0].type == "tensor(float)" else np.float64
            want = dict(
                zip([o.name for o in run.get_outputs()], run.run(None, {"X": X.astype(dtype)}))
            )
            got = self.predict_outputs(X.astype(dtype), check=False)
            bound = tolerance(metadata, rows=AGREEMENT_POINTS) + 1e-15
            for name, value in want.items():
                same = (
                    np.array_equal(got[name], value)
                    if name == "label"
                    else np.all(np.abs(got[name] - value) <= bound * (1 + np.abs(value)))
                )
                if not same:
                    differ.append(f"{name} on {AGREEMENT_POINTS} points")
        if differ:
            raise ValueError(
                f"the compiled model is not the graph's model (they differ in {', '.join(differ)})"
                "; compile the model the graph was exported from."
            )

    def as_session(self) -> _Session:
        """An object run like an onnxruntime session of the graph (one input ``X``, the
        graph's outputs), scoring with the compiled trees: for the Dask and Spark scorers."""
        return _Session(self)

    def booster(self) -> Any:
        """The compiled booster (compiled, or loaded from the cache, on first use)."""
        if self._booster is None:
            self._booster = _compiled(self.text, self.key, self.block, self.cache_dir)
        return self._booster

    def raw_scores(self, k: np.ndarray, *, threads: int = 1) -> np.ndarray:
        """The trees' sums ``[n, C]`` of Klein rows ``k`` in ``sum_dtype``, before the
        mean and base values."""
        e = self.model.ensemble
        data = np.ascontiguousarray(k, dtype=np.float64)
        raw = self.booster().predict(data, n_jobs=max(1, int(threads)))
        return raw.reshape(len(k), e.n_outputs).astype(e.sum_dtype, copy=False)

    def predict_outputs(
        self, X: Any, *, threads: int = 1, check: bool = True
    ) -> dict[str, np.ndarray]:
        """The graph's outputs for points ``X``: ``label`` and ``probabilities``, or
        ``variable``, as `hyp2onnx.verification.run_onnx` names them. ``check`` False skips
        the manifold check (as a graph does; ``hyp2onnx predict`` checks first)."""
        space = self.model.space
        X = np.asarray(X, dtype=np.float64)
        k = to_klein(X, space.geometry, space.curvature, space.timelike_dim, check=check)
        e = self.model.ensemble
        scores = self.raw_scores(k, threads=threads)
        dt = np.dtype(e.sum_dtype)
        if e.aggregate == "mean":
            scores = scores / dt.type(e.n_trees)
        scores = (scores + e.base_values.astype(dt)).astype(np.float64)
        return _outputs(e, scores)


@dataclass(frozen=True)
class _Port:
    name: str
    type: str = "tensor(double)"


@dataclass(frozen=True)
class _Session:
    """`CompiledScorer.as_session`: ``get_inputs``, ``get_outputs`` and ``run`` of a
    session, the points read as float64 and not checked (the caller checks them)."""

    scorer: CompiledScorer

    def get_inputs(self) -> list[_Port]:
        return [_Port("X")]

    def get_outputs(self) -> list[_Port]:
        names = (
            ["variable"]
            if self.scorer.model.ensemble.classes is None
            else ["label", "probabilities"]
        )
        return [_Port(name) for name in names]

    def run(
        self, names: Any, feeds: dict[str, np.ndarray], run_options: Any = None
    ) -> list[np.ndarray]:
        (points,) = feeds.values()  # one input: the points, whatever the graph named it
        outputs = self.scorer.predict_outputs(np.asarray(points, np.float64), check=False)
        return [outputs[port.name] for port in self.get_outputs()]


def _outputs(e: Ensemble, scores: np.ndarray) -> dict[str, np.ndarray]:
    """Link and label, as the model's library makes them from its raw ``scores``."""
    if e.classes is None:
        if e.post_transform == "logistic":
            scores = 1.0 / (1.0 + np.exp(-scores))
        return {"variable": scores}
    if e.post_transform == "identity":
        p = scores
    elif e.post_transform == "logistic":
        p1 = 1.0 / (1.0 + np.exp(-scores[:, 0]))
        p = np.stack([1.0 - p1, p1], axis=1)
    else:
        p = _library_softmax(scores, e.sum_dtype)
    if e.label_rule == "above":
        index = (scores[:, 0] > e.label_threshold).astype(np.int64)
    else:
        index = np.argmax(p if e.label_rule == "probabilities" else scores, axis=1)
    return {"label": np.asarray(e.classes)[index], "probabilities": p}


def _library_softmax(scores: np.ndarray, dtype: str) -> np.ndarray:
    """XGBoost's and LightGBM's softmax: shift by the largest score, ``exp``, the sum
    added class by class, a division; rows whose two largest scores lie within
    ``NEAR_TIE`` take the C library's ``exp`` (``math.exp``), as the libraries do."""
    shifted = scores - scores.max(axis=1, keepdims=True)
    exps = np.exp(shifted)
    top = np.sort(scores, axis=1)[:, -2:] if scores.shape[1] > 1 else scores
    near = np.flatnonzero(top[:, -1] - top[:, 0] <= NEAR_TIE[dtype])
    if near.size:
        exps[near] = np.vectorize(math.exp, otypes=[np.float64])(shifted[near])
    if dtype == "float32":
        exps = exps.astype(np.float32).astype(np.float64)
    total = exps[:, 0].copy()
    for c in range(1, exps.shape[1]):
        total += exps[:, c]
    if dtype == "float32":
        total = total.astype(np.float32).astype(np.float64)
    return exps / total[:, None]


def compile_model_lleaves(
    model: Any, *, cache_dir: str | os.PathLike[str] | None = None, **describe_options: Any
) -> CompiledScorer:
    """A `CompiledScorer` for a fitted hyperbolic tree model (or a plain Klein model
    described by ``describe_options``, as for ``to_onnx``).

    The compiled code is cached in ``cache_dir`` (default: ``HYP2ONNX_CACHE``, else
    ``~/.cache/hyp2onnx/compiled``). Raises `hyp2onnx.errors.MissingExtraError`
    without lleaves, `hyp2onnx.errors.UnsupportedModelError` for models outside
    `SUPPORTED`.
    """
    from ._compile import describe

    _lleaves()
    ir_model = model if isinstance(model, Model) else describe(model, **describe_options)
    _check(ir_model)
    text = lightgbm_model_text(ir_model.ensemble)
    e = ir_model.ensemble
    scorer = CompiledScorer(
        model=ir_model,
        text=text,
        key=model_key(text, block=_block(e)),
        cache_dir=_cache_dir(cache_dir),
    )
    scorer.booster()
    return scorer
