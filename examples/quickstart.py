"""Train a hyperbolic random forest, export it with the command line and check the graph.

Run: ``python examples/quickstart.py``. It

1. draws seeded points in the hyperboloid model of the hyperbolic plane,
   labelled by quadrant (geodesic half-planes), with a central disc as a fifth class;
2. trains a `hyp2onnx.HyperbolicRandomForestClassifier`;
3. exports it with ``hyp2onnx convert model.pkl --check test.npy`` into a
   new temporary folder;
4. runs the graph in onnxruntime and compares it with the model through
   `hyp2onnx.verify`.

It prints the accuracy, the agreement and the file written, and exits with
status 1 if the graph and the model disagree on any point.
"""

from __future__ import annotations

import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort

from hyp2onnx import HyperbolicRandomForestClassifier, verify
from hyp2onnx.geometry import from_klein


def make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Hyperboloid points of the hyperbolic plane (3 columns) and labels 0..4."""
    rng = np.random.default_rng(seed)
    angle = rng.uniform(-np.pi, np.pi, n)
    distance = rng.uniform(0.0, 4.0, n)  # hyperbolic distance from the origin
    radius = np.tanh(distance)  # Klein radius of that distance
    klein = np.column_stack([radius * np.cos(angle), radius * np.sin(angle)])
    quadrant = (klein[:, 0] > 0).astype(int) + 2 * (klein[:, 1] > 0)  # geodesic half-planes
    labels = np.where(distance < 0.5, 4, quadrant)  # a disc around the origin: a fifth class
    return from_klein(klein, "hyperboloid"), labels


def hyp2onnx_command() -> list[str]:
    """The installed ``hyp2onnx`` script beside this Python, else ``python -m hyp2onnx.cli``."""
    script = Path(sys.executable).with_name("hyp2onnx")
    found = str(script) if script.exists() else shutil.which("hyp2onnx")
    return [found] if found else [sys.executable, "-m", "hyp2onnx.cli"]


def main() -> int:
    X_train, y_train = make_data(2000, seed=0)
    X_test, y_test = make_data(500, seed=1)
    model = HyperbolicRandomForestClassifier(n_estimators=20, max_depth=8, random_state=0)
    model.fit(X_train, y_train)
    accuracy = float(np.mean(model.predict(X_test) == y_test))

    folder = Path(tempfile.mkdtemp(prefix="hyp2onnx-quickstart-"))
    model_file, test_file = folder / "model.pkl", folder / "test.npy"
    onnx_file = folder / "model.onnx"  # convert's default name
    with model_file.open("wb") as f:
        pickle.dump(model, f)
    np.save(test_file, X_test)
    convert = [*hyp2onnx_command(), "convert", str(model_file), "--check", str(test_file)]
    done = subprocess.run(convert, capture_output=True, text=True)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        print(f"hyp2onnx convert failed with exit status {done.returncode}", file=sys.stderr)
        return 1

    session = ort.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    onnx_labels = session.run(["label"], {"X": X_test.astype(np.float32)})[0]
    python_labels = model.predict(X_test.astype(np.float32))
    agreement = float(np.mean(onnx_labels == python_labels))
    report = verify(model, onnx_file, X_test)

    print(f"accuracy on held-out points: {accuracy:.3f}")
    print(f"ONNX accuracy:               {float(np.mean(onnx_labels == y_test)):.3f}")
    print(f"label agreement ONNX/Python: {agreement:.2%}")
    print(f"verify: {report}")
    print(f"wrote {onnx_file}")
    if agreement < 1.0 or not report.ok:
        print("the ONNX graph disagrees with the model", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
