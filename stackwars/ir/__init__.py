"""Compiler intermediate forms: dumps, statistics, comparisons."""
