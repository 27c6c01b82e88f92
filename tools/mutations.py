"""Plant known mistakes in a copy of the repository and show which tests catch each.

Every mutation below is a slip the exactness claims must not survive: a
threshold rounded the wrong way, the arithmetic midpoint for the Einstein
one, a backend's comparison flipped, the Poincare division by R dropped,
the compat operator's comparison swapped, the pairwise sum of squares
reordered. For each, the repository's tracked files are copied to a
temporary folder, one edit is made (its text must occur exactly once, so
a refactor that moves the code makes the script fail loudly rather than
test nothing), the listed tests run there, and the failing tests are
printed. A mutation no test catches is a gap; the script exits 1 then.

    python tools/mutations.py                 # all mutations, ~5 minutes on 2 cores
    python tools/mutations.py --only arithmetic_midpoint
    python tools/mutations.py --out benchmarks/results/mutations.md
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORACLE = "tests/test_oracle.py"


@dataclass(frozen=True)
class Mutation:
    name: str
    what: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]  # pytest node ids or files, run in the copy
    #: Tests that must be among the failures (a mutation is "caught" only then).
    must_fail: tuple[str, ...] = ()


MUTATIONS = [
    Mutation(
        "rounding_le_up",
        "exact/compat: float64 '<=' thresholds rounded to float32 toward +inf (not -inf)",
        "hyp2onnx/ir/trees.py",
        'return round_threshold(t, dtype, "down" if op == "<=" else "up").astype(dtype)',
        'return round_threshold(t, dtype, "up").astype(dtype)',
        (f"{ORACLE}::test_parity_on_probe_rows", "tests/test_export_property.py"),
        ("tests/test_export_property.py",),
    ),
    Mutation(
        "rounding_lt_down",
        "XGBoost: corrected '<' thresholds rounded to float32 toward -inf (not +inf)",
        "hyp2onnx/correction/midpoints.py",
        'return np.minimum(round_threshold(m, threshold_dtype, "up"), R)',
        'return np.minimum(round_threshold(m, threshold_dtype, "down"), R)',
        (ORACLE, "tests/test_xgboost.py"),
        (f"{ORACLE}::test_thresholds_are_einstein_midpoints_of_library_routed_neighbours[xgb_",),
    ),
    Mutation(
        "arithmetic_midpoint",
        "the Einstein midpoint replaced by the arithmetic one (every backend)",
        "hyp2onnx/geometry.py",
        "m = (ga * a + gb * b) / (ga + gb)",
        "m = a / 2.0 + b / 2.0",
        (f"{ORACLE}::test_thresholds_are_einstein_midpoints_of_library_routed_neighbours",),
        tuple(
            f"{ORACLE}::test_thresholds_are_einstein_midpoints_of_library_routed_neighbours[{b}_"
            for b in ("tree", "forest", "extra", "xgb", "lgbm", "hhcart")
        ),
    ),
    Mutation(
        "sklearn_lt",
        "scikit-learn's comparison taken as '<' (it is '<=')",
        "hyp2onnx/estimators/_sklearn.py",
        '    op = "<="',
        '    op = "<"',
        (ORACLE,),
    ),
    Mutation(
        "xgboost_le",
        "XGBoost's comparison taken as '<=' (it is '<')",
        "hyp2onnx/estimators/_xgboost.py",
        '    op = "<"',
        '    op = "<="',
        (ORACLE,),
    ),
    Mutation(
        "lightgbm_lt",
        "LightGBM's comparison taken as '<' (it is '<=')",
        "hyp2onnx/estimators/_lightgbm.py",
        '    op = "<="',
        '    op = "<"',
        (ORACLE,),
    ),
    Mutation(
        "poincare_no_R",
        "graph: Poincare input not divided by R before the Klein map",
        "hyp2onnx/emit/projection.py",
        'q = x if R == 1.0 else g.op(STAGE, "Div", [x, g.const(STAGE, "R", R, dtype)])',
        "q = x",
        (f"{ORACLE}::test_projection_is_bit_identical", "tests/test_export.py"),
    ),
    Mutation(
        "compat_operator_swapped",
        "compat/legacy operator: BRANCH_LEQ and BRANCH_LT swapped",
        "hyp2onnx/emit/trees.py",
        '_LEGACY_MODES = {"<=": "BRANCH_LEQ", "<": "BRANCH_LT"}',
        '_LEGACY_MODES = {"<=": "BRANCH_LT", "<": "BRANCH_LEQ"}',
        (f"{ORACLE}::test_parity_on_probe_rows",),
    ),
    Mutation(
        "pairwise_sum_reordered",
        "graph: sum of squares added left to right instead of pairwise",
        "hyp2onnx/emit/projection.py",
        """    while padded > 1:
        halves = {"num_outputs": 2} if g.opset >= 18 else {}
        first, second = g.op(STAGE, "Split", [s], n_outputs=2, axis=1, **halves)
        s = g.op(STAGE, "Add", [first, second])
        padded //= 2
    return s""",
        """    count = {"num_outputs": padded} if g.opset >= 18 else {}
    parts = g.op(STAGE, "Split", [s], n_outputs=padded, axis=1, **count) if padded > 1 else [s]
    s = parts[0]
    for part in parts[1:]:
        s = g.op(STAGE, "Add", [s, part])
    return s""",
        (f"{ORACLE}::test_projection_is_bit_identical", "tests/test_export.py"),
    ),
]


def copy_repository(destination: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for name in files:
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def plant(copy: Path, mutation: Mutation) -> None:
    path = copy / mutation.path
    text = path.read_text()
    count = text.count(mutation.old)
    if count != 1:
        raise SystemExit(
            f"{mutation.name}: the text to mutate occurs {count} times in {mutation.path} "
            "(the code moved?); update tools/mutations.py."
        )
    path.write_text(text.replace(mutation.old, mutation.new))


def run_tests(copy: Path, tests: tuple[str, ...]) -> tuple[list[str], str]:
    env = dict(os.environ, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rf",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-W",
            "ignore",
            *tests,
        ],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
    )
    # Parametrized ids may hold spaces: the id runs to the " - message" (if any).
    failed = sorted(set(re.findall(r"^FAILED (.+?)(?: - .*)?$", proc.stdout, flags=re.M)))
    return failed, proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr


def check_copy_is_imported(copy: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(copy))
    where = subprocess.run(
        [sys.executable, "-c", "import hyp2onnx; print(hyp2onnx.__file__)"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(where).resolve().is_relative_to(copy.resolve()):
        raise SystemExit(f"the copy's tests would import hyp2onnx from {where}, not the copy")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="mutation names to run")
    parser.add_argument("--out", type=Path, help="also write the table as Markdown here")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    rows, missed = [], []
    for mutation in chosen:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="hyp2onnx-mutant-") as tmp:
            copy = Path(tmp)
            copy_repository(copy)
            check_copy_is_imported(copy)
            plant(copy, mutation)
            failed, summary = run_tests(copy, mutation.tests)
        absent = [p for p in mutation.must_fail if not any(f.startswith(p) for f in failed)]
        caught = bool(failed) and not absent
        if not caught:
            missed.append(mutation.name)
        seconds = time.perf_counter() - start
        print(
            f"{mutation.name}: {'CAUGHT' if caught else 'MISSED'} by {len(failed)} test(s) "
            f"in {seconds:.0f} s ({summary})"
        )
        for name in failed[:12]:
            print(f"    {name}")
        if len(failed) > 12:
            print(f"    ... and {len(failed) - 12} more")
        for prefix in absent:
            print(f"    expected a failure in {prefix}*")
        rows.append((mutation, failed, caught))
    if args.out:
        lines = [
            "# Planted mutations and the tests that catch them",
            "",
            "Written by `tools/mutations.py`: each mutation is planted in a temporary copy",
            "of the repository and the listed tests run there.",
            "",
            "| mutation | what | file | caught | failing tests |",
            "|---|---|---|---|---|",
        ]
        for mutation, failed, caught in rows:
            shown = ", ".join(f"`{f.split('::', 1)[-1]}`" for f in failed[:6])
            more = f" and {len(failed) - 6} more" if len(failed) > 6 else ""
            lines.append(
                f"| `{mutation.name}` | {mutation.what} | `{mutation.path}` | "
                f"{'yes' if caught else '**no**'} | {len(failed)}: {shown}{more} |"
            )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")
    if missed:
        print(f"not caught: {', '.join(missed)}")
        return 1
    print(f"all {len(rows)} mutations caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())
