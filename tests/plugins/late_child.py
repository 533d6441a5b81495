"""Test-only preload: every child a fork server forks sleeps ``LATE_CHILD_S`` seconds before
its first own instruction (``os.register_at_fork``), so a test can kill the server while the
child has not yet run: the window in which it could mistake init for its server."""

import os
import time

LATE_CHILD_S = 2.0

os.register_at_fork(after_in_child=lambda: time.sleep(LATE_CHILD_S))
