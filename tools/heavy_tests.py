"""Writes tests/heavy_tests.txt: the tests whose call took >= a threshold in a measured run.

`make test` must stay within 10 minutes on 2 cores. The tests listed in tests/heavy_tests.txt
are marked ``integration`` at collection (tests/conftest.py), so they run in
`make test-integration` (and in CI) instead of `make test`. The list is made from the
``--durations=0`` report of a whole `make test` run:

    .venv/bin/python -m pytest -n 2 -q -m "not slow and not integration" --durations=0 tests \\
        > /tmp/durations.log
    python tools/heavy_tests.py /tmp/durations.log --threshold 5 --note "2-core sandbox, idle"

Tests already in the list keep their place (they no longer run in `make test`, so a new report
cannot show them); pass --reset to start from the report alone.
"""

from __future__ import annotations

import argparse
import datetime
import pathlib
import re

LIST = pathlib.Path(__file__).resolve().parents[1] / "tests" / "heavy_tests.txt"
_LINE = re.compile(r"^(?P<secs>[0-9.]+)s call\s+(?P<nodeid>\S.*)$")


def read_list(path: pathlib.Path = LIST) -> list[str]:
    if not path.exists():
        return []
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=pathlib.Path, help="pytest output with --durations=0")
    ap.add_argument("--threshold", type=float, default=5.0, help="seconds per call (default 5)")
    ap.add_argument("--note", default="", help="machine and load of the measured run")
    ap.add_argument("--reset", action="store_true", help="drop the tests already listed")
    args = ap.parse_args()
    heavy = {}
    for line in args.report.read_text().splitlines():
        m = _LINE.match(line.strip())
        if m and float(m["secs"]) >= args.threshold:
            heavy[m["nodeid"]] = float(m["secs"])
    if not heavy and "slowest durations" not in args.report.read_text():
        raise SystemExit(f"{args.report}: no --durations report found")
    kept = [] if args.reset else [n for n in read_list() if n not in heavy]
    today = datetime.date.today().isoformat()
    header = [
        "# Tests marked `integration` at collection (tests/conftest.py): each call took",
        f"# >= {args.threshold:g} s in `make test` ({today}; {args.note or 'machine not noted'}).",
        "# Made by tools/heavy_tests.py; they run in `make test-integration` and in CI.",
    ]
    body = sorted(kept) + sorted(heavy)
    LIST.write_text("\n".join(header + body) + "\n")
    print(f"{LIST}: {len(body)} tests ({len(heavy)} from this report, {sum(heavy.values()):.0f} s)")


if __name__ == "__main__":
    main()
