"""`RegionTree` is a scikit-learn estimator: parameters in ``__init__``, the tree built in ``fit``.

So `sklearn.base.clone`, `is_classifier` and model selection take it like
any estimator: a clone holds an unfitted copy of the network, which
``fit(X, y)`` fits before it reads its regions. A fitted network given to
it is read as it is.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from _data import labels, points, targets
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import cross_val_score

import hyp2onnx as h
from hyp2onnx.errors import UnsupportedModelError


def _mlp(kind: str = "classifier", **params):
    make = h.HyperbolicMLPClassifier if kind == "classifier" else h.HyperbolicMLPRegressor
    return make(hidden_layer_sizes=(5,), max_iter=60, random_state=0, **params)


@pytest.fixture(scope="module")
def data():
    X, k = points(240, 2, seed=11, max_radius=2.0)
    return X, labels(k, 2, seed=11), targets(k, seed=11)


def _fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


def test_init_only_stores_its_parameters():
    tree = h.RegionTree(object(), certify_radius=1.5)
    assert tree.get_params(deep=False) == {
        "network": tree.network,
        "certify_radius": 1.5,
        "max_certified": 10_000,
        "verbose": 0,
    }
    assert not hasattr(tree, "tree_")
    with pytest.raises(UnsupportedModelError, match="got object"):
        tree.fit(np.zeros((3, 3)))


def test_fit_reads_a_fitted_network_as_region_tree_does(data):
    X, y, _ = data
    mlp = _fit(_mlp(), X, y)
    tree = h.RegionTree(mlp).fit(X)
    made = h.region_tree(mlp, X)
    assert tree.network_ is mlp and tree.n_regions_ == made.n_regions_
    np.testing.assert_array_equal(tree.apply(X), made.apply(X))
    np.testing.assert_array_equal(tree.predict(X), mlp.predict(X))


def test_clone_and_is_classifier(data):
    X, y, z = data
    mlp = _fit(_mlp(), X, y)
    tree = h.region_tree(mlp, X)
    assert is_classifier(tree) and not is_regressor(tree)
    assert is_regressor(h.RegionTree(_mlp("regressor")))
    copy = clone(tree)
    assert not hasattr(copy, "tree_") and copy.network is not mlp
    with pytest.raises(NotFittedError, match="pass a fitted network, or y"):
        copy.fit(X)
    _fit(copy, X, y)
    assert copy.network_ is not copy.network  # the parameter stays unfitted
    assert not hasattr(copy.network, "network_") and not hasattr(copy.network, "classes_")
    np.testing.assert_array_equal(copy.predict(X), tree.predict(X))  # the same seed
    regressor = _fit(h.RegionTree(_mlp("regressor")), X, z)
    assert regressor.n_regions_ >= 1 and regressor.predict(X).shape == (len(X),)


def test_model_selection_takes_it(data):
    X, y, _ = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        scores = cross_val_score(h.RegionTree(_mlp()), X, y, cv=2)
        networks = cross_val_score(_mlp(), X, y, cv=2)
    np.testing.assert_array_equal(scores, networks)  # a tree's labels are its network's
    tree = _fit(h.RegionTree(_mlp()), X, y)
    assert tree.score(X, y) == np.mean(tree.predict(X) == y)
    regressor = _fit(h.RegionTree(_mlp("regressor")), X, data[2])
    assert regressor.score(X, data[2]) == pytest.approx(
        1 - np.sum((regressor.predict(X) - data[2]) ** 2) / np.sum((data[2] - data[2].mean()) ** 2)
    )


def test_region_is_public(data):
    X, y, _ = data
    tree = h.region_tree(_fit(_mlp(), X, y), X)
    region = tree.explain(X[0])
    assert isinstance(region, h.Region) and h.Region is h.estimators.Region
    assert "Region" in h.estimators.__all__ and "Region" in h.__all__


def test_a_tree_pickled_before_it_had_parameters_loads(data):
    X, y, _ = data
    tree = h.region_tree(_fit(_mlp(), X, y), X)
    state = {
        k: v
        for k, v in tree.__dict__.items()
        if k not in ("network", "certify_radius", "max_certified", "verbose", "_sklearn_version")
    }
    old = h.RegionTree.__new__(h.RegionTree)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no version warning either
        old.__setstate__(state)
    assert old.network is tree.network_ and old.get_params()["certify_radius"] is None
    np.testing.assert_array_equal(old.predict(X), tree.predict(X))
    again = pickle.loads(pickle.dumps(tree))
    np.testing.assert_array_equal(again.apply(X), tree.apply(X))
