"Appending measured rows to a CSV under benchmarks/results/, each with the date and the command that measured it."
import csv
import datetime
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path


def code_version(repo: Path = Path(__file__).resolve().parents[1]) -> str:
    """The commit of the checkout at `repo`, its short hash (`git describe --always --dirty --exclude=*`: a tag never
    replaces it; `-dirty` where tracked files differ from it); "" outside a git checkout. A date alone cannot say which
    side of a same-day change a row was taken on."""
    try:
        out = subprocess.run(["git", "-C", str(repo), "describe", "--always", "--dirty", "--exclude=*"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError): return ""
    return out.stdout.strip() if out.returncode == 0 else ""


_AT_START = code_version()  # the code a benchmark loaded is the checkout's when it started, not when it writes its rows


def measured_version(repo: Path = Path(__file__).resolve().parents[1]) -> str:
    """The commit of the code a run measured: the checkout's when the benchmark started. Where the checkout has moved
    since (a commit or an edit during a long rehearsal, whose notebooks' kernels import the library as they start), both:
    `START..NOW`, so the row shows it is not one version's."""
    now = code_version(repo)
    return _AT_START if now == _AT_START else f"{_AT_START}..{now}"


def append_rows(path: Path, columns: list[str], rows: list[dict], script: str) -> None:
    """Append `rows` to `path` (header first if it is new), each with today's date and the command that measured it, and
    the commit of the code measured (`measured_version`) where the CSV has a `commit` column."""
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    command = shlex.join([script, *sys.argv[1:]])
    stamp = {"date": datetime.date.today().isoformat(), "command": command, "note": ""}
    if "commit" in columns: stamp["commit"] = measured_version()
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, columns, extrasaction="ignore")
        if new: w.writeheader()
        for r in rows: w.writerow({**stamp, **r})


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
