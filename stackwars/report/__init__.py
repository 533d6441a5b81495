"""Turning stored rows into tables, plots and reports. Never imports the harness."""
