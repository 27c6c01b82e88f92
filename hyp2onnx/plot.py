"""Pictures of what a fitted model does on hyperbolic points: its regions drawn in a disk.

scikit-learn's ``DecisionBoundaryDisplay`` lays its grid over a square, so
on Poincaré or Klein points most of its rows lie outside the disk, where no
point of the space is. `DecisionRegionDisplay` lays the grid over the
square too but asks the model only about the grid points strictly inside the
unit disk, given to the model in its own input geometry (hyperboloid,
Poincaré or Klein, at its curvature), and draws the answers in the
Poincaré disk (geodesics are circular arcs) or the Klein disk (geodesics are
chords), with the data and a legend.

Points of more than two dimensions are drawn on a slice: the plane through
the origin spanned by two Klein coordinates (``dims``), the others set to 0.
It is a totally geodesic plane, so its picture is the same disk model;
data points off it are shown at their orthogonal projection onto it (in
Klein coordinates: the other coordinates dropped).

Needs matplotlib: ``pip install 'hyp2onnx[plot]'``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import MissingExtraError
from .geometry import (
    curvature_radius,
    from_klein,
    klein_to_poincare,
    poincare_to_klein,
    to_klein,
)

try:
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch
except ModuleNotFoundError as exc:  # pragma: no cover - what the test of the extra checks
    raise MissingExtraError(
        "hyp2onnx.plot needs matplotlib, which is not installed: pip install 'hyp2onnx[plot]'"
    ) from exc

__all__ = ["DISKS", "DecisionRegionDisplay", "disk_grid", "draw_disk"]

#: The disk models a picture can use.
DISKS = ("poincare", "klein")


def disk_grid(resolution: int, disk: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A ``resolution`` x ``resolution`` mesh over the square around the unit disk.

    Returns ``(xx, yy, inside, klein)``: the mesh, which of its points lie
    strictly inside the disk (and whose Klein coordinates do too, after
    rounding) and those points' unit-ball Klein coordinates, ``[n_inside, 2]``.
    ``disk`` says which model the mesh coordinates are: ``"poincare"`` or ``"klein"``.
    """
    if disk not in DISKS:
        raise ValueError(f"disk must be one of {DISKS}, got {disk!r}.")
    if isinstance(resolution, bool) or not isinstance(resolution, (int, np.integer)):
        raise ValueError(f"resolution must be an integer >= 2, got {resolution!r}.")
    if resolution < 2:
        raise ValueError(f"resolution must be an integer >= 2, got {resolution!r}.")
    t = np.linspace(-1.0, 1.0, int(resolution))
    xx, yy = np.meshgrid(t, t)
    flat = np.stack([xx.ravel(), yy.ravel()], axis=1)
    inside = np.einsum("ij,ij->i", flat, flat) < 1.0
    klein = poincare_to_klein(flat[inside]) if disk == "poincare" else flat[inside]
    keep = np.einsum("ij,ij->i", klein, klein) < 1.0
    inside[np.flatnonzero(inside)[~keep]] = False
    return xx, yy, inside.reshape(xx.shape), klein[keep]


def draw_disk(ax: Any, disk: str) -> None:
    """The unit circle, equal axes, and a title naming the disk model."""
    s = np.linspace(0.0, 2.0 * np.pi, 400)
    ax.plot(np.cos(s), np.sin(s), color="black", lw=1)
    ax.set_aspect("equal")
    ax.set_xlim(-1.05, 1.05)
    ax.set_ylim(-1.05, 1.05)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel("Poincaré disk" if disk == "poincare" else "Klein disk")


def _geometry(estimator: Any, given: dict[str, Any]) -> dict[str, Any]:
    """The input geometry the estimator reads: given values, else its own parameters."""
    out = {}
    for name, default in (("input_geometry", None), ("curvature", -1.0), ("timelike_dim", 0)):
        value = given.get(name)
        if value is None:
            value = getattr(estimator, name, default)
        out[name] = value
    if out["input_geometry"] is None:
        raise ValueError(
            f"{type(estimator).__name__} does not say which hyperbolic model its input is in: "
            "pass input_geometry='hyperboloid', 'poincare' or 'klein' (and curvature)."
        )
    return out


class DecisionRegionDisplay:
    """The regions a fitted model gives the points of a hyperbolic disk, in scikit-learn's
    ``Display`` style: `from_estimator` computes, `plot` draws.

    Attributes
    ----------
    xx, yy : ndarray
        The mesh (coordinates of the disk model ``disk``).
    inside : ndarray of bool
        The mesh points strictly inside the disk: the only ones the model saw.
    response : ndarray of float
        Per mesh point, the index of its class in ``classes`` (NaN outside the disk).
    classes : ndarray
        The classes (or region numbers) the indices refer to.
    points, point_labels : ndarray or None
        The data, in the disk's coordinates, and their labels.
    disk : str
        ``"poincare"`` or ``"klein"``.
    ax_, figure_ : matplotlib objects
        Set by `plot`.
    """

    def __init__(
        self,
        *,
        xx: np.ndarray,
        yy: np.ndarray,
        inside: np.ndarray,
        response: np.ndarray,
        classes: np.ndarray,
        disk: str,
        points: np.ndarray | None = None,
        point_labels: np.ndarray | None = None,
        title: str = "",
        names: list[str] | None = None,
    ) -> None:
        self.xx, self.yy, self.inside = xx, yy, inside
        self.response, self.classes, self.disk = response, classes, disk
        self.points, self.point_labels, self.title = points, point_labels, title
        self.names = names if names is not None else [str(c) for c in classes]

    @classmethod
    def from_estimator(
        cls,
        estimator: Any,
        X: Any = None,
        y: Any = None,
        *,
        disk: str = "poincare",
        resolution: int = 300,
        dims: tuple[int, int] = (0, 1),
        response_method: str = "predict",
        input_geometry: str | None = None,
        curvature: float | None = None,
        timelike_dim: int | None = None,
        ax: Any = None,
        plot: bool = True,
    ) -> DecisionRegionDisplay:
        """Ask ``estimator`` about every grid point inside the disk and draw its answers.

        ``estimator`` is any fitted model with ``predict`` (or the method
        ``response_method`` names, e.g. a region tree's ``"apply"``) that
        reads hyperbolic points: its ``input_geometry``, ``curvature`` and
        ``timelike_dim`` are used unless given here (a plain scikit-learn
        model fitted on Poincaré points needs ``input_geometry="poincare"``).
        ``X`` (with labels ``y``, else the model's own predictions) is drawn
        on top. In more than two dimensions the picture is the slice through
        the origin spanned by Klein coordinates ``dims`` (see the module).
        """
        geo = _geometry(
            estimator,
            {
                "input_geometry": input_geometry,
                "curvature": curvature,
                "timelike_dim": timelike_dim,
            },
        )
        n_dims = _n_dims(estimator, X, geo)
        if len(dims) != 2 or len(set(dims)) != 2 or not all(0 <= i < n_dims for i in dims):
            raise ValueError(f"dims must name two different columns of {n_dims}, got {dims!r}.")
        xx, yy, inside, _ = disk_grid(resolution, disk)
        where = (geo["input_geometry"], geo["curvature"], geo["timelike_dim"])
        grid = _model_points(np.stack([xx[inside], yy[inside]], axis=1), disk, n_dims, dims, where)
        answer = np.asarray(getattr(estimator, response_method)(grid))
        classes = _classes(estimator, answer, y, response_method)
        response = np.full(xx.shape, np.nan)
        response[inside] = _indices(classes, answer)
        points = labels = None
        if X is not None:
            k = to_klein(np.asarray(X, dtype=np.float64), *where, check=False)[:, list(dims)]
            points = klein_to_poincare(k) if disk == "poincare" else k
            labels = np.asarray(y) if y is not None else getattr(estimator, response_method)(X)
        display = cls(
            xx=xx,
            yy=yy,
            inside=inside,
            response=response,
            classes=classes,
            disk=disk,
            points=points,
            point_labels=labels,
            title=type(estimator).__name__ + (f", slice of dims {dims}" if n_dims > 2 else ""),
            names=[_name(c, response_method) for c in classes],
        )
        return display.plot(ax=ax) if plot else display

    def plot(self, ax: Any = None, *, alpha: float = 0.45, legend: bool = True) -> Any:
        """Draw the regions, the disk, the data and a legend of the classes; returns ``self``."""
        if ax is None:
            ax = plt.figure(figsize=(5.5, 5)).add_subplot()
        n = len(self.classes)
        colors = plt.get_cmap("tab10" if n <= 10 else "tab20")(np.arange(n) % 20)
        colors[[name == "not in the tree" for name in self.names]] = (0.8, 0.8, 0.8, 1.0)
        ax.pcolormesh(
            self.xx,
            self.yy,
            np.ma.masked_invalid(self.response),
            cmap=ListedColormap(colors),
            vmin=-0.5,
            vmax=n - 0.5,
            alpha=alpha,
            shading="nearest",
        )
        draw_disk(ax, self.disk)
        if self.points is not None and self.point_labels is not None:
            index = _indices(self.classes, self.point_labels, missing=True)
            ax.scatter(
                self.points[:, 0],
                self.points[:, 1],
                c=[colors[i] if i >= 0 else (0.5, 0.5, 0.5, 1.0) for i in index],
                s=12,
                edgecolors="black",
                linewidths=0.3,
            )
        if legend and n <= 20:
            handles = [Patch(color=colors[i], label=name) for i, name in enumerate(self.names)]
            ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
        ax.set_title(self.title, fontsize=9)
        self.ax_, self.figure_ = ax, ax.figure
        return self


def _model_points(
    mesh: np.ndarray, disk: str, n_dims: int, dims: tuple[int, int], where: tuple[Any, ...]
) -> np.ndarray:
    """Unit-disk points ``mesh`` of model ``disk``, on the plane of coordinates ``dims``, in
    the estimator's input geometry ``where``. The slice (the other coordinates 0) is the
    same set in both disk models; input in the disk's own model is only scaled by ``R``,
    other input converted through Klein coordinates."""
    geometry, curvature, timelike_dim = where
    full = np.zeros((mesh.shape[0], n_dims))
    full[:, list(dims)] = mesh
    if geometry == disk:
        return full * curvature_radius(curvature)
    klein = poincare_to_klein(full) if disk == "poincare" else full
    return from_klein(klein, geometry, curvature, timelike_dim)


def _name(value: Any, method: str) -> str:
    """A legend entry: the class, or for a region tree's ``apply`` the region."""
    if method != "apply":
        return str(value)
    return "not in the tree" if value == -1 else f"region {value}"


def _n_dims(estimator: Any, X: Any, geo: dict[str, Any]) -> int:
    """The hyperbolic dimension d of the estimator's points."""
    n_in = getattr(estimator, "n_features_in_", None)
    if n_in is None and X is not None:
        n_in = np.asarray(X).shape[1]
    if n_in is None:
        raise ValueError("pass X: the estimator does not record how many columns it reads.")
    return int(n_in) - (1 if geo["input_geometry"] == "hyperboloid" else 0)


def _classes(estimator: Any, answer: np.ndarray, y: Any, method: str) -> np.ndarray:
    """The classes to colour: the estimator's (for ``predict``), else every value seen."""
    own = getattr(estimator, "classes_", None)
    if method == "predict" and own is not None:
        return np.asarray(own)
    seen = [answer.ravel()] + ([np.asarray(y).ravel()] if y is not None else [])
    return np.unique(np.concatenate(seen))


def _indices(classes: np.ndarray, values: Any, *, missing: bool = False) -> np.ndarray:
    """Each value's index in ``classes`` (-1 for a value not there, where ``missing``)."""
    values = np.ravel(np.asarray(values))
    order = np.argsort(classes, kind="stable")
    ranked = np.asarray(classes)[order]
    pos = np.clip(np.searchsorted(ranked, values), 0, len(ranked) - 1)
    found = ranked[pos] == values
    if not missing and not found.all():
        raise ValueError("the estimator answered with a class it does not list in classes_.")
    return np.where(found, order[pos], -1)
