"""Griffe extension: show the names a package imports on first use.

``hyp2onnx`` binds most of its public names lazily (a module ``__getattr__``
keeps ``import hyp2onnx`` free of tree libraries), so reading the source, as
griffe does, finds no estimator there. This extension imports the package,
asks each name in ``__all__`` where it is defined, and adds it to the package
as an alias of that definition, so ``::: hyp2onnx.to_onnx`` works and the API
pages name only the public paths.

The estimators' docstrings are built when their classes are created (from
the wrapped library's parameters), so the source holds none either: each
public class or function without a docstring in the source gets the one it
has at run time, and a class whose ``__init__`` is generated (its
parameters are the wrapped library's) gets its run-time signature.

Defaults are shown as the objects have them at run time: a default the
source writes as an expression (``GEOMETRY_DEFAULTS["curvature"]``) shows
its value, and each name of a numpydoc row listing several parameters
(``input_geometry, curvature, timelike_dim``) shows its own default (griffe
gives every name of such a row the first one's).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

import griffe

_ROOT = str(Path(__file__).resolve().parents[1])

#: Packages whose lazily bound names are added.
PACKAGES = ("hyp2onnx",)
#: Modules whose public names get their run-time docstrings where the source has none.
PUBLIC = (
    "hyp2onnx",
    "hyp2onnx.blocks",
    "hyp2onnx.conventions",
    "hyp2onnx.dask",
    "hyp2onnx.datasets",
    "hyp2onnx.edge",
    "hyp2onnx.errors",
    "hyp2onnx.export",
    "hyp2onnx.geometry",
    "hyp2onnx.hyperdt",
    "hyp2onnx.plot",
    "hyp2onnx.spark",
    "hyp2onnx.verification",
)


def public_names(module: Any) -> list[str]:
    """``__all__``, or the module's own public classes and functions where it has none."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(obj) or inspect.isfunction(obj))
        and obj.__module__ == module.__name__
    ]


class LazyNames(griffe.Extension):
    """Alias every lazily bound name of ``__all__`` to where it is defined."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.path not in PACKAGES:
            return
        if _ROOT not in sys.path:
            sys.path.insert(0, _ROOT)
        module = importlib.import_module(pkg.path)
        for name in module.__all__:
            if name in pkg.members:
                continue
            obj = getattr(module, name)
            if inspect.ismodule(obj) or not hasattr(obj, "__qualname__"):
                continue
            pkg.set_member(name, griffe.Alias(name, f"{obj.__module__}.{obj.__qualname__}"))
        for path in PUBLIC:
            module = importlib.import_module(path)
            for name in public_names(module):
                obj = getattr(module, name)
                if not (inspect.isclass(obj) or inspect.isfunction(obj)) or not obj.__doc__:
                    continue
                try:
                    found = loader.modules_collection[f"{obj.__module__}.{obj.__qualname__}"]
                except KeyError:
                    continue
                if not found.docstring:
                    found.docstring = griffe.Docstring(
                        inspect.cleandoc(obj.__doc__),
                        parent=found,
                        parser=loader.docstring_parser,
                        parser_options=loader.docstring_options,
                    )
                    if inspect.isclass(obj):
                        _set_signature(found, obj)
                elif inspect.isclass(obj) and _generated(found, obj):
                    _set_signature(found, obj)
                _own_defaults(found, obj)


_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: griffe.ParameterKind.positional_only,
    inspect.Parameter.POSITIONAL_OR_KEYWORD: griffe.ParameterKind.positional_or_keyword,
    inspect.Parameter.VAR_POSITIONAL: griffe.ParameterKind.var_positional,
    inspect.Parameter.KEYWORD_ONLY: griffe.ParameterKind.keyword_only,
    inspect.Parameter.VAR_KEYWORD: griffe.ParameterKind.var_keyword,
}


def _set_signature(found: Any, cls: type) -> None:
    """Give ``found`` an ``__init__`` with the parameters ``cls.__init__`` has at run time."""
    signature = inspect.signature(cls.__init__)
    parameters = griffe.Parameters(
        *(
            griffe.Parameter(
                p.name,
                kind=_KINDS[p.kind],
                default=None if p.default is inspect.Parameter.empty else repr(p.default),
            )
            for p in signature.parameters.values()
        )
    )
    found.set_member("__init__", griffe.Function("__init__", parameters=parameters, parent=found))


def _generated(found: Any, cls: type) -> bool:
    """Whether ``cls.__init__`` takes parameters the source's ``__init__`` does not name."""
    try:
        names = {p.name for p in found.parameters}
    except AttributeError:
        names = set()
    return bool(set(inspect.signature(cls.__init__).parameters) - names - {"self"})


def _literal(text: str | None) -> bool:
    try:
        ast.literal_eval(text or "")
    except (ValueError, SyntaxError):
        return False
    return True


def _own_defaults(found: Any, obj: Any) -> None:
    """Show each parameter's run-time default, in the signature and in its docstring row."""
    try:
        runtime = inspect.signature(obj.__init__ if inspect.isclass(obj) else obj).parameters
        griffe_parameters = found.parameters
    except (TypeError, ValueError, AttributeError):
        return
    for p in griffe_parameters:
        value = runtime[p.name].default if p.name in runtime else inspect.Parameter.empty
        if value is inspect.Parameter.empty:
            continue
        if not _literal(str(p.default)) and _literal(repr(value)):
            p.default = repr(value)
    if not found.docstring:
        return
    defaults = {p.name: p.default for p in griffe_parameters}
    for section in found.docstring.parsed:
        if section.kind is griffe.DocstringSectionKind.parameters:
            for row in section.value:
                if row.name in defaults:
                    row.value = defaults[row.name]
