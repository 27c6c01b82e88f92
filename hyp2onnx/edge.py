"""Package graphs for onnxruntime's minimal (edge) builds.

This documented path is an alias of [`hyp2onnx.export.edge`][hyp2onnx.export.edge], where the code
lives: both names give the same module object, so pickles made under either
name load.
"""

import sys

from .export import edge as _module

sys.modules[__name__] = _module
