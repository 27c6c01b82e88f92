"""Read a ``.cbm`` file with CatBoost in a child process: ``python _catboost_probe.py FILE``.

CatBoost checks a ``.cbm`` file's trees only partly: with some bytes
flipped it loads the file and then crashes its process in the JSON export
or in ``predict``. `CatBoostBackend.check_file` runs this script as a file
(it imports CatBoost, not hyp2onnx) to load the file and make the native
calls hyp2onnx makes later (`exercise`: the JSON export and the leaf values
that export reads, and raw predictions on rows on and one float32 step
above every border, as ``convert --check`` makes); ``exercise`` is also
run on the CatBoost models found in pickles and ``.skops`` files
(`CatBoostBackend.exercise`, from the command line's child).

Exit status 0: nothing failed; 3: CatBoost refused the file or a call
failed (the reason on stderr after ``Error: ``); a crash shows as a signal,
in this process only.
"""

import json
import os
import resource
import sys
import tempfile
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


def main(path: str) -> int:
    """Load the ``.cbm`` file ``path`` and exercise its model: the exit status."""
    import catboost

    model = catboost.CatBoost()
    try:
        model.load_model(path)
        exercise(model)
    except Exception as exc:  # refused: the parent says why
        text = str(exc).strip()
        sys.stderr.write(f"Error: {text.splitlines()[0] if text else type(exc).__name__}\n")
        return 3
    return 0


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash here is expected: no core file
    sys.exit(main(sys.argv[1]))
