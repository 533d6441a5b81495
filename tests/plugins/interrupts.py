"""A plugin whose import raises KeyboardInterrupt: the command must say so, not exit silently."""

raise KeyboardInterrupt
