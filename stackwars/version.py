"""The package's version (pyproject.toml states the same): a leaf, so that the environment
fingerprint (harness/env.py) reads it without importing the package's face."""

__version__ = "0.1.0"
