"""Write the documentation's generated reference pages (docs/reference/cli.md, workloads.md)
from the code. tests/test_docs.py fails when a committed page differs from what this writes."""

from pathlib import Path

from stackwars.cli.reference import cli_markdown, workloads_markdown

DOCS = Path(__file__).resolve().parent.parent / "docs" / "reference"
DOCS.mkdir(parents=True, exist_ok=True)
(DOCS / "cli.md").write_text(cli_markdown())
(DOCS / "workloads.md").write_text(workloads_markdown())
print(f"wrote {DOCS / 'cli.md'} and {DOCS / 'workloads.md'}")
