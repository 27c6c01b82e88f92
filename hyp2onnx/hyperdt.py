"""Export models of the original HyperDT (hyperdt 0.0.3).

This documented path is an alias of [`hyp2onnx.export.hyperdt`][hyp2onnx.export.hyperdt], where the code
lives: both names give the same module object, so pickles made under either
name load.
"""

import sys

from .export import hyperdt as _module

sys.modules[__name__] = _module
