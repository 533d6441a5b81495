"""Studies: structured experiments over many measurements. Importing registers them."""

from stackwars.studies import mnist  # noqa: F401
