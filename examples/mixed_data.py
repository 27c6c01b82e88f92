"""Mixed input in one model: a hyperbolic embedding, a numeric column and a categorical one.

Run: ``python examples/mixed_data.py``. A synthetic product catalogue
(no real mixed data set ships with the package, so the data are drawn to
look like one): every product has

* the hyperboloid coordinates (3 columns) of its category in a catalogue
  tree of 3 levels and 4 branches, embedded in the hyperbolic plane (each
  level one unit of distance farther out, siblings spread by angle) with a
  little noise;
* a price (one plain numeric column);
* a brand, as an integer code 0..11 (one categorical column).

Whether a product is returned depends on its department (the top of the
tree), on the price relative to 60, and on three "bad" brands. The script

1. trains ``HyperbolicLGBMClassifier(input_blocks=[Hyperbolic(2), Euclidean(1),
   Categorical(1)])``: Klein coordinates with Einstein midpoints for the
   embedding, the price as it is, native set-membership splits on brands;
2. saves it with skops and exports it with ``hyp2onnx convert model.skops
   --check test.csv`` (which verifies the graph on the test rows);
3. scores the test rows with ``hyp2onnx predict model.onnx test.csv`` and
   compares the CSV with the model's own predictions.

It exits with status 1 if the graph and the model disagree on any row.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import skops.io as sio

from hyp2onnx import HyperbolicLGBMClassifier
from hyp2onnx.blocks import Categorical, Euclidean, Hyperbolic
from hyp2onnx.geometry import from_klein

BLOCKS = [Hyperbolic(2), Euclidean(1), Categorical(1)]
BAD_BRANDS = (3, 7, 10)


def make_catalogue(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows (x_0, x_1, x_2, price, brand) and whether each product was returned."""
    rng = np.random.default_rng(seed)
    path = rng.integers(0, 4, size=(n, 3))  # the category: a branch per level
    # Angle of the category: each level splits its parent's arc in four.
    angle = (path[:, 0] + (path[:, 1] + (path[:, 2] + 0.5) / 4) / 4) * (np.pi / 2)
    distance = 3.0 + rng.normal(scale=0.15, size=n)  # three levels, one unit each
    angle += rng.normal(scale=0.02, size=n)
    klein = np.tanh(distance)[:, None] * np.column_stack([np.cos(angle), np.sin(angle)])
    price = np.round(rng.lognormal(mean=4.0, sigma=0.5, size=n), 2)
    brand = rng.integers(0, 12, size=n)
    returned = ((path[:, 0] == 1) ^ (price > 60)) | np.isin(brand, BAD_BRANDS)
    flip = rng.uniform(size=n) < 0.03  # some noise
    X = np.column_stack([from_klein(klein, "hyperboloid"), price, brand])
    return X, (returned ^ flip).astype(int)


def hyp2onnx_command() -> list[str]:
    """The installed ``hyp2onnx`` script beside this Python, else ``python -m hyp2onnx.cli``."""
    script = Path(sys.executable).with_name("hyp2onnx")
    found = str(script) if script.exists() else shutil.which("hyp2onnx")
    return [found] if found else [sys.executable, "-m", "hyp2onnx.cli"]


def run(args: list[str]) -> None:
    done = subprocess.run([*hyp2onnx_command(), *args], capture_output=True, text=True)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"hyp2onnx {args[0]} failed with exit status {done.returncode}")


def main() -> int:
    X_train, y_train = make_catalogue(4000, seed=0)
    X_test, y_test = make_catalogue(1000, seed=1)
    model = HyperbolicLGBMClassifier(
        input_blocks=BLOCKS, n_estimators=60, num_leaves=15, n_jobs=1, random_state=0, verbose=-1
    ).fit(X_train, y_train)
    accuracy = float(np.mean(model.predict(X_test) == y_test))

    folder = Path(tempfile.mkdtemp(prefix="hyp2onnx-mixed-"))
    model_file, test_file = folder / "model.skops", folder / "test.csv"
    onnx_file, predictions = folder / "model.onnx", folder / "predictions.csv"
    sio.dump(model, model_file)
    header = "x0,x1,x2,price,brand"
    np.savetxt(test_file, X_test, delimiter=",", header=header, comments="", fmt="%.17g")
    run(["convert", str(model_file), "--dtype", "float64", "--check", str(test_file)])
    run(["predict", str(onnx_file), str(test_file), "-o", str(predictions)])

    scored = np.genfromtxt(predictions, delimiter=",", names=True)
    agreement = float(np.mean(scored["label"] == model.predict(X_test)))
    print(f"accuracy on held-out products:     {accuracy:.3f}")
    print(f"label agreement CLI graph/Python:  {agreement:.2%}")
    print(f"wrote {onnx_file} and {predictions}")
    if agreement < 1.0:
        print("the ONNX graph disagrees with the model", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
