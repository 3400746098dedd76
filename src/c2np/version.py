"""The package version (one place; read by the store, results and the report)."""

__version__ = "0.1.0"
