"""Read a model file in a child process first: ``python _model_probe.py cbm|pickle|skops FILE``.

CatBoost checks a ``.cbm`` file's trees only partly: with some bytes
flipped it loads the file and then crashes its process in the JSON export
or in ``predict``. This script, run in a child, loads the file (a ``.cbm``
with CatBoost; a pickle with joblib, a ``.skops`` file with skops and
hyp2onnx's trusted types: both also hand XGBoost and LightGBM models to
their libraries) and makes, for every CatBoost model found, the native
calls hyp2onnx makes later: the JSON export and leaf values that export
reads, and raw predictions on rows on and one float32 step above every
border, as ``convert --check`` makes.

Exit status 0: nothing failed (or the pickle itself could not be read,
which the parent reports itself); 3: a CatBoost model in it is damaged
(the reason on stderr after ``Error: ``); a crash shows as a signal, in
this process only.
"""

import json
import os
import resource
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

#: Rows times features predicted on at most, so a damaged feature count costs no memory.
_MAX_CELLS = 4_000_000


def exercise(model: Any) -> None:
    """Make the native calls hyp2onnx makes on a CatBoost ``model``; raise if one fails."""
    import numpy as np

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.json")
        model.save_model(path, format="json")
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
    model.get_leaf_values()
    floats = spec["features_info"].get("float_features", [])
    n = max((int(f["flat_feature_index"]) + 1 for f in floats), default=0)
    if n == 0:
        return
    rows = [np.zeros(n, dtype=np.float32)]
    for feature in floats:
        for border in np.asarray(feature["borders"], dtype=np.float32):
            for value in (border, np.nextafter(border, np.float32(np.inf))):
                row = np.zeros(n, dtype=np.float32)
                row[int(feature["flat_feature_index"])] = value
                rows.append(row)
                if len(rows) * n >= _MAX_CELLS:
                    break
    model.predict(np.stack(rows), prediction_type="RawFormulaVal")


def _catboost_models(obj: Any, depth: int = 0) -> Iterator[Any]:
    """Every CatBoost model reachable from ``obj`` through attributes, lists and dicts."""
    catboost = sys.modules.get("catboost")
    if catboost is None:  # unpickling imported no CatBoost: the pickle holds none
        return
    if isinstance(obj, catboost.CatBoost):
        yield obj
        return
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
        yield from _catboost_models(item, depth + 1)


def main(kind: str, path: str) -> int:
    """Load ``path`` as ``kind`` and exercise its CatBoost models: the exit status."""
    if kind == "cbm":
        import catboost

        model = catboost.CatBoost()
        try:
            model.load_model(path)
        except Exception as exc:  # refused: the parent reads it again and says why
            sys.stderr.write(f"Error: {_first_line(exc)}\n")
            return 3
        models = [model]
    else:
        try:
            loaded = _load(kind, path)
        except Exception:  # not readable: the parent's own load reports it
            return 0
        models = list(_catboost_models(loaded))
    for model in models:
        try:
            exercise(model)
        except Exception as exc:
            sys.stderr.write(f"Error: {_first_line(exc)}\n")
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash here is expected: no core file
    sys.exit(main(sys.argv[1], sys.argv[2]))
