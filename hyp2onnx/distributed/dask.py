"""Hyperbolic boosters trained on a Dask cluster, and exported graphs scored on one.

Needs the ``dask`` extra, and the ``xgboost`` or ``lightgbm`` one for the estimators:
``pip install 'hyp2onnx[dask,xgboost]'``.

Training. `HyperbolicDaskXGBClassifier`, `HyperbolicDaskXGBRegressor`,
`HyperbolicDaskLGBMClassifier` and `HyperbolicDaskLGBMRegressor`
take the same parameters as their single-machine twins plus ``client``
(as ``xgboost.dask`` and ``lightgbm``'s Dask estimators do: None means
the default client), and dask arrays or dataframes of hyperbolic points.
``fit`` projects every partition to Klein coordinates where it lies, trains
with ``xgboost.dask`` or ``lightgbm.DaskLGBM*`` on them (``tree_space`` is
``"klein"`` only, see below), then corrects the thresholds as a map-reduce
(`hyp2onnx.correction.summaries`): each partition, where it lies, finds every
split's largest value routed left and smallest routed right among its rows
(the single-machine search) and the nearest values of the split's feature
around its threshold; the summaries merge on the workers by element-wise
max/min and the driver receives one of them, ``4 * splits`` numbers in the
backend's comparison precision, however many rows there are. The single-machine placement
(`KleinPlacer`) then runs on them, so the
thresholds are bit-identical to those of the single-machine estimator with
``tree_space="klein"`` correcting the same booster on the same rows.

The fitted model holds the corrected booster as a local native model
(``estimator_``), so `hyp2onnx.to_onnx`, `hyp2onnx.verify`,
`hyp2onnx.save_onnx` and pickling (for ``hyp2onnx convert``) treat it
like any other hyperbolic model. ``predict`` and ``predict_proba`` return
dask arrays for dask input and numpy arrays for numpy input.

Scoring. `predict` runs an exported graph over a dask array or
dataframe of points, with one onnxruntime session per worker process
(cached by the graph's hash), not one per partition.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import functools
import importlib
import operator
import os
import sys
from collections.abc import Callable, Iterator
from numbers import Real
from typing import Any, ClassVar, Protocol, cast

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from ..correction import (
    CorrectionReport,
    Midpoint,
    SplitIndex,
    SplitSummary,
    TreeSpace,
    correct,
    from_summary,
    klein_space,
    summarise,
)
from ..correction.quantiles import NEAR_RADIUS, SKETCH_SIZE, QuantileMap, QuantileSketch
from ..estimators._base import GEOMETRY_DEFAULTS, comparison_of, generate_init, write_back
from ..estimators._booster import BoosterBackend
from ..estimators._interface import Backend
from ..estimators._registry import backend_for
from ..estimators._weights import rows_text, weight_error, weight_problems
from ..geometry import n_klein_features, to_klein
from ..ir.trees import TreeArrays
from . import _scoring
from ._rows import training_rows

__all__ = [
    "HyperbolicDaskLGBMClassifier",
    "HyperbolicDaskLGBMRegressor",
    "HyperbolicDaskXGBClassifier",
    "HyperbolicDaskXGBRegressor",
    "distributed_near",
    "distributed_sketch",
    "distributed_summary",
    "predict",
]


def _dask() -> Any:
    """The ``dask`` module, or an ImportError naming the extra to install."""
    try:
        import dask
        import dask.array
        import dask.dataframe
        import distributed  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "hyp2onnx.dask needs Dask (dask[array,dataframe] and distributed): "
            "pip install 'hyp2onnx[dask]'"
        ) from exc
    return dask


def _client(client: Any) -> Any:
    """``client``, or the default client of this process."""
    _dask()
    if client is not None:
        return client
    from distributed import default_client

    try:
        return default_client()
    except ValueError as exc:
        raise ValueError(
            "no Dask client: start one (distributed.Client(...)) or pass client=... "
            "to the estimator."
        ) from exc


def _is_dask(x: Any) -> bool:
    return x is not None and _dask().is_dask_collection(x)


def _as_rows(X: Any, what: str = "X") -> Any:
    """A 2-D float64 dask array with one chunk of columns (partitions by row)."""
    dask = _dask()
    if isinstance(X, dask.dataframe.DataFrame):
        X = X.to_dask_array()
    if not isinstance(X, dask.array.Array):
        raise TypeError(
            f"{what} must be a dask array or dask DataFrame, got {type(X).__name__}; for data "
            "in memory use the single-machine estimators (hyp2onnx.HyperbolicXGBClassifier, ...)."
        )
    if X.ndim != 2:
        raise ValueError(f"{what} must be 2-D (n_samples, n_features), got {X.ndim} dimensions.")
    if X.numblocks[1] != 1:
        X = X.rechunk({1: -1})
    return X.astype(np.float64)


def _as_column(v: Any, X: Any, what: str, *, allow_2d: bool = False) -> Any:
    """``v`` (dask array, Series or one-column DataFrame) partitioned like ``X``."""
    dask = _dask()
    if isinstance(v, (dask.dataframe.Series, dask.dataframe.DataFrame)):
        v = v.to_dask_array()
    if not isinstance(v, dask.array.Array):
        raise TypeError(f"{what} must be a dask array or Series like X, got {type(v).__name__}.")
    if v.ndim == 2 and v.shape[1] == 1 and not allow_2d:
        v = v[:, 0]
    if v.ndim != 1 and not (allow_2d and v.ndim == 2):
        raise ValueError(f"{what} must be 1-D, got shape {v.shape}.")
    if v.ndim == 2 and v.numblocks[1] != 1:
        v = v.rechunk({1: -1})
    if v.numblocks[0] != X.numblocks[0] or (
        not np.isnan(X.shape[0]) and not np.isnan(v.shape[0]) and v.chunks[0] != X.chunks[0]
    ):
        if np.isnan(X.shape[0]) or np.isnan(v.shape[0]):
            raise ValueError(
                f"{what} has {v.numblocks[0]} partitions and X has {X.numblocks[0]}; give them "
                "the same partitions (or known chunk sizes, which are aligned here)."
            )
        if v.shape[0] != X.shape[0]:
            raise ValueError(f"{what} has {v.shape[0]} rows and X has {X.shape[0]}.")
        v = v.rechunk({0: X.chunks[0]})
    return v


def _raise_partition_errors(persisted: Any) -> None:
    """Wait for a persisted collection; re-raise the first partition's error, if any."""
    from distributed import futures_of, wait

    futures = futures_of(persisted)
    wait(futures)
    for future in futures:
        if future.status == "error":
            future.result()  # raises the partition's own exception


def _nulls(block: Any) -> np.ndarray:
    """Where a partition holds None, NaN or pandas' <NA> (object and nullable columns too)."""
    import pandas as pd

    values = np.asarray(block)
    # Numbers hold no None or <NA>: only a float's NaN, found without a boxed copy
    # (an object array of 250,000 labels took 10 ms to build and search).
    if values.dtype.kind in "iub":
        return np.zeros(values.shape, dtype=bool)
    if values.dtype.kind == "f":
        return np.isnan(values)
    return np.asarray(pd.isna(np.asarray(block, dtype=object)), dtype=bool)


def _as_numbers(block: Any) -> np.ndarray:
    """A partition of an object or nullable column as float64 (nulls NaN); a ValueError for
    any other value that is not a number (a string)."""
    import pandas as pd

    values = pd.Series(np.asarray(block, dtype=object).reshape(-1))
    numbers = pd.to_numeric(values, errors="coerce")
    wrong = numbers.isna() & values.notna()
    if wrong.any():
        raise ValueError(f"sample_weight must hold numbers; it holds {values[wrong].iloc[0]!r}.")
    return numbers.to_numpy(dtype=np.float64, na_value=np.nan).reshape(np.shape(block))


def _numeric_weights(w: Any) -> tuple[Any, Any]:
    """Weights as float64, and where they were null (None for a numeric dask array)."""
    if w.dtype.kind in "fiub":
        return w, None
    return w.map_blocks(_as_numbers, dtype=np.float64), w.map_blocks(_nulls, dtype=bool)


def _check_labels(client: Any, y: Any, *, regression: bool) -> Any:
    """``y``, float64 for a regressor; a ValueError naming the (global) rows of missing
    labels (None, NaN, <NA>), or of infinite targets.

    Checked before training: the boosters' own failures on a cluster
    ("Label contains NaN", "boolean value of NA is ambiguous") name no rows.
    """
    da = _dask().array
    null = y.map_blocks(_nulls, dtype=bool)
    if regression:
        y = y if y.dtype.kind in "fiub" else y.map_blocks(_as_numbers, dtype=np.float64)
        null = null | da.isinf(y.astype(np.float64))
    if null.ndim == 2:
        null = null.any(axis=1)
    n_bad = int(client.compute(null.sum(), sync=True))
    if n_bad:
        rows = np.flatnonzero(client.compute(null, sync=True))  # one byte a row, only now
        what = "targets" if regression else "labels"
        raise ValueError(
            f"y holds missing {what} (None, NaN or <NA>{', or infinite' if regression else ''}) "
            f"at {rows_text(rows, n_bad)}; drop those rows or give them {what}."
        )
    return y


def _check_weights(client: Any, w: Any, backend: Backend, null: Any = None) -> None:
    """A ValueError naming the rows (global row numbers) of unusable sample weights.

    Checked before training: XGBoost's and LightGBM's own failures on a
    cluster ("Ring allreduce", a quantile check) name neither the weights
    nor the rows. One pass over the persisted weights; the weights come to
    the driver only when some are bad, to name their rows.
    """
    da = _dask().array
    negative_ok = backend.negative_weights
    bad = ~da.isfinite(w) if negative_ok else ~da.isfinite(w) | (w < 0)
    n_bad, n_nonzero, n_rows = client.compute(
        [bad.sum(), da.count_nonzero(w), w.map_blocks(np.ones_like, dtype=np.int64).sum()],
        sync=True,
    )
    problems = []
    if n_bad:
        values = np.asarray(client.compute(w, sync=True))
        nulls = None if null is None else np.asarray(client.compute(null, sync=True))
        problems = weight_problems(values, negative_ok=negative_ok, null=nulls)
    error = weight_error(
        problems,
        int(n_nonzero),
        int(n_rows),
        negative_ok=negative_ok,
        backend=f"{backend.name} models",
    )
    if error is not None:
        raise error


def _blockwise(f: Any) -> Any:
    """``f`` applied per partition to dask arrays, directly to numpy arrays."""

    def apply(x: Any) -> Any:
        return x.map_blocks(f, dtype=np.float64) if _is_dask(x) else f(x)

    return apply


def _where(block_info: dict | None) -> dict[str, int]:
    """Where a map_blocks partition lies, for `hyp2onnx.distributed._scoring.locate`: its
    first row in the whole array, or (sizes unknown) its partition number."""
    info = (block_info or {}).get(0) or {}
    start = (info.get("array-location") or [(None, None)])[0][0]
    if start is not None and not np.isnan(start):
        return {"first_row": int(start)}
    return {"partition": int((info.get("chunk-location") or (0,))[0])}


@contextlib.contextmanager
def _rows_located(block_info: dict | None) -> Iterator[None]:
    """Re-raise a partition's InvalidPointError with the rows' global numbers."""
    from ..errors import InvalidPointError

    try:
        yield
    except InvalidPointError as exc:
        raise InvalidPointError(_scoring.locate(str(exc), **_where(block_info))) from None


def _klein_block(
    block: np.ndarray,
    geometry: str,
    curvature: float,
    timelike: int,
    check: bool,
    block_info: dict | None = None,
):
    with _rows_located(block_info):
        return to_klein(
            np.asarray(block, dtype=np.float64), geometry, curvature, timelike, check=check
        )


def _buckets(block: np.ndarray, qmap: QuantileMap) -> np.ndarray:
    return qmap.transform(block)


def _framed(model: Any, block: np.ndarray) -> Any:
    """A partition as the model was fitted on it: a DataFrame if it had column names."""
    names = getattr(model, "feature_names_in_", None)
    if names is None:
        return block
    import pandas as pd

    return pd.DataFrame(block, columns=names)


def _call_block(
    block: np.ndarray, model: Any, method: str, block_info: dict | None = None
) -> np.ndarray:
    with _rows_located(block_info):
        return np.asarray(getattr(model, method)(_framed(model, block)))


#: Rows summarised in one task at most: a worker's partitions are summarised
#: together up to this many rows (the search costs less per row on more rows;
#: its working memory is about 200 bytes per row for 8 split features).
ROWS_PER_SUMMARY = 1 << 22


@functools.cache
def _glibc() -> Any:
    """The C library if it is glibc (it has ``mallopt`` and ``malloc_trim``), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # glibc only  # noqa: B018
        return libc
    except (OSError, AttributeError):
        return None


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters


@contextlib.contextmanager
def _reusing_freed_memory() -> Iterator[None]:
    """Let glibc reuse freed memory for the duration of a numpy-heavy task.

    Dask starts its workers with ``MALLOC_TRIM_THRESHOLD_=65536`` so that freed
    memory goes back to the OS at once; glibc then also maps every block over
    128 KiB afresh, and the search's many large temporaries pay for the page
    faults, which slow it markedly on large many-tree models. Inside,
    both thresholds are raised; on leaving, the environment's values come
    back and free memory is returned. Nothing changes where the variable is
    unset (glibc then sets both thresholds itself) or the C library is not glibc.
    """
    libc = _glibc()
    try:
        trim = int(os.environ["MALLOC_TRIM_THRESHOLD_"])
        mmap = int(os.environ.get("MALLOC_MMAP_THRESHOLD_", 128 * 1024))
    except (KeyError, ValueError):
        libc = None
    if libc is None:
        yield
        return
    libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)  # glibc's largest
    libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30)
    try:
        yield
    finally:
        libc.mallopt(_M_MMAP_THRESHOLD, mmap)
        libc.mallopt(_M_TRIM_THRESHOLD, trim)
        libc.malloc_trim(0)


def _group_summary(
    shipped: tuple[Backend, Any, list[TreeArrays], bool], xs: list, ys: list, ws: list
) -> SplitSummary:
    """The split summary of some partitions' training rows, searched together (the map
    step: one task per group of partitions held by one worker)."""
    backend, fitted, trees, compared = shipped
    rows = [
        training_rows(backend, fitted, x, y, w, compared)
        for x, y, w in zip(xs, ys, ws, strict=True)
    ]
    with _reusing_freed_memory():
        return summarise(trees, np.concatenate(rows) if len(rows) > 1 else rows[0], backend.op)


def _groups(sizes: list[int], limit: int) -> list[list[int]]:
    """Consecutive runs of ``sizes`` (indices) holding at most ``limit`` rows (or one item),
    about equally large (5M rows at a limit of 4M: two runs of 2.5M, not 4M and 1M)."""
    limit = -(-sum(sizes) // max(1, -(-sum(sizes) // limit)))  # the total over the runs needed
    groups: list[list[int]] = []
    total = limit + 1
    for i, n in enumerate(sizes):
        if total + n > limit:
            groups.append([])
            total = 0
        groups[-1].append(i)
        total += n
    return groups


def distributed_summary(
    client: Any,
    backend: Backend,
    fitted: Any,
    Xk: Any,
    y: Any,
    sample_weight: Any = None,
    *,
    rows_per_summary: int = ROWS_PER_SUMMARY,
    trees: list[TreeArrays] | None = None,
) -> SplitSummary:
    """The split summary of all training rows of ``fitted``: a map over the workers'
    partitions, a tree reduce.

    ``Xk`` is a dask array of what the booster was fitted on (unit-ball Klein
    coordinates), ``y`` and ``sample_weight`` too, partitioned alike; they
    are persisted if they are not. The model goes to every worker once. The
    rows are not moved: each worker summarises the partitions of ``Xk`` it
    holds, several together (up to ``rows_per_summary`` rows), and only
    summaries travel; the final one (`SplitSummary.nbytes`,
    independent of the rows) comes back to this process.

    ``trees``: splits of the float64 values of ``Xk`` to summarise instead of
    the booster's own (the Klein trees of the ``"quantiles"`` space, see
    `hyp2onnx.correction.quantiles.QuantileMap.klein_trees`); the rows
    are then compared in float64 and the summary is float64.
    """
    from distributed import futures_of, wait

    _dask()
    collections = [Xk, y] if sample_weight is None else [Xk, y, sample_weight]
    collections = client.persist(collections)  # a no-op for persisted collections
    blocks = []
    for collection in collections:
        futures = {f.key: f for f in futures_of(collection)}
        blocks.append([futures[d.key] for d in collection.to_delayed().ravel()])
    if sample_weight is None:
        blocks.append([None] * len(blocks[0]))
    xs, ys, ws = blocks
    wait(xs)
    holder = client.who_has(xs)
    by_worker: dict[str, list[int]] = {}
    for i, x in enumerate(xs):
        by_worker.setdefault(sorted(holder[x.key])[0], []).append(i)
    compared = trees is None
    if trees is None:
        trees = backend.read_trees(fitted)
    shipped = client.scatter((type(backend)(), fitted, trees, compared), broadcast=True, hash=False)
    sizes = collections[0].chunks[0]
    if any(np.isnan(sizes)):  # e.g. from a DataFrame: count where the rows are
        sizes = client.gather(client.map(len, xs, pure=False))
    parts = []
    for worker, indices in by_worker.items():
        for group in _groups([sizes[i] for i in indices], rows_per_summary):
            at = [indices[j] for j in group]
            parts.append(
                client.submit(
                    _group_summary,
                    shipped,
                    [xs[i] for i in at],
                    [ys[i] for i in at],
                    [ws[i] for i in at],
                    workers=[worker],
                    allow_other_workers=True,
                    pure=False,
                )
            )
    while len(parts) > 1:
        pairs = [
            client.submit(SplitSummary.merge, a, b, pure=False)
            for a, b in zip(parts[0::2], parts[1::2], strict=False)
        ]
        parts = pairs + ([parts[-1]] if len(parts) % 2 else [])
    return parts[0].result()


def _sketch_block(x: np.ndarray, w: Any, size: int) -> QuantileSketch:
    """The quantile sketch of one partition's rows of non-zero weight (the map step)."""
    x = np.asarray(x, dtype=np.float64)
    if w is not None:
        x = x[np.asarray(w) != 0]
    return QuantileSketch.of(x, size)


def distributed_sketch(
    client: Any, Xk: Any, sample_weight: Any = None, *, size: int | None = None
) -> QuantileSketch:
    """The quantile sketch of the rows of ``Xk`` (of non-zero weight): one task per
    partition where it lies, a tree reduce on the workers; the driver receives one
    sketch, at most ``size`` values and weights per feature whatever the rows
    (default `SKETCH_SIZE`)."""
    from distributed import futures_of

    _dask()
    size = SKETCH_SIZE if size is None else int(size)
    collections = [Xk] if sample_weight is None else [Xk, sample_weight]
    collections = client.persist(collections)
    blocks = []
    for collection in collections:
        futures = {f.key: f for f in futures_of(collection)}
        blocks.append([futures[d.key] for d in collection.to_delayed().ravel()])
    ws = blocks[1] if sample_weight is not None else [None] * len(blocks[0])
    parts = [
        client.submit(_sketch_block, x, w, size, pure=False)
        for x, w in zip(blocks[0], ws, strict=True)
    ]
    while len(parts) > 1:
        pairs = [
            client.submit(QuantileSketch.merge, a, b, pure=False)
            for a, b in zip(parts[0::2], parts[1::2], strict=False)
        ]
        parts = pairs + ([parts[-1]] if len(parts) % 2 else [])
    sketch = parts[0].result()
    if sample_weight is not None and any(v.size == 0 for v in sketch.values):
        return distributed_sketch(client, Xk, size=size)  # every weight zero: all rows
    return sketch


def _largest_norm2(x: np.ndarray, w: Any) -> np.ndarray:
    """``[[largest |k|^2, rows]]`` of one partition's rows of non-zero weight (``w``:
    an ``(n, 1)`` block or None), with the arithmetic of `QuantileSketch.of`."""
    x = np.asarray(x, dtype=np.float64)
    if w is not None:
        x = x[np.asarray(w)[:, 0] != 0]
    return np.array([[np.max(np.einsum("ij,ij->i", x, x), initial=0.0), x.shape[0]]])


def distributed_near(
    client: Any, Xk: Any, sample_weight: Any = None, radius: float = NEAR_RADIUS
) -> bool:
    """Whether every row of ``Xk`` of non-zero weight (every row, if none has) lies within
    ``radius`` of the origin: ``distributed_sketch(...).near(radius)``, from two numbers
    per partition instead of a sketch of every feature."""
    da = _dask().array
    Xk = Xk.rechunk({1: -1})
    arrays = [Xk] if sample_weight is None else [Xk, sample_weight[:, None].rechunk({1: -1})]
    parts = da.map_blocks(
        lambda x, w=None: _largest_norm2(x, w),
        *arrays,
        chunks=((1,) * Xk.numblocks[0], (2,)),
        dtype=np.float64,
    )
    found = np.asarray(client.compute(parts, sync=True))
    if sample_weight is not None and found[:, 1].sum() == 0:
        return distributed_near(client, Xk, radius=radius)  # every weight zero: all rows
    return bool(found[:, 0].max(initial=0.0) <= np.tanh(radius) ** 2)


def _far_buckets(client: Any, Xt: Any, w: Any, backend: Backend) -> QuantileMap | None:
    """The quantile buckets of the ``"quantiles"`` space; None when every row of non-zero
    weight is near the origin (the usual case), known from two numbers per partition
    (`distributed_near`: the sketch's own ``near()``) before any sketch is made."""
    if distributed_near(client, Xt, w):
        return None
    return QuantileMap.of(distributed_sketch(client, Xt, w), backend.zero_band)


# -- training on the cluster: one function per library ------------------------------


def _train_xgboost(native: Any, client: Any, Xk: Any, y: Any, w: Any, fit_params: dict) -> Any:
    """Fit ``native``'s parameters with ``xgboost.dask``; a local model with the booster."""
    from xgboost import dask as dxgb

    dask_class = getattr(dxgb, "Dask" + type(native).__name__)  # XGBClassifier -> DaskXGB...
    model = dask_class(**native.get_params())
    model.client = client
    model.fit(Xk, y, sample_weight=w, **fit_params)
    local = type(native)(**native.get_params())
    local.load_model(bytearray(model.get_booster().save_raw(raw_format="ubj")))
    return local


def _train_lightgbm(native: Any, client: Any, Xk: Any, y: Any, w: Any, fit_params: dict) -> Any:
    """Fit ``native``'s parameters with LightGBM's Dask estimator; its local model."""
    import lightgbm

    dask_class = getattr(lightgbm, "Dask" + type(native).__name__)  # LGBMClassifier -> DaskLGBM...
    model = dask_class(client=client, **native.get_params())
    model.fit(Xk, y, sample_weight=w, **fit_params)
    return model.to_local()


_DASK_DOC = """
    Trained on a Dask cluster: ``X`` is a dask array or dask DataFrame of
    hyperbolic points, ``y`` and ``sample_weight`` dask arrays or Series with
    the same partitions. ``client`` is the ``distributed.Client`` to use
    (default: the current one); it is not pickled. ``predict`` returns a dask
    array for dask input, a numpy array for numpy input. The thresholds are
    corrected by a map-reduce over the partitions (see `hyp2onnx.dask`),
    bit-identical to the single-machine estimator's (``tree_space="klein"``)
    correction of the same booster.

    ``fit_timeout`` bounds the library's Dask training, in seconds (default
    3600; None: no limit): past it, the training's tasks are cancelled and
    ``fit`` raises TimeoutError, so a training whose workers wait on each
    other can never hang. LightGBM classifiers first check that every worker
    holding rows holds every class (LightGBM encodes labels per worker).
    Invalid points are refused before training, named by their global row
    numbers.

    ``tree_space`` is ``"quantiles"`` (the default here) or ``"klein"``.
    ``"quantiles"`` (`hyp2onnx.correction.quantiles`): when every
    training point lies within a distance of 5 of the origin, the booster is
    fitted on Klein coordinates, exactly as with ``"klein"``; farther out, on
    each feature's bucket among at most 16,384 quantiles of its values (a
    sketch merged across partitions: a bounded transfer to the driver
    however many rows there are), and the thresholds are then placed in
    float64 Klein space by the same distributed search, through split
    indices where the booster's precision cannot separate them. On the ray
    test both boosters stay reliable to a distance of at least 14.
    ``"klein"``: always Klein coordinates (XGBoost reliable to a distance of
    about 6, LightGBM to about 15). The single-machine ``"ranks"`` and
    ``"rapidity"`` spaces are not available: they need every distinct
    training value at the driver.
"""

#: Dask tree spaces: bounded traffic to the driver.
DASK_TREE_SPACES = ("quantiles", "klein")

#: Why the Dask estimators take neither "ranks" nor "rapidity".
_NOT_ON_DASK = (
    "{name} supports tree_space='quantiles' (the default) or 'klein', got {value!r}: the "
    "'ranks' and 'rapidity' spaces map each feature through all of its distinct training "
    "values, which would have to be gathered from every partition (traffic growing with the "
    "rows). 'quantiles' keeps far points apart with a bounded sketch of the values; or fit a "
    "single-machine estimator (e.g. hyp2onnx.HyperbolicXGBClassifier) on data that fits one "
    "machine."
)


class _Twin(Protocol):
    """The single-machine estimator's methods that the Dask mixins extend.

    The mixins are combined with a single-machine class at run time (module
    ``__getattr__``), which comes after them in the MRO: their ``super()`` is that
    class, which mypy cannot see from the mixins alone, hence ``cast(_Twin, super())``.
    """

    def __sklearn_clone__(self) -> Any: ...
    def __getstate__(self) -> dict[str, Any]: ...
    def _klein(self, X: Any, *, reset: bool) -> np.ndarray: ...
    def predict(self, X: Any) -> np.ndarray: ...
    def predict_proba(self, X: Any) -> np.ndarray: ...
    def _eval_labels(self, y: Any) -> Any: ...


class _DaskModel:
    """What the Dask estimators add to their single-machine twins."""

    _train: ClassVar[Any]
    # What the single-machine twin (a BoostingModel after this mixin in the MRO) and
    # the generated __init__ provide; annotations only, so that nothing here shadows
    # their definitions.
    _native_params: ClassVar[tuple[str, ...]]
    _signature_from: ClassVar[tuple[type, ...]]
    _parameter_constraints: ClassVar[dict]
    input_geometry: str
    curvature: float
    timelike_dim: int
    check_manifold: bool
    tree_space: str
    input_blocks: list | tuple | None
    client: Any
    fit_timeout: float | None
    n_features_in_: int
    _validate_params: Callable[[], None]
    _make_estimator: Callable[[], Any]
    _fit_params: Callable[[dict[str, Any], Callable[[np.ndarray], np.ndarray]], dict[str, Any]]
    _classes: Callable[[Any], np.ndarray]
    _midpoint_rules: Callable[[], Midpoint | np.ndarray]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not hasattr(cls, "_native"):  # an intermediate class
            return
        cls._native_params = generate_init(
            cls,
            (cls._native, *cls._signature_from),
            {
                **GEOMETRY_DEFAULTS,
                "tree_space": "quantiles",
                "override_subsample": True,
                "client": None,
                "fit_timeout": FIT_TIMEOUT,
            },
            extra=True,
        )
        cls._parameter_constraints = {
            **cls._parameter_constraints,
            "client": "no_validation",
            "tree_space": [StrOptions({*DASK_TREE_SPACES, "ranks", "rapidity"})],
            "fit_timeout": [Interval(Real, 0, None, closed="neither"), None],
        }
        cls.__doc__ = (cls.__doc__ or "") + _DASK_DOC

    # -- a Client is a handle: shared by clones, never pickled -------------------

    def __sklearn_clone__(self):
        client = self.client
        self.client = None
        try:
            new = cast(_Twin, super()).__sklearn_clone__()
        finally:
            self.client = client
        new.client = client
        return new

    def __getstate__(self) -> dict[str, Any]:
        state = dict(cast(_Twin, super()).__getstate__())  # a copy: the client stays on this object
        state["client"] = None
        return state

    @property
    def client_(self) -> Any:
        """The client ``fit`` and ``predict`` use: ``client``, or the default one."""
        return _client(self.client)

    # -- data --------------------------------------------------------------------

    def _klein(self, X: Any, *, reset: bool) -> Any:
        """Klein coordinates, computed per partition for dask input."""
        if not _is_dask(X):
            return cast(_Twin, super())._klein(X, reset=reset)
        X = _as_rows(X)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input."
            )
        d = n_klein_features(X.shape[1], self.input_geometry)
        return X.map_blocks(
            _klein_block,
            self.input_geometry,
            float(self.curvature),
            int(self.timelike_dim),
            bool(self.check_manifold),
            chunks=(X.chunks[0], (d,)),
            dtype=np.float64,
        )

    def _record_features(self, X: Any) -> None:
        """``n_features_in_`` and (for DataFrames) ``feature_names_in_``, as validate_data sets them."""
        dask = _dask()
        meta = X._meta if isinstance(X, dask.dataframe.DataFrame) else None
        if meta is None:
            shape = _as_rows(X).shape
            meta = np.empty((0, shape[1]))
        validate_data(
            self, meta, reset=True, dtype=np.float64, ensure_min_samples=0, ensure_all_finite=False
        )

    # -- training ------------------------------------------------------------------

    def fit(self, X: Any, y: Any, sample_weight: Any = None, **fit_params: Any):
        """Fit on a dask collection of hyperbolic points ``X`` and correct every threshold."""
        self._check_settings()
        client = _client(self.client)
        estimator = self._make_estimator()
        # The twins are XGBoost and LightGBM models: their backends are boosters.
        backend = cast(BoosterBackend, backend_for(estimator))
        # Klein coordinates (LightGBM's zero band read as 0, as the single-machine
        # "klein" space does), computed per partition: what the correction searches.
        as_klein = TreeSpace("klein", backend.compare_dtype, (), (), backend.zero_band).transform
        Xt, y, w = self._checked_inputs(client, X, y, sample_weight, as_klein, backend)
        backend.check_fit(estimator, y, fit_params)
        backend.warn_subsampling(estimator)
        # The learner's input: the Klein coordinates, or far out their quantile buckets.
        qmap = _far_buckets(client, Xt, w, backend) if self.tree_space == "quantiles" else None
        to_tree, Xlearn = as_klein, Xt
        if qmap is not None:
            to_tree = qmap.transform
            Xlearn = Xt.map_blocks(
                _buckets,
                _dask().delayed(qmap, pure=True),  # sent once, not per partition
                meta=np.empty((0, 0), dtype=np.float64),
            )
        y_train = self._training_labels(y, client)
        self._check_workers(client, Xt, y_train)  # before the library opens its sockets
        fitted = _within(
            self.fit_timeout,
            client,
            type(self).__name__,
            self._train,
            estimator,
            client,
            Xlearn,
            y_train,
            w,
            self._fit_params(fit_params, _blockwise(to_tree)),
        )
        self._check_classes(fitted)  # first: says why the classes disagree
        backend.to_ensemble(fitted)  # refuse now what export would refuse
        self.estimator_, self.correction_, self.split_index_, self.input_dtype_ = (
            self._correct_distributed(
                backend, fitted, Xt, y_train, w, client=client, quantile_map=qmap
            )
        )
        #: The space the booster was fitted on: "klein", or "quantiles" (its buckets).
        self.tree_space_ = "klein" if qmap is None else "quantiles"
        if self._is_classifier():
            self.classes_ = self._classes(fitted)
        self.n_outputs_ = 1 if y.ndim == 1 else int(y.shape[1])
        return self

    def _check_settings(self) -> None:
        """Refuse, before any work on the cluster, what the cluster fit does not take."""
        self._validate_params()
        if self.tree_space not in DASK_TREE_SPACES:
            raise ValueError(_NOT_ON_DASK.format(name=type(self).__name__, value=self.tree_space))
        if self.input_blocks is not None:
            raise ValueError(
                f"{type(self).__name__} takes one geometry (input_geometry, curvature, "
                "timelike_dim), not input_blocks: mixed-input models train on one machine "
                "(hyp2onnx.HyperbolicXGBClassifier(input_blocks=...), ...)."
            )

    def _checked_inputs(
        self, client: Any, X: Any, y: Any, sample_weight: Any, as_klein: Any, backend: Backend
    ) -> tuple[Any, Any, Any]:
        """The Klein coordinates, labels and weights, persisted on the workers and checked
        there: invalid points and weights named, labels the library can train on."""
        rows = _as_rows(X)
        self._record_features(X)
        y = _as_column(y, rows, "y", allow_2d=not self._is_classifier())
        w = None if sample_weight is None else _as_column(sample_weight, rows, "sample_weight")
        Xt = self._klein(rows, reset=False).map_blocks(as_klein, dtype=np.float64)
        w, null = (None, None) if w is None else _numeric_weights(w)
        Xt, y, w = client.persist([Xt, y, w]) if w is not None else (*client.persist([Xt, y]), None)
        _raise_partition_errors(Xt)  # invalid points, named, before any training
        y = _check_labels(client, y, regression=not self._is_classifier())
        if w is not None:
            _raise_partition_errors(w)  # weights that are not numbers
            _check_weights(client, w, backend, null)
        return Xt, y, w

    def _is_classifier(self) -> bool:
        return is_classifier(self)

    def _training_labels(self, y: Any, client: Any) -> Any:
        """Hook: the labels the booster is trained on (classifiers: also record the classes)."""
        if self._is_classifier():
            self._labels = self._unique_labels(y, client)
        return y

    @staticmethod
    def _unique_labels(y: Any, client: Any) -> np.ndarray:
        from sklearn.utils.multiclass import check_classification_targets

        classes = np.asarray(client.compute(_dask().array.unique(y)).result())
        check_classification_targets(classes)
        return classes

    def _check_classes(self, fitted: Any) -> None:
        """Hook: refuse a model whose classes are not those of ``y``."""

    def _check_workers(self, client: Any, Xt: Any, y: Any) -> None:
        """Hook: refuse, before training, data the library cannot train on as it lies."""

    def _correct_distributed(
        self,
        backend: Backend,
        fitted: Any,
        Xt: Any,
        y: Any,
        sample_weight: Any,
        *,
        client: Any,
        quantile_map: QuantileMap | None,
    ) -> tuple[Any, CorrectionReport, SplitIndex | None, str]:
        """The single-machine placement (the base's ``_correct``), fed by summaries of
        the partitions that ``client`` computes.

        Trained on quantile buckets (``quantile_map``): the booster's splits as
        float64 Klein splits
        (`klein_trees`), searched
        on the float64 Klein rows, placed in Klein space as ``"ranks"`` places them.
        """
        trees = backend.read_trees(fitted)
        comparison = comparison_of(backend)
        if quantile_map is None:
            summary = distributed_summary(client, backend, fitted, Xt, y, sample_weight)
            space = klein_space(
                trees, summary, Xt.shape[1], backend.compare_dtype, backend.zero_band
            )
        else:
            trees = quantile_map.klein_trees(trees, backend.op)
            summary = distributed_summary(
                client, backend, fitted, Xt, y, sample_weight, trees=trees
            )
            space = klein_space(trees, summary, Xt.shape[1], "float64", backend.zero_band)
            # Not learner thresholds: n_moved counts thresholds off the arithmetic midpoint.
            space = dataclasses.replace(space, space="quantiles")
        neighbours = from_summary(trees, summary, comparison, self._midpoint_rules())
        return write_back(
            backend, fitted, correct(trees, space, neighbours, comparison, self._midpoint_rules())
        )

    # -- prediction ------------------------------------------------------------------

    def _map_rows(self, X: Any, method: str, dtype: Any, width: int | None) -> Any:
        """``method`` of this model on every partition of ``X``: a dask array."""
        check_is_fitted(self)
        dask = _dask()
        rows = _as_rows(X)
        if rows.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {rows.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input."
            )
        model = dask.delayed(self, pure=False)  # sent to each worker once, not per partition
        if width is None:
            return rows.map_blocks(_call_block, model, method, drop_axis=1, dtype=dtype)
        return rows.map_blocks(
            _call_block, model, method, chunks=(rows.chunks[0], (width,)), dtype=dtype
        )

    def predict(self, X: Any) -> Any:
        """Labels or values; a dask array (one task per partition) for dask input."""
        if not _is_dask(X):
            return cast(_Twin, super()).predict(X)
        check_is_fitted(self)
        if self._is_classifier():
            return self._map_rows(X, "predict", self.classes_.dtype, None)
        width = None if self.n_outputs_ == 1 else self.n_outputs_
        return self._map_rows(X, "predict", np.float64, width)


class _DaskClassifier(_DaskModel):
    def predict_proba(self, X: Any) -> Any:
        """Class probabilities, columns in ``classes_`` order; a dask array for dask input."""
        if not _is_dask(X):
            return cast(_Twin, super()).predict_proba(X)
        check_is_fitted(self)
        return self._map_rows(X, "predict_proba", np.float64, len(self.classes_))


class _DaskXGBClassifier(_DaskClassifier):
    _train = staticmethod(_train_xgboost)

    def _training_labels(self, y: Any, client: Any) -> Any:
        # XGBoost sees the labels encoded as 0..k-1, as the single-machine model does.
        labels = self._unique_labels(y, client)
        self._labels = labels
        return y.map_blocks(_encode, labels, dtype=np.int64)

    def _eval_labels(self, y: Any) -> Any:
        if not _is_dask(y):
            return cast(_Twin, super())._eval_labels(y)
        if hasattr(y, "to_dask_array"):
            y = y.to_dask_array()
        return y.map_blocks(_encode, self._labels, dtype=np.int64)


def _encode(y: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Index of every label of ``y`` in the sorted ``labels``; unseen labels are an error."""
    index = np.minimum(np.searchsorted(labels, y), labels.size - 1)
    if np.any(labels[index] != y):
        unseen = np.setdiff1d(y, labels)
        raise ValueError(f"labels {unseen[:5].tolist()} were not seen in y.")
    return index.astype(np.int64)


class _DaskXGBRegressor(_DaskModel):
    _train = staticmethod(_train_xgboost)


class _DaskLGBMClassifier(_DaskClassifier):
    _train = staticmethod(_train_lightgbm)

    def _check_classes(self, fitted: Any) -> None:
        # Each worker's LightGBM encodes the labels it holds; they agree only
        # if every worker holds every class.
        got = np.asarray(fitted.classes_)
        if got.shape != self._labels.shape or np.any(got != self._labels):
            raise ValueError(
                f"LightGBM's Dask training found the classes {got.tolist()[:10]} but y holds "
                f"{self._labels.tolist()[:10]}: every worker's partitions must contain every "
                "class. Shuffle or repartition the data."
            )

    def _check_workers(self, client: Any, Xt: Any, y: Any) -> None:
        # LightGBM trains on each worker's partitions where they lie (each part goes
        # where its rows are) and encodes the labels per worker; a worker without
        # some class makes the workers disagree on the number of classes, which
        # fails (after earlier fits: "Socket recv error") or hangs in its network.
        from distributed import futures_of

        rows = {f.key: f for f in futures_of(Xt)}
        labels = {f.key: f for f in futures_of(y)}
        xs = [rows[d.key] for d in Xt.to_delayed().ravel()]
        ys = [labels[d.key] for d in y.to_delayed().ravel()]
        holder = client.who_has(xs)
        found = client.gather(client.map(_classes_in, ys, pure=False))
        held: dict[str, set] = {}
        for x, classes in zip(xs, found, strict=True):
            if classes is not None:  # an empty partition adds no worker
                held.setdefault(min(holder[x.key]), set()).update(classes.tolist())
        everything = set(self._labels.tolist())
        for worker, classes in sorted(held.items()):
            missing = sorted(everything - classes)
            if missing:
                raise ValueError(
                    f"LightGBM's Dask training needs every class on every worker that holds "
                    f"rows, but the partitions on worker {worker} hold no rows of the classes "
                    f"{missing[:10]} (y holds {sorted(everything)[:10]}): every worker's "
                    "partitions must contain every class. Shuffle or repartition the data "
                    "so that each partition holds every class."
                )


def _classes_in(y: np.ndarray) -> np.ndarray | None:
    """The labels in one partition of ``y`` (None when it is empty)."""
    y = np.asarray(y)
    return np.unique(y) if y.size else None


#: Seconds a Dask estimator's training may take by default (``fit_timeout``).
FIT_TIMEOUT = 3600.0


def _within(timeout: float | None, client: Any, name: str, train: Any, *args: Any) -> Any:
    """``train(*args)``, or a TimeoutError after ``timeout`` seconds (None: no limit).

    The booster libraries' Dask training waits on its workers' tasks, which
    can wait on each other's sockets for ever (LightGBM's default socket
    time-out is two hours). On time-out, the training's tasks are cancelled,
    so the client is free again; a worker thread stuck in native code may
    keep its worker busy until its sockets time out, hence the advice to
    restart the workers.
    """
    import threading

    if timeout is None:
        return train(*args)
    before = set(client.futures)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["model"] = train(*args)
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, name=f"{name}.fit", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        from distributed import Future

        started: list[Future[Any]] = [Future(key, client) for key in set(client.futures) - before]
        client.cancel(started, force=True)
        thread.join(30)
        raise TimeoutError(
            f"{name}.fit: the Dask training did not finish within fit_timeout={timeout:g} s, "
            "so it was cancelled (the workers may be waiting on each other, for example when "
            "one lacks a class, or the data is larger than the time allows). Check the data's "
            "partitions, restart the workers (client.restart()) if they stay busy, and fit "
            "again with a larger fit_timeout if the training needs longer."
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome["model"]


class _DaskLGBMRegressor(_DaskModel):
    _train = staticmethod(_train_lightgbm)


#: Each Dask estimator: what it adds, and the single-machine estimator it extends.
_ESTIMATORS = {
    "HyperbolicDaskXGBClassifier": (_DaskXGBClassifier, "HyperbolicXGBClassifier"),
    "HyperbolicDaskXGBRegressor": (_DaskXGBRegressor, "HyperbolicXGBRegressor"),
    "HyperbolicDaskLGBMClassifier": (_DaskLGBMClassifier, "HyperbolicLGBMClassifier"),
    "HyperbolicDaskLGBMRegressor": (_DaskLGBMRegressor, "HyperbolicLGBMRegressor"),
}


def __getattr__(name: str) -> Any:
    """The Dask estimators, built on first use: each needs its booster library (the
    ``xgboost`` or ``lightgbm`` extra, named if missing), which scoring does not."""
    if name not in _ESTIMATORS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    adds, single = _ESTIMATORS[name]
    base = getattr(importlib.import_module("..estimators", __package__), single)
    cls = type(name, (adds, base), {"__doc__": base.__doc__, "__module__": __name__})
    cls.__qualname__ = name
    globals()[name] = cls  # built once; pickle finds it by name
    return cls


def __dir__() -> list[str]:
    return sorted([*globals(), *_ESTIMATORS])


# -- scoring exported graphs -------------------------------------------------------------


def _session(graph: Any, key: str, threads: int) -> Any:
    """The worker's session of the graph, or the compiled scorer's stand-in for one (its
    compiled trees loaded once per worker process, `hyp2onnx.export.compiled`)."""
    if isinstance(graph, bytes):
        return _scoring.session(key, graph, threads)
    return graph.as_session()


def _score_block(
    graph: Any,
    key: str,
    block: Any,
    threads: int,
    check: Any,
    spec: Any,
    bad_rows: str,
    where: dict,
) -> dict[str, np.ndarray]:
    session = _session(graph, key, threads)
    return _scoring.score(session, check.block_rows(block), check, spec, bad_rows, **where)


def _numeric_or_refuse(dtypes: dict[str, Any], what: str) -> None:
    """A TypeError naming the columns that do not hold numbers (before any task runs)."""
    from pandas.api.types import is_complex_dtype, is_numeric_dtype

    bad = {
        name: dtype
        for name, dtype in dtypes.items()
        if not is_numeric_dtype(dtype) or is_complex_dtype(dtype)
    }
    if bad:
        shown = ", ".join(f"{name} ({dtype})" for name, dtype in list(bad.items())[:5])
        raise TypeError(
            f"{what} must hold real numbers; not numeric: {shown}. Convert the point "
            "columns to floats (e.g. with astype(float) or dask.dataframe.to_numeric) first."
        )


def predict(
    graph: Any,
    data: Any,
    *,
    columns: Any = None,
    threads: int = 1,
    output_prefix: str = "",
    bad_rows: str = "error",
    check_manifold: bool = True,
    compiled: Any = None,
) -> Any:
    """Score dask points with an exported graph, one onnxruntime session per worker process.

    ``graph`` is an ONNX model exported by hyp2onnx (``onnx.ModelProto``,
    bytes, or a path). ``data`` is a dask array of points (n, D): the result
    is a dict of dask arrays keyed by the graph's outputs (``label`` and
    ``probabilities``, or ``variable``; a region tree's ``covered`` and
    ``region`` too). For a dask DataFrame, ``columns``
    names the point columns (default: all, in order) and the result is the
    DataFrame with the outputs appended as columns ``label`` and
    ``probability_<i>`` (one per class, in ``classes`` order of the graph's
    metadata) or ``variable`` (``variable_<j>`` for several targets), and
    any other output under its own name, each
    name preceded by ``output_prefix``. The graph is sent to each worker once;
    the session is cached there by the graph's hash. ``threads`` is the
    session's intra-op thread count (Dask already runs partitions in
    parallel). Compute the outputs together (``dask.compute(*out.values())``):
    each compute scores the partitions again.

    A composed graph (`hyp2onnx.compose`) takes its encoder's inputs: ``data``
    is a dict {input name: dask array} partitioned alike by rows (a single
    dask array for a one-input graph), or a dask DataFrame whose columns are
    named by ``columns`` = {input name: column or list of columns} (default:
    the input's name, ``<name>_<i>`` for the columns of a matrix input).

    Every partition is checked first, as ``hyp2onnx predict`` checks a file:
    points on the graph's manifold (its geometry or input blocks; skipped
    with ``check_manifold=False``), finite, representable in the graph's
    input type, valid categorical codes (see `hyp2onnx.distributed._scoring`);
    a composed graph's inputs each against its type (integers for ids, 0 or 1
    for bool inputs), and its rows are also bad where the graph fails on them
    or returns ``on_manifold`` false.
    Non-numeric point columns are refused at once (TypeError).
    ``bad_rows="error"`` (the default): computing the result raises
    `InvalidPointError` naming the bad rows by their
    global row numbers (the partition and its row where the partition sizes
    are unknown; a DataFrame's index labels too). ``bad_rows="null"``: those
    rows get NaN outputs (None for string labels; integer labels and bool
    outputs become float64 so they can hold NaN, and pandas' nullable
    ``Int64`` and ``boolean`` in a DataFrame), the others their answers.

    ``compiled``: the graph's model as a compiled scorer
    (``hyp2onnx.export.compiled.compile_model_lleaves``), which then scores the
    points in place of the graph, its compiled trees loaded once per worker.
    """
    dask = _dask()
    bad_rows = _scoring.check_bad_rows(bad_rows)
    blob, spec, check, key = _scoring.opened(
        graph, check_manifold=check_manifold, compiled=compiled
    )
    shipped = dask.delayed(blob if compiled is None else compiled, pure=True)
    if isinstance(data, dask.dataframe.DataFrame):
        return _predict_frame(
            data, spec, shipped, key, columns, threads, output_prefix, check, bad_rows
        )
    if columns is not None:
        raise ValueError("columns= is for dask DataFrames; pass the point columns as the array.")
    blocks, sizes = _blocks(data, check)
    score = dask.delayed(_score_block, pure=True)
    known = not any(np.isnan(sizes))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if known else None
    results = [
        score(
            shipped,
            key,
            block,
            threads,
            check,
            spec,
            bad_rows,
            {"first_row": int(starts[i])} if starts is not None else {"partition": i},
        )
        for i, block in enumerate(blocks)
    ]
    outputs = {}
    for name, dtype, width in spec.outputs:
        if bad_rows == "null":
            dtype = _scoring.null_dtype(dtype)
        pieces = [
            dask.array.from_delayed(
                dask.delayed(operator.getitem, pure=True)(result, name),
                shape=(n,) if width is None else (n, width),
                dtype=dtype,
            )
            for result, n in zip(results, sizes, strict=True)
        ]
        outputs[name] = dask.array.concatenate(pieces, axis=0)
    return outputs


def _blocks(data: Any, check: Any) -> tuple[list[Any], tuple]:
    """The row partitions of ``data`` as delayed blocks for ``check.block_rows``, and their
    sizes: blocks of points, or of a composed graph's inputs ({input name: block})."""
    dask = _dask()
    if not isinstance(check, _scoring.RowCheck):
        return _input_blocks(data, check)
    if isinstance(data, dask.array.Array):
        _numeric_or_refuse({"data": data.dtype}, "data")
    rows = _as_rows(data, "data")
    if rows.shape[1] != check.n_features:
        raise ValueError(f"data has {rows.shape[1]} columns; the graph takes {check.n_features}.")
    return list(rows.to_delayed().ravel()), rows.chunks[0]


def _input_blocks(data: Any, check: Any) -> tuple[list[dict[str, Any]], tuple]:
    """A composed graph's dask arrays by input name, partitioned alike by rows."""
    from collections.abc import Mapping

    array_type = _dask().array.Array
    specs = {s.name: s for s in check.inputs}
    listing = ", ".join(map(str, check.inputs))
    if not isinstance(data, Mapping):
        if len(specs) != 1 or not isinstance(data, array_type):
            raise TypeError(
                f"this graph has an encoder in front (hyp2onnx.compose) taking {listing}: pass "
                "a dict {input name: dask array} or a dask DataFrame."
            )
        data = {next(iter(specs)): data}
    if set(data) != set(specs):
        raise ValueError(f"the arrays given are named {sorted(data)}; the graph takes {listing}.")
    arrays: dict[str, Any] = {}
    for name, spec in specs.items():
        a = data[name]
        if not isinstance(a, array_type):
            raise TypeError(f"input {name!r} must be a dask array, got {type(a).__name__}.")
        if a.ndim != len(spec.dims or ()):
            raise ValueError(f"input {spec} has rank {len(spec.dims or ())}; got {a.ndim}-D.")
        _numeric_or_refuse({name: a.dtype}, f"input {name!r}")
        a = a.rechunk({axis: -1 for axis in range(1, a.ndim)}) if a.ndim > 1 else a
        first = next(iter(arrays.values()), a)
        if a.chunks[0] != first.chunks[0]:
            if np.isnan(a.shape[0]) or np.isnan(first.shape[0]) or a.shape[0] != first.shape[0]:
                raise ValueError(
                    f"input {name!r} has {a.shape[0]} rows in {a.numblocks[0]} partitions and "
                    f"{next(iter(arrays))!r} {first.shape[0]} in {first.numblocks[0]}: give "
                    "every input the same rows (known chunk sizes are aligned here)."
                )
            a = a.rechunk({0: first.chunks[0]})
        arrays[name] = a
    delayed = {name: a.to_delayed().reshape(-1) for name, a in arrays.items()}
    n = len(next(iter(delayed.values())))
    blocks = [{name: d[i] for name, d in delayed.items()} for i in range(n)]
    return blocks, next(iter(arrays.values())).chunks[0]


def _score_frame(
    graph: Any,
    key: str,
    part: Any,
    layout: Any,
    threads: int,
    names: dict,
    dtypes: dict,
    check: Any,
    spec: Any,
    bad_rows: str,
    partition: int,
) -> Any:
    session = _session(graph, key, threads)
    result = _scoring.score(
        session,
        check.frame_rows(part, layout),
        check,
        spec,
        bad_rows,
        partition=partition,
        index=part.index,
    )
    # Explicit dtypes: pandas would infer its string dtype for string labels.
    return part.assign(**_scoring.columns_of(result, names)).astype(dtypes)


#: pandas' nullable dtypes of integer and bool outputs that may hold nulls.
_NULLABLE = {"i": "Int64", "u": "Int64", "b": "boolean"}


def _predict_frame(data, spec, shipped, key, columns, threads, prefix, check, bad_rows):
    dask = _dask()
    layout = check.layout(list(data.columns), columns)
    names = spec.table_columns(list(data.columns), prefix)
    used = layout if isinstance(layout, list) else [c for cs in layout.values() for c in cs]
    what = "the point columns" if isinstance(layout, list) else "the input columns"
    _numeric_or_refuse({c: data._meta[c].dtype for c in used}, what)
    empty = spec.empty_columns(prefix)
    if bad_rows == "null":  # nulls: NaN in float columns, <NA> in integer and bool ones
        empty = {
            col: value if value.dtype.kind in "fO" else value.astype(_NULLABLE[value.dtype.kind])
            for col, value in ((c, _as_series(v)) for c, v in empty.items())
        }
    meta = data._meta.assign(**empty)
    dtypes = {col: meta[col].dtype for col in empty}
    score = dask.delayed(_score_frame, pure=True)
    parts = [
        score(shipped, key, part, layout, threads, names, dtypes, check, spec, bad_rows, i)
        for i, part in enumerate(data.to_delayed())
    ]
    return dask.dataframe.from_delayed(parts, meta=meta, divisions=data.divisions)


def _as_series(values: np.ndarray) -> Any:
    import pandas as pd

    return pd.Series(values)
