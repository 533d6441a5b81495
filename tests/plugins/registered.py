"""Test-only task target: what the worker's registry holds once its plugins are loaded, and the
plugin list it was given (test_forkserver: children of one server, each with its own plugins)."""

from __future__ import annotations

import os
from typing import Any


def names() -> dict[str, Any]:
    from stackwars import registry

    return {"workloads": sorted(registry.workloads()), "plugins": os.environ.get("STACKWARS_PLUGINS"),
            "test": os.environ.get("PYTEST_CURRENT_TEST")}
