"""A plugin whose import calls sys.exit(3): the command must say so, not exit silently."""

import sys

sys.exit(3)
