"""What the code makes of stored results, as one JSON file, to hold two checkouts against
each other after a change that must not change behaviour (issue 57's splits):

    PYTHONPATH=OLD python scripts/same-output.py a.json DB...
    PYTHONPATH=NEW python scripts/same-output.py b.json DB...
    cmp a.json b.json

For each database (read only): every cell's flat row (``Measurement.to_row``, keys in order),
and the verdict rows with their Markdown (``report/verdict``). Copy the databases first: a
reader may leave a -wal file beside them.
"""

from __future__ import annotations

import json
import sys

from stackwars.cli.verdict_cmd import load
from stackwars import verdict as vd
from stackwars.report import verdict as view
from stackwars.store.results import Store


def main(out: str, dbs: list[str]) -> None:
    found = {}
    for db in dbs:
        with Store(db, create=False) as store:
            rows = [m.to_row() for _, m in store.cells()]
            try:
                _, cells, profiles, anatomy, duets = load(store, None)
            except Exception as exc:  # noqa: BLE001 - a database with nothing to decide: say so, go on
                found[db] = {"rows": rows, "verdicts": repr(exc)}
                continue
            verdicts = vd.verdicts(cells, profiles, anatomy, duets=duets)
            found[db] = {"rows": rows, "verdicts": verdicts, "markdown": view.markdown(verdicts)}
    with open(out, "w") as f:
        json.dump(found, f, default=str)
    print(f"{len(dbs)} database(s), {sum(len(v['rows']) for v in found.values())} rows, "
          f"{sum(len(v['verdicts']) for v in found.values() if isinstance(v['verdicts'], list))} verdict rows")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
