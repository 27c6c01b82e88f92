"""Beyond one machine: Dask training and scoring, Spark scoring.

- [`dask`][hyp2onnx.distributed.dask]: Dask estimators whose threshold correction is a map-reduce
  over partitions (bit-identical to one machine's), and ``predict`` for dask
  arrays and DataFrames.
- [`spark`][hyp2onnx.distributed.spark]: ``predict`` for Spark DataFrames.
- ``_scoring``: what both scorers share: one onnxruntime session per worker
  process and graph, the row checks of ``hyp2onnx predict``, output columns;
  ``_composed``: the rows of a composed graph (its encoder's inputs).

Users import them as ``hyp2onnx.dask`` and ``hyp2onnx.spark``. Neither
module imports Dask or Spark until it is used.
"""
