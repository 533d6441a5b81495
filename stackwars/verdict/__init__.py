"""The verdict's own rooms: JAX or PyTorch, for each workload x preset x phase x dtype x device, on one machine.

Choosing, deciding and planning the next look live here, apart from the words and plots that show
them (``report/verdict.py`` renders these rows; it decides nothing):

* ``choose``: each side's best among its candidates, on one process a candidate, and after a
  run's first round which cells go on (``screen``);
* ``decide``: each row's ratio JAX / PyTorch from the chosen cells' other processes, paired by
  round, every machine's rows read together, and the row's word (``verdicts``), and the A/A
  check of the deciding design (``self_check``);
* ``plan``: what a run measures next (each open row's next look, the rows most likely to decide a
  second first under a budget), what a row left out would need, and why a row gets no more;
* ``sequential``: the design those rest on: the looks, the O'Brien-Fleming boundary of each,
  Holm's step-down over a machine's rows, the two one-sided tests of "same speed", futility;
* ``gate`` (which processes decide), ``figures`` (a cell's figures from its clean processes),
  ``spread`` (why a cell's processes disagree), ``beside`` (compile break-even, memory, energy),
  ``words`` (what a row may say).

    from stackwars import verdict
    rows = verdict.verdicts(store.results.rows(store))
"""

import sys

from stackwars.verdict.choose import analysis, cell_id, choose, latest_processes, replay_kinds, screen
from stackwars.verdict.decide import looks_of, row_key, self_check, verdicts
from stackwars.verdict.plan import Want, aa_more, allot, as_cells, no_top_up, pairs, wanted, would_need
from stackwars.verdict.words import (DECIDED, DECISION, ENERGY_DECISION, FRAMEWORKS, NO_DIFFERENCE, SAME, SAME_ENERGY,
                                     VERDICTS, inside_band, tied, title, word)

__all__ = ["DECIDED", "DECISION", "ENERGY_DECISION", "FRAMEWORKS", "NO_DIFFERENCE", "SAME", "SAME_ENERGY", "VERDICTS",
           "Want", "aa_more", "allot", "analysis", "as_cells", "cell_id", "choose", "inside_band", "latest_processes",
           "looks_of", "no_top_up", "pairs", "replay_kinds", "row_key", "screen", "self_check", "tied", "title",
           "verdicts", "wanted", "word", "would_need"]



class _Verdict(type(sys.modules[__name__])):
    """``stackwars.verdict`` is this package and the Python API's call at once: importing any room
    of it binds the name ``stackwars.verdict`` to the package, so the package answers
    ``stackwars.verdict(run_ids, db=...)`` itself, through the call the package's face provides
    (``stackwars.verdict_call``: stored runs read as ``stackwars verdict`` reads them). The face is
    always imported before this package; the rooms import nothing above them."""

    def __call__(self, run_ids=None, db=None, threshold=None):
        return sys.modules["stackwars"].verdict_call(run_ids, db=db, threshold=threshold)


sys.modules[__name__].__class__ = _Verdict
