"Appending measured rows to a CSV under benchmarks/results/, each with the date and the command that measured it."
import csv
import datetime
import os
import shlex
import sys
import time
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


def other_busy_cpus(seconds: float = 3.0) -> float:
    """How many CPUs were busy over the next `seconds`, from /proc/stat: call it while the benchmark itself is idle
    (between its timed child processes), so it measures what else runs. Timings are only valid near 0.
    Unlike the 1-minute load average, it is not inflated by the benchmark's own previous stage."""
    def sample():
        f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        return sum(f), f[3] + f[4]  # total, idle + iowait
    (t0, i0), _ = sample(), time.sleep(seconds)
    t1, i1 = sample()
    return round((1 - (i1 - i0) / max(1, t1 - t0)) * (os.cpu_count() or 1), 2)
