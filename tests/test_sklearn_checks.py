"""scikit-learn's own estimator checks, run on every hyperbolic estimator.

scikit-learn's generic test data is random Euclidean data, not points on a
hyperboloid, so the checks run with ``input_geometry="klein"`` (or input
blocks holding such columns, or plain Euclidean ones) and
``curvature=-1e-6``: the Klein ball then has radius ``R = 1/sqrt(1e-6) =
1000`` and holds every array the checks generate (their values stay well
below 1000 in norm). The hyperboloid and Poincare inputs, which random data
cannot satisfy, are covered by the tests in ``test_estimators.py``.
"""

from __future__ import annotations

from typing import Any

from sklearn.ensemble import ExtraTreesClassifier, ExtraTreesRegressor
from sklearn.tree import DecisionTreeRegressor
from sklearn.utils.estimator_checks import parametrize_with_checks

from hyp2onnx import (
    HyperbolicDecisionTreeClassifier,
    HyperbolicDecisionTreeRegressor,
    HyperbolicEstimator,
    HyperbolicLGBMRegressor,
    HyperbolicMLPClassifier,
    HyperbolicMLPRegressor,
    HyperbolicRandomForestClassifier,
    HyperbolicRandomForestRegressor,
    HyperbolicXGBClassifier,
)
from hyp2onnx.blocks import Euclidean, Hyperbolic

BALL = {"input_geometry": "klein", "curvature": -1e-6}
#: The same through input blocks: a last block without dims takes every column the checks
#: generate (a Klein ball of radius 1000, plain Euclidean columns, a signature pair).
BALL_BLOCK = [Hyperbolic(model="klein", curvature=-1e-6)]

ESTIMATORS = [
    HyperbolicDecisionTreeClassifier(**BALL),
    HyperbolicDecisionTreeRegressor(**BALL),
    HyperbolicRandomForestClassifier(n_estimators=5, **BALL),
    HyperbolicRandomForestRegressor(n_estimators=5, **BALL),
    # The checks seed only a top-level random_state; a wrapped model gets its own.
    HyperbolicEstimator(ExtraTreesClassifier(n_estimators=5, random_state=0), **BALL),
    HyperbolicEstimator(ExtraTreesRegressor(n_estimators=5, random_state=0), **BALL),
    HyperbolicEstimator(DecisionTreeRegressor(random_state=0), **BALL),
    HyperbolicDecisionTreeClassifier(input_blocks=[Euclidean()]),
    HyperbolicRandomForestRegressor(n_estimators=5, input_blocks=BALL_BLOCK),
    HyperbolicMLPClassifier(hidden_layer_sizes=(4,), max_iter=50, random_state=0, **BALL),
    HyperbolicMLPRegressor(hidden_layer_sizes=(4,), max_iter=50, random_state=0, **BALL),
    HyperbolicMLPClassifier(
        hidden_layer_sizes=(4,), max_iter=50, random_state=0, centre="origin", **BALL
    ),
    HyperbolicMLPRegressor(
        hidden_layer_sizes=(4,), max_iter=50, random_state=0, centre="origin", **BALL
    ),
    HyperbolicXGBClassifier(n_estimators=5, n_jobs=1, input_blocks=[(0.0, None)]),
    HyperbolicLGBMRegressor(n_estimators=20, n_jobs=1, input_blocks=BALL_BLOCK),
]

BOOTSTRAP_WEIGHTS = (
    "bootstrap samples are drawn in proportion to sample_weight, so weighting a row is only "
    "statistically equivalent to repeating it; scikit-learn's own RandomForestClassifier/"
    "Regressor fail this exact check in the same way"
)


def expected_failed_checks(estimator: Any) -> dict[str, str]:
    """Checks that cannot pass, with the reason."""
    if isinstance(estimator, HyperbolicMLPClassifier | HyperbolicMLPRegressor):
        # The checks' points divided by R = 1000 are tiny Klein coordinates, on which a small
        # network does not reach the checks' accuracy in 50 iterations.
        scaled = "inputs divided by R = 1000: a small network trains slowly on them"
        failed = {"check_classifiers_train": scaled, "check_regressors_train": scaled}
        if estimator.centre != "origin":
            # 15 rows in 30 dimensions: the centred frame's axes in the 15 or more directions
            # the rows do not span are not determined by them, so the weighted and the
            # repeated rows get different axes there (the networks on Klein coordinates,
            # below, pass this check).
            failed["check_sample_weight_equivalence_on_dense_data"] = (
                "fewer rows than dimensions leave the centred frame's trailing axes undetermined"
            )
        return failed
    if isinstance(estimator, HyperbolicRandomForestClassifier | HyperbolicRandomForestRegressor):
        return {"check_sample_weight_equivalence_on_dense_data": BOOTSTRAP_WEIGHTS}
    return {}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_estimator(estimator: Any, check: Any) -> None:
    """Each scikit-learn check raises (AssertionError and others) when a convention breaks."""
    check(estimator)
