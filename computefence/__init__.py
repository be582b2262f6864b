"""ComputeFence: pre-flight checks for rented GPU compute."""

__version__ = "0.1.0"
