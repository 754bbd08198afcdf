"Appending measured rows to a CSV under benchmarks/results/, each with the date and the command that measured it."
import csv
import datetime
import shlex
import sys
from pathlib import Path


def append_rows(path: Path, columns: list[str], rows: list[dict], script: str) -> None:
    "Append `rows` to `path` (header first if it is new), each with today's date and the command that measured it."
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    command = shlex.join([script, *sys.argv[1:]])
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, columns, extrasaction="ignore")
        if new: w.writeheader()
        for r in rows: w.writerow({"date": datetime.date.today().isoformat(), "command": command, "note": "", **r})
