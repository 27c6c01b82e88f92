"""Score Spark DataFrames with exported graphs.

This documented path is an alias of [`hyp2onnx.distributed.spark`][hyp2onnx.distributed.spark], where the code
lives: both names give the same module object, so pickles made under either
name load.
"""

import sys

from .distributed import spark as _module

sys.modules[__name__] = _module
