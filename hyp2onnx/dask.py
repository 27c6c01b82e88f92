"""Train hyperbolic boosters on a Dask cluster and score dask collections with exported graphs.

This documented path is an alias of [`hyp2onnx.distributed.dask`][hyp2onnx.distributed.dask], where the code
lives: both names give the same module object, so pickles made under either
name load.
"""

import sys

from .distributed import dask as _module

sys.modules[__name__] = _module
