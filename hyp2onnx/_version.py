"""The installed package version (or a marker when run from an uninstalled tree)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hyp2onnx")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0.0.0+unknown"
