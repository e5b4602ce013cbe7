#!/usr/bin/env python3
"""Fails when a comment in non-test code carries lab notes: a date (YYYY-MM-DD,
or MM-DD alone) or a seed list ("seed" or "seeds" followed by numbers).

Comments state a contract and one reason; where a value was measured they name
the results file that holds the measurement (STYLE.md §16). Dates, seeds, hosts
and measured ratios belong in experiments/results/. Run from anywhere:
    python3 scripts/check_comments.py [ROOT]
Exit 0 when clean; 1 with one `file:line: what: text` per finding.
"""
import os
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
# Code that is not a test; tests may pin a logged run's numbers and dates.
SUFFIXES = {".h", ".hpp", ".cpp", ".cu", ".cuh", ".py", ".sh", ".cmake", ".in"}
SKIP_DIRS = {"tests", "build", ".venv", ".git", "results", "docs", "__pycache__", ".cache", "runs", ".gpu-deps"}

# A month-day or year-month-day date, not a range of small numbers such as
# "1-2 bits": MM-DD with two digits each (MM 01-12, DD 01-31), optionally
# after a four-digit year, standing alone.
# Line ranges ("lines 11-14") and percentages ("10-25%") are not dates.
DATE = re.compile(r"(?<![\w.-])(?<!ines )(?<!ine )(?:20\d\d-)?(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])"
                  r"(?![\w.%-]|-\d)")
# Not a command-line flag (`--seeds 1 2`).
SEEDS = re.compile(r"(?<!-)\bseeds?\s+\d+(?:\s*[-–,]\s*\d+|\s+and\s+\d+)*\b", re.IGNORECASE)


def comment_text(path, line):
    """The comment part of `line` for this file's language, or None."""
    if path.suffix in {".py", ".sh", ".cmake"} or path.name == "CMakeLists.txt":
        at = line.find("#")
        return line[at + 1:] if at >= 0 and not line.lstrip().startswith("#!") else None
    at = line.find("//")
    if at >= 0:
        return line[at + 2:]
    stripped = line.lstrip()
    if stripped.startswith(("/*", "*")):
        return stripped.lstrip("/*")
    return None


def main():
    findings = []
    paths = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("build"))
        paths += [pathlib.Path(folder) / f for f in sorted(files)]
    for path in paths:
        rel = path.relative_to(ROOT)
        if path.suffix not in SUFFIXES and path.name != "CMakeLists.txt":
            continue
        if path.resolve() == pathlib.Path(__file__).resolve():
            continue
        in_docstring = False
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            text = comment_text(path, line)
            if path.suffix == ".py":  # docstrings are comments too
                quotes = line.count('"""') + line.count("'''")
                if in_docstring or quotes:
                    text = (text or "") + " " + line
                if quotes % 2 == 1:
                    in_docstring = not in_docstring
            if not text:
                continue
            for what, pattern in (("a date", DATE), ("a seed list", SEEDS)):
                m = pattern.search(text)
                if m:
                    findings.append(f"{rel}:{number}: {what} ({m.group(0)!r}) in a comment: {line.strip()[:100]}")
    for f in findings:
        print(f)
    if findings:
        print(f"{len(findings)} comment line(s) carry lab notes: move them to experiments/results/ "
              "and cite the file by name (STYLE.md §16)")
        return 1
    print("comments: no dates or seed lists in non-test code")
    return 0


if __name__ == "__main__":
    sys.exit(main())
