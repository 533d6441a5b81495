"""Redraw results/verdict-cpu/forest.png from its stored verdict JSON with the current plot code
(the two words for a tie, the legend beside the axes, the x label whole).

    .venv/bin/python scripts/redraw-forest.py
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stackwars import stats  # noqa: E402
from stackwars import verdict as vd  # noqa: E402
from stackwars.report import verdict as view  # noqa: E402

FOLDER = ROOT / "results" / "verdict-cpu"

data = json.loads((FOLDER / "main-job-verdict.json").read_text())
rows = data["verdicts"]
for r in rows:
    r.setdefault("confidence", 0.95)  # the stored run read every verdict at 95%
    if r["verdict"] == "tie":  # stored before the two words: read again by the one rule
        c = stats.Comparison(r["ratio"], r["ci_low"], r["ci_high"], False)
        r["verdict"] = vd.word("tie", c, data.get("threshold", stats.TIE_THRESHOLD))
(FOLDER / "forest.png").write_bytes(view.forest_png(rows))
print([r["verdict"] for r in rows])
