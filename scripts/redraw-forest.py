"""Redraw results/verdict-cpu/forest.png from its stored verdict JSON with the current plot code
(the words same speed / no difference found; the legend outside the axes; the label whole)."""
import json
import sys

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent
from stackwars import stats
from stackwars.report import verdict as vd

data = json.load(open(str(ROOT / "results/verdict-cpu/") + "/main-job-verdict.json"))
rows = data["verdicts"]
for r in rows:
    r.setdefault("confidence", 0.95)  # the stored run read every verdict at 95% (its x-axis says so)
    if r["verdict"] == "tie":  # stored before the two words: read again by the one rule
        c = stats.Comparison(r["ratio"], r["ci_low"], r["ci_high"], False)
        r["verdict"] = vd.word("tie", c, data.get("threshold", stats.TIE_THRESHOLD))
png = vd.forest_png(rows)
open(str(ROOT / "results/verdict-cpu/") + "/forest.png", "wb").write(png)
print([r["verdict"] for r in rows])
