"""The package's version, read by the build (``[tool.hatch.version]``) and `tether.__version__`."""

__version__ = "0.1.0"
