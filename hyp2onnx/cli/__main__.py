"""``python -m hyp2onnx.cli``: the same as the ``hyp2onnx`` command."""

from . import main

raise SystemExit(main())
