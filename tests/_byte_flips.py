"""Damaged CatBoost models, read as the library reads them, in a child process.

``python _byte_flips.py FOLDER KIND START`` reads ``FOLDER/flips.json`` (a list of
``[offset, hex bytes]`` written over the CatBoost model that the file
``FOLDER/model.KIND`` holds at ``FOLDER/at.json``'s offset; KIND is ``cbm``,
``pkl`` or ``skops``) and, from flip START on, writes each damaged file,
loads it the way its library does (CatBoost's ``load_model``, ``pickle``,
``skops.io.load``), exports it with hyp2onnx and compares the graph with
the library's own ``predict_proba`` on ``FOLDER/rows.npy`` (hyperboloid
points; ``klein.npy``, their Klein coordinates, for the ``.cbm`` file). One line per
flip goes to ``FOLDER/KIND.log``: ``start I`` before it, then
``I OUTCOME`` with OUTCOME one of ``library`` (the library refused the
file), ``refused`` (hyp2onnx refused it with one of its errors, the
message follows), ``agree``, ``disagree`` (the report follows) or ``bug``
(any other exception: the type and message follow). CatBoost crashes its
process on some damaged trees: the parent sees a ``start`` line without
its outcome and restarts the child after it.
"""

from __future__ import annotations

import json
import sys
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np


def damaged(folder: Path, kind: str, offset: int, data: bytes) -> Path:
    """The model file of ``kind`` with ``data`` written at ``offset`` of its CatBoost model."""
    at = json.loads((folder / "at.json").read_text())
    out = folder / f"damaged.{kind}"
    if kind == "skops":
        with (
            zipfile.ZipFile(folder / "model.skops") as source,
            zipfile.ZipFile(out, "w") as target,
        ):
            for item in source.infolist():
                blob = source.read(item.filename)
                if item.filename == at["member"]:
                    blob = blob[:offset] + data + blob[offset + len(data) :]
                target.writestr(item, blob)
        return out
    blob = (folder / f"model.{kind}").read_bytes()
    start = at[kind] + offset
    out.write_bytes(blob[:start] + data + blob[start + len(data) :])
    return out


def load(path: Path, kind: str) -> Any:
    """The model in ``path``, read by its own library."""
    if kind == "cbm":
        import catboost

        model = catboost.CatBoostClassifier()
        model.load_model(str(path))
        return model
    if kind == "skops":
        import skops.io as sio

        from hyp2onnx.cli._models import trusted_types

        return sio.load(path, trusted=trusted_types())
    import pickle

    with path.open("rb") as f:
        return pickle.load(f)


def outcome(folder: Path, kind: str, offset: int, data: bytes) -> str:
    """What reading, exporting and checking one damaged file gives (see the module doc)."""
    import hyp2onnx as h
    from hyp2onnx.errors import Hyp2OnnxError

    path = damaged(folder, kind, offset, data)
    rows = np.load(folder / ("klein.npy" if kind == "cbm" else "rows.npy"))
    try:
        model = load(path, kind)
        model.predict_proba(rows)  # the library's reading of every row
    except Exception:
        return "library"
    stated = {"input_geometry": "klein"} if kind == "cbm" else {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # exported with its own (Euclidean) thresholds
            onx = h.to_onnx(model, dtype="float64", **stated)
            report = h.verify(model, onx, rows)
    except Hyp2OnnxError as exc:
        return f"refused {type(exc).__name__}: {exc}"
    except Exception as exc:
        return f"bug {type(exc).__name__}: {exc}"
    return "agree" if report.ok else f"disagree {report}"


def main(folder: Path, kind: str, start: int) -> None:
    flips = json.loads((folder / "flips.json").read_text())
    with (folder / f"{kind}.log").open("a") as log:
        for i in range(start, len(flips)):
            log.write(f"start {i}\n")
            log.flush()
            offset, data = flips[i]
            result = outcome(folder, kind, offset, bytes.fromhex(data))
            log.write(f"{i} {result}".replace("\n", " ") + "\n")
            log.flush()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
