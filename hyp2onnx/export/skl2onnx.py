"""skl2onnx converters for hyp2onnx estimators.

After [`register_skl2onnx_converters`][hyp2onnx.register_skl2onnx_converters] (``hyp2onnx.register_skl2onnx_converters()``),
``skl2onnx.to_onnx`` converts a hyperbolic estimator (every tree estimator
of the installed backends, the hyperbolic MLPs and their region trees),
alone or as a step of a scikit-learn ``Pipeline`` (after preprocessing
steps skl2onnx converts, such as a ``FunctionTransformer`` or a scaler). skl2onnx is an optional
extra (``pip install 'hyp2onnx[skl2onnx]'``). The converter compiles the
estimator with `hyp2onnx.export.compile_model` and grafts that graph
into skl2onnx's, renaming every tensor into skl2onnx's scope.

Options (``options={id(model): {...}}`` or ``{type(model): {...}}``):

* ``encoding``: for trees ``"exact"`` (default), ``"compat"`` or ``"standard"``;
  for MLPs ``"fast"`` (default) or ``"exact"`` (region trees have one graph).
  Networks use standard operators only, so any ml opset suits them.
  skl2onnx (1.20) accepts ai.onnx.ml opsets up to 3, so the exact encoding
  fits only models that compare in float32 (scikit-learn, XGBoost); export
  exact LightGBM graphs with [`hyp2onnx.to_onnx`][hyp2onnx.to_onnx] or pick another
  encoding.
* classifiers take skl2onnx's usual ``zipmap`` (default ``True``: a
  ``ZipMap`` of class to probability, as for scikit-learn's own
  classifiers; ``False``: the ``label`` and ``probabilities`` tensors;
  ``"columns"``: one output per class), ``nocl`` (labels are class
  indices ``0 .. n-1``) and ``output_class_labels`` (with
  ``zipmap=False``, a third output listing the classes). A region tree's
  ``covered`` and ``region`` outputs follow the classifier's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from sklearn.base import ClassifierMixin, RegressorMixin, is_classifier

from ..emit import ENCODINGS
from ..errors import MissingExtraError
from ..estimators import _registry
from ..estimators._base import HyperbolicTreeModel
from ._compile import DEFAULT_OPSET, compile_model, describe
from ._network import compile_network, is_network

_ML_DOMAIN = "ai.onnx.ml"
_ENCODINGS = [*ENCODINGS, None]
#: The options our converters take: skl2onnx's usual classifier options and the encoding.
_OPTIONS = {
    "encoding": _ENCODINGS,
    "zipmap": [True, False, "columns"],
    "nocl": [True, False],
    "output_class_labels": [False, True],
}
#: Copied at each use: skl2onnx writes the options it finds into the dict it is given.
_DEFAULTS = {"encoding": None, "zipmap": True, "nocl": False, "output_class_labels": False}
_REGRESSOR_DEFAULTS = {"encoding": None}


def _estimator_classes() -> list[type]:
    """Every concrete hyperbolic estimator class of the installed backends, the hyperbolic
    MLPs and their region trees."""
    from ..estimators._mlp import HyperbolicMLPClassifier, HyperbolicMLPRegressor
    from ..estimators._regions import RegionTree

    for spec in _registry.BACKENDS:
        try:
            spec.load()
        except MissingExtraError:
            continue
    found: list[type] = [HyperbolicMLPClassifier, HyperbolicMLPRegressor, RegionTree]
    todo: list[type] = [HyperbolicTreeModel]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if not getattr(cls, "__abstractmethods__", None) and not cls.__name__.startswith("_"):
            found.append(cls)
    return sorted(set(found), key=lambda c: c.__name__)


def _is_classifier(model: Any) -> bool:
    """A classifier, by scikit-learn's tags (a region tree has its network's)."""
    return is_classifier(model)


def _opsets(target_opset: Any) -> tuple[int, int | None]:
    """(ai.onnx opset, ai.onnx.ml opset or None) from skl2onnx's ``target_opset``."""
    if isinstance(target_opset, dict):
        return target_opset.get("") or DEFAULT_OPSET, target_opset.get(_ML_DOMAIN)
    return target_opset or DEFAULT_OPSET, None


def _compile(
    model: Any, input_type: Any, target_opset: Any, options: dict[str, Any]
) -> onnx.ModelProto:
    """Our graph for ``model`` under skl2onnx's opsets and options."""
    opset, _ = _opsets(target_opset)
    encoding = options.get("encoding") or "exact"
    elem = input_type.to_onnx_type().tensor_type.elem_type
    if elem not in (TensorProto.FLOAT, TensorProto.DOUBLE):
        raise RuntimeError("hyp2onnx estimators take float or double input tensors")
    dtype = "float64" if elem == TensorProto.DOUBLE else "float32"
    if is_network(model):
        return _compile_network(model, dtype, opset, options)
    ir_model = describe(model)
    if options.get("nocl") and ir_model.ensemble.classes is not None:
        n_classes = len(ir_model.ensemble.classes)
        ir_model = replace(
            ir_model, ensemble=replace(ir_model.ensemble, classes=np.arange(n_classes))
        )
    try:
        onx = compile_model(ir_model, dtype=dtype, encoding=encoding, opset=opset, legacy_only=True)
    except ValueError as exc:
        # Advise only encodings that convert this model under skl2onnx (the
        # compat encoding, for one, has no node for categorical splits).
        usable = [
            name
            for name in ENCODINGS
            if name != encoding and _converts(ir_model, dtype, name, opset)
        ]
        advice = (
            " or pass "
            + " or ".join(f"options={{'encoding': {n!r}}}" for n in usable)
            + " to skl2onnx"
            if usable
            else ""
        )
        raise RuntimeError(
            f"{exc}: skl2onnx accepts ai.onnx.ml opsets up to 3 only. Export "
            f"{type(model).__name__} with hyp2onnx.to_onnx{advice}."
        ) from exc
    if is_classifier(model) and options.get("zipmap", False) is not False:
        _float_probabilities(onx.graph)
    return onx


def _compile_network(
    model: Any, dtype: str, opset: int, options: dict[str, Any]
) -> onnx.ModelProto:
    """A hyperbolic MLP's or region tree's graph (standard operators only: any ml opset)."""
    encoding = options.get("encoding") or "fast"
    try:
        onx = compile_network(
            model,
            dtype=dtype,
            encoding=encoding,
            opset=opset,
            class_indices=bool(options.get("nocl")),
        )
    except ValueError as exc:
        raise RuntimeError(f"{exc} (skl2onnx option 'encoding')") from exc
    if is_classifier(model) and options.get("zipmap", False) is not False:
        _float_probabilities(onx.graph)
    return onx


def _converts(ir_model: Any, dtype: str, encoding: str, opset: int) -> bool:
    """Whether ``encoding`` compiles ``ir_model`` with the operators skl2onnx accepts."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile_model(ir_model, dtype=dtype, encoding=encoding, opset=opset, legacy_only=True)
    except (ValueError, TypeError):
        return False
    return True


def _float_probabilities(graph: onnx.GraphProto) -> None:
    """Make the ``probabilities`` output float32, the only type ZipMap takes."""
    output = next(o for o in graph.output if o.name == "probabilities")
    if output.type.tensor_type.elem_type == TensorProto.FLOAT:
        return
    for node in graph.node:
        node.output[:] = ["probabilities/double" if o == output.name else o for o in node.output]
    graph.node.append(
        helper.make_node(
            "Cast",
            ["probabilities/double"],
            [output.name],
            to=TensorProto.FLOAT,
            name="zipmap/Cast",
        )
    )
    output.type.tensor_type.elem_type = TensorProto.FLOAT


def _parser(scope: Any, model: Any, inputs: list[Any], custom_parsers: Any = None) -> list[Any]:
    from skl2onnx.common.data_types import (
        BooleanTensorType,
        DoubleTensorType,
        FloatTensorType,
        Int64TensorType,
        StringTensorType,
    )

    kinds = {
        TensorProto.BOOL: BooleanTensorType,
        TensorProto.FLOAT: FloatTensorType,
        TensorProto.DOUBLE: DoubleTensorType,
        TensorProto.INT64: Int64TensorType,
        TensorProto.STRING: StringTensorType,
    }
    classifier = is_classifier(model)
    options = scope.get_options(model, dict(_DEFAULTS if classifier else _REGRESSOR_DEFAULTS))
    onx = _compile(model, inputs[0].type, scope.target_opset, options)
    operator = scope.declare_local_operator(_alias(type(model)), model)
    operator.inputs = inputs
    for output in onx.graph.output:
        tensor = output.type.tensor_type
        dims = [d.dim_value or None for d in tensor.shape.dim]
        kind = kinds[tensor.elem_type]([None, *dims[1:]])
        operator.outputs.append(scope.declare_local_variable(output.name, kind))
    outputs = list(operator.outputs)
    if not classifier:
        return outputs
    if options["zipmap"] is not False:
        if options["output_class_labels"]:
            raise RuntimeError("Option 'output_class_labels' needs option zipmap=False.")
        from skl2onnx._parse import _apply_zipmap

        # a region tree's covered and region outputs follow the zipped two
        zipped = _apply_zipmap(options["zipmap"], scope, model, inputs[0].type, outputs[:2])
        return [*zipped, *outputs[2:]]
    if options["output_class_labels"]:
        from skl2onnx.common.utils_classifier import get_label_classes

        labels = scope.declare_local_operator("SklearnClassLabels")
        labels.classes = get_label_classes(scope, model)
        integral = np.issubdtype(labels.classes.dtype, np.integer) or (
            labels.classes.dtype == np.bool_
        )
        kind = Int64TensorType if integral else StringTensorType
        variable = scope.declare_local_variable("class_labels", kind(labels.classes.shape))
        labels.outputs.append(variable)
        outputs.append(variable)
    return outputs


def _shape_calculator(operator: Any) -> None:
    """Types were fixed by the parser; only the batch dimension follows the input."""
    n = operator.inputs[0].get_first_dimension()
    for variable in operator.outputs:
        variable.type.shape = [n, *variable.type.shape[1:]]


def _converter(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    classifier = is_classifier(model)
    options = container.get_options(model, dict(_DEFAULTS if classifier else _REGRESSOR_DEFAULTS))
    onx = _compile(model, operator.inputs[0].type, container.target_opset_all, options)
    graph = onx.graph
    rename = {graph.input[0].name: operator.inputs[0].full_name}
    for output, variable in zip(graph.output, operator.outputs, strict=True):
        rename[output.name] = variable.full_name
    prefix = scope.get_unique_variable_name("hyp2onnx")

    def new_name(name: str) -> str:
        if not name:
            return name
        if name not in rename:
            rename[name] = f"{prefix}/{name}"
        return rename[name]

    for tensor in graph.initializer:
        copy = numpy_helper.from_array(numpy_helper.to_array(tensor), new_name(tensor.name))
        container.initializers.append(copy)
    versions = {o.domain: o.version for o in onx.opset_import}
    # skl2onnx sets the model's opsets from the nodes added at the top level;
    # the tree operator runs inside the row-block Loop, so its domain is
    # declared here (the container's public record of (domain, version)).
    for domain in _subgraph_domains(graph):
        container.node_domain_version_pair_sets.add((domain, versions[domain]))
    for node in graph.node:
        attrs = {a.name: _attribute(a, new_name) for a in node.attribute}
        container.add_node(
            node.op_type,
            [new_name(i) for i in node.input],
            [new_name(o) for o in node.output],
            op_domain=node.domain,
            op_version=versions[node.domain],
            name=scope.get_unique_operator_name(node.name),
            **attrs,
        )


def _subgraph_domains(graph: onnx.GraphProto) -> set[str]:
    """The operator domains used inside the subgraphs of ``graph``'s nodes."""
    domains: set[str] = set()
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                domains |= {n.domain for n in attribute.g.node} | _subgraph_domains(attribute.g)
    return domains


def _attribute(attribute: onnx.AttributeProto, new_name: Any) -> Any:
    """An attribute's value, with subgraph tensor names renamed too."""
    value = helper.get_attribute_value(attribute)
    if attribute.type == onnx.AttributeProto.GRAPH:
        value = _renamed_graph(value, new_name)
    return value


def _renamed_graph(graph: onnx.GraphProto, new_name: Any) -> onnx.GraphProto:
    """A copy of a subgraph (and the subgraphs inside it) with every name renamed."""
    copy = onnx.GraphProto()
    copy.CopyFrom(graph)
    for value_info in [*copy.input, *copy.output]:
        value_info.name = new_name(value_info.name)
    for node in copy.node:
        node.input[:] = [new_name(i) for i in node.input]
        node.output[:] = [new_name(o) for o in node.output]
        node.name = new_name(node.name)
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                attribute.g.CopyFrom(_renamed_graph(attribute.g, new_name))
    return copy


def _alias(cls: type) -> str:
    return f"Hyp2Onnx{cls.__name__}"


def register_skl2onnx_converters() -> list[type]:
    """Register every hyperbolic estimator class with skl2onnx; returns the classes.

    Call it once before ``skl2onnx.to_onnx``; the estimators of backends
    whose library is not installed are left out.
    """
    try:
        from skl2onnx import update_registered_converter
    except ModuleNotFoundError as exc:
        raise MissingExtraError(
            "skl2onnx converters need the skl2onnx package, which is not installed: "
            "pip install 'hyp2onnx[skl2onnx]'"
        ) from exc

    classes = _estimator_classes()
    for cls in classes:
        # a region tree is either kind: it takes the classifiers' options
        regressor = issubclass(cls, RegressorMixin) and not issubclass(cls, ClassifierMixin)
        update_registered_converter(
            cls,
            _alias(cls),
            _shape_calculator,
            _converter,
            parser=_parser,
            options={"encoding": _ENCODINGS} if regressor else _OPTIONS,
        )
    return classes
