"""The registries and lazy imports that keep backends and encodings in one place each.

Each check runs a fresh interpreter, so what it imports is what the command or
statement imports, not what earlier tests loaded.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import hyp2onnx as h
from hyp2onnx.emit import ENCODINGS
from hyp2onnx.estimators import BACKENDS
from hyp2onnx.verification import default_tolerance

HEAVY = ("sklearn", "xgboost", "lightgbm", "catboost", "skl2onnx", "onnxmltools")


def _imported_after(code: str) -> set[str]:
    """Top-level packages of HEAVY that ``code`` leaves imported, in a fresh interpreter."""
    probe = code + f"\nimport sys; print('loaded:', *(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.splitlines()[-1].split()[1:])


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from hyp2onnx.datasets import make_wrapped_normal_mixture

    folder = tmp_path_factory.mktemp("layout")
    X, y = make_wrapped_normal_mixture(200, 3, 3, random_state=0)
    model = h.HyperbolicDecisionTreeClassifier(max_depth=3).fit(X, y)
    h.save_onnx(model, folder / "tree.onnx")
    np.save(folder / "X.npy", X)
    return folder / "tree.onnx", folder / "X.npy"


def test_import_hyp2onnx_loads_no_tree_library() -> None:
    assert _imported_after("import hyp2onnx") == set()


@pytest.mark.parametrize("argv", [["--help"], ["inspect", "{onnx}"], ["predict", "{onnx}", "{X}"]])
def test_scoring_commands_load_no_tree_library(graph: tuple[Path, Path], argv: list[str]) -> None:
    onnx_file, X = graph
    args = [a.format(onnx=onnx_file, X=X) for a in argv]
    code = f"from hyp2onnx.cli import main\nassert main({args!r}) == 0"
    assert _imported_after(code) == set()


def test_a_backend_imports_only_its_library() -> None:
    assert _imported_after("import hyp2onnx; hyp2onnx.HyperbolicXGBRegressor") == {
        "sklearn",
        "xgboost",
    }


def test_missing_library_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['lightgbm'] = None\n"
        "import hyp2onnx\n"
        "try:\n"
        "    hyp2onnx.HyperbolicLGBMClassifier\n"
        "except hyp2onnx.MissingExtraError as exc:\n"
        "    print(exc)\n"
        "print(hyp2onnx.HyperbolicDecisionTreeClassifier.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        "HyperbolicLGBMClassifier needs the lightgbm package, which is not installed: "
        "pip install 'hyp2onnx[lightgbm]'",
        "HyperbolicDecisionTreeClassifier",
    ]


def test_every_registered_estimator_is_public() -> None:
    for spec in BACKENDS:
        for name in spec.estimators:
            assert name in h.__all__
            assert getattr(h, name).__name__ == name
            assert type(getattr(h, name)()).__module__ == f"hyp2onnx.estimators{spec.module}"


def test_cli_lists_come_from_the_registries() -> None:
    from hyp2onnx.cli import convert
    from hyp2onnx.cli._models import model_formats

    for spec in BACKENDS:
        for suffix in spec.formats:
            assert model_formats()[suffix] == spec.library
    option = next(p for p in convert.command.params if p.name == "encoding")
    assert list(option.type.choices) == list(ENCODINGS)


@pytest.mark.parametrize(
    ("encoding", "sum_dtype", "post_transform", "atol"),
    [
        # fast: the ordered encoding's tolerance plus the bound its metadata records (1e-13 here)
        ("fast", "float64", "identity", 1e-13),
        ("fast", "float64", "softmax", 1e-15 + 1e-13),
        ("fast", "float32", "logistic", 1e-6 + 1e-13),
        ("exact", "float64", "identity", 0.0),
        ("standard", "float64", "identity", 0.0),
        ("exact", "float64", "softmax", 1e-15),
        ("exact", "float64", "logistic", 1e-15),
        ("exact", "float32", "identity", 1e-6),
        ("standard", "float32", "softmax", 1e-6),
        ("compat", "float64", "identity", 1e-5),
    ],
)
def test_tolerance_follows_from_the_description(
    encoding: str, sum_dtype: str, post_transform: str, atol: float
) -> None:
    # The backend's name plays no part.
    meta = {"encoding": encoding, "sum_dtype": sum_dtype, "post_transform": post_transform}
    if encoding == "fast":
        meta["value_bound"] = 1e-13
    assert default_tolerance({**meta, "backend": "anything"}) == atol


def test_tolerance_of_a_fast_graph_without_its_bound_is_refused() -> None:
    meta = {"encoding": "fast", "sum_dtype": "float64", "post_transform": "identity"}
    with pytest.raises(ValueError, match="lacks value_bound"):
        default_tolerance(meta)


def test_tolerance_of_a_graph_without_the_description_is_refused() -> None:
    with pytest.raises(ValueError, match="re-export it, or pass atol"):
        default_tolerance({"encoding": "exact", "backend": "sklearn"})


def test_cli_names_the_extra_for_a_native_model_file(tmp_path: Path) -> None:
    (tmp_path / "model.cbm").write_bytes(b"\0")
    code = (
        "import sys; sys.modules['catboost'] = None\n"
        "from hyp2onnx.cli import main\n"
        f"sys.exit(main(['convert', {str(tmp_path / 'model.cbm')!r}, '--geometry', 'klein']))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 2
    assert "reading .cbm files needs the catboost package" in out.stderr
    assert "pip install 'hyp2onnx[catboost]'" in out.stderr
    assert not (tmp_path / "model.onnx").exists()


def test_every_encoding_has_its_tree_emitter() -> None:
    """The registry (names, help) and the emitters (functions) list the same encodings."""
    from hyp2onnx.emit.strategy import TREE_EMITTERS

    assert list(TREE_EMITTERS) == list(ENCODINGS)
    assert all(callable(emit) for emit in TREE_EMITTERS.values())


def test_no_function_of_export_or_emit_is_over_60_lines() -> None:
    """Long functions that branch on flags are where the export side got hard to read:
    each kind of graph gets its own function instead (docstrings count)."""
    package = Path(h.__file__).parent
    long = []
    for folder in ("export", "emit"):
        for path in sorted((package / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                    if lines > 60:
                        long.append(f"{folder}/{path.name}:{node.lineno} {node.name} ({lines})")
    assert not long, long


def _code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines, less its docstring's."""
    lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
    first = node.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        lines -= first.end_lineno - first.lineno + 1  # type: ignore[operator]
    return lines


def long_functions(package: Path, limit: int = 60) -> list[str]:
    """Functions of ``package`` whose code (docstrings aside) runs over ``limit`` lines."""
    long = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if _code_lines(node) > limit:
                    name = path.relative_to(package)
                    long.append(f"{name}:{node.lineno} {node.name} ({_code_lines(node)})")
    return long


def test_no_function_of_the_package_has_over_60_lines_of_code() -> None:
    """The 60-line rule over the whole package. Public functions carry numpydoc
    docstrings of their own length, so here only code counts; `export/` and `emit/`
    keep the stricter rule above."""
    assert not long_functions(Path(h.__file__).parent)


def test_the_length_rule_sees_a_long_function(tmp_path: Path) -> None:
    """The rule counts a function's code and not its docstring."""
    body = "\n".join(f"    x{i} = {i}" for i in range(60))  # and the def line: 61
    doc = "\n".join(['    """Doc.'] + ["    line"] * 70 + ['    """'])
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n")
    (tmp_path / "documented.py").write_text(f"def short():\n{doc}\n    return 1\n")
    assert long_functions(tmp_path) == ["long.py:1 long (61)"]


#: A measured figure: a share, a ratio, a time or a size written with its number.
_FIGURE = re.compile(r"\d+(\.\d+)?\s?(%|x\b|µs|us\b|ms\b|MB\b|GB\b)")


def figures_in_docstrings(package: Path) -> list[str]:
    """Docstring lines of ``package`` that state a measured figure."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(
                node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
            ):
                continue
            for line in (ast.get_docstring(node) or "").splitlines():
                if _FIGURE.search(line):
                    found.append(
                        f"{path.relative_to(package)} {getattr(node, 'name', '')}: {line.strip()}"
                    )
    return found


def test_no_docstring_states_a_measured_figure() -> None:
    """Figures go stale in docstrings, where nothing reruns them: a docstring names the
    docs page or results file that holds the measurement instead."""
    assert not figures_in_docstrings(Path(h.__file__).parent)


def test_the_figure_rule_sees_a_figure(tmp_path: Path) -> None:
    """The rule finds a share, a ratio and a time, and lets a rule's own numbers pass."""
    (tmp_path / "m.py").write_text(
        '"""Cheaper (5% of the graph)."""\n'
        'def f():\n    """1.3x the peer\'s, 40 µs a row."""\n'
        'def g():\n    """Stopped after 60 s and 10 s per MB; depth 8, d = 16."""\n'
    )
    assert [line.split(":")[0] for line in figures_in_docstrings(tmp_path)] == ["m.py ", "m.py f"]


def _names_a_kind(side: ast.expr, names: set[str]) -> bool:
    """``side`` is a kind's name, or a tuple, list or set of them (``kind in (...)``)."""
    if isinstance(side, (ast.Tuple, ast.List, ast.Set)):
        return bool(side.elts) and all(_names_a_kind(e, names) for e in side.elts)
    return isinstance(side, ast.Constant) and side.value in names


def kind_tests(package: Path) -> list[str]:
    """Places outside ``export/_kinds.py`` that test which kind a model is: a call of
    ``kind_of`` or a comparison with a kind's name."""
    names = {"hyperbolic", "plain", "hyperdt", "network"}
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).as_posix() in ("export/_kinds.py", "export/__init__.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            called = isinstance(node, ast.Call) and getattr(node.func, "id", None) == "kind_of"
            compared = (
                isinstance(node, ast.Compare)
                and any(
                    _names_a_kind(right, names)
                    if isinstance(op, (ast.In, ast.NotIn))  # kind in ("a", "b")
                    else _names_a_kind(left, names) or _names_a_kind(right, names)
                    for op, left, right in zip(
                        node.ops, [node.left, *node.comparators[:-1]], node.comparators, strict=True
                    )
                )
            )
            if called or compared:
                found.append(f"{path.relative_to(package)}:{node.lineno}")
    return sorted(found)


def test_callers_reach_a_model_through_its_kind(tmp_path: Path) -> None:
    """`to_onnx`, `verify` and the CLI ask the model's kind (`kind_for`) for its graph, its
    geometry rule, its checks and its outputs; none tests which kind it is. Planted: a
    caller comparing ``kind_of(model)`` with a kind's name is found."""
    assert kind_tests(Path(h.__file__).parent) == []
    (tmp_path / "caller.py").write_text(
        'if kind_of(model) == "plain":\n    pass\n'
        'hyperbolic = kind in ("hyperbolic", "network")\n'
        'if "network" not in state:\n    pass\n'  # a key of a dict: not a kind's name
    )
    assert kind_tests(tmp_path) == ["caller.py:1", "caller.py:1", "caller.py:3"]


def test_every_model_kind_answers_as_its_graph(tmp_path: Path) -> None:
    """One model of each kind goes through the door: `kind_for` names its kind, `to_onnx`
    builds its graph and `verify` compares the kind's Python outputs with the graph's."""
    from sklearn.tree import DecisionTreeClassifier

    HyperDTTree = pytest.importorskip("hyperdt.tree").HyperbolicDecisionTreeClassifier

    from hyp2onnx.datasets import make_wrapped_normal_mixture
    from hyp2onnx.export import MODEL_KINDS, kind_for
    from hyp2onnx.geometry import to_klein

    X, y = make_wrapped_normal_mixture(300, 2, 3, random_state=0)
    models = {
        "network": h.HyperbolicMLPClassifier(hidden_layer_sizes=(4,), max_iter=50).fit(X, y),
        "hyperdt": HyperDTTree(max_depth=3).fit(X, y),
        "hyperbolic": h.HyperbolicDecisionTreeClassifier(max_depth=3).fit(X, y),
        "plain": DecisionTreeClassifier(max_depth=3).fit(to_klein(X, "hyperboloid"), y),
    }
    assert [kind.name for kind in MODEL_KINDS] == list(models)
    for name, model in models.items():
        assert kind_for(model).name == name
        stated = {"input_geometry": "hyperboloid"} if name == "plain" else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a plain model's "its own thresholds"; convergence
            graph = h.to_onnx(model, dtype="float64", **stated)
        assert h.verify(model, graph, X).ok, name
