"""The version of this ComputeFence (hatch reads it from here for the package)."""

__version__ = "0.6.0"
