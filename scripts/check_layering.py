#!/usr/bin/env python3
"""Fails when a source file includes a module that the layering table does not allow.

The table is the one in docs/architecture.md ("may include from"), which follows the module
table of ../shared/design/ARCHITECTURE.md. A module is a folder under src/deepinfer/; an
include of "deepinfer/<module>/..." from a file of another module must be allowed by that
module's row. Usage: scripts/check_layering.py [--root DIR]  (exit 0 clean, 1 violations,
2 the table or the tree could not be read).
"""
import argparse
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"deepinfer/([A-Za-z0-9_]+)/')
ROW = re.compile(r"^\|\s*`?([a-z_]+)/?`?\s*\|\s*([^|]*)\|\s*$")


def read_table(doc: pathlib.Path) -> dict:
    """Rows of the '| module | may include from |' table: module -> allowed set."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    try:
        start = next(i for i, l in enumerate(lines) if re.match(r"^\|\s*module\s*\|\s*may include from", l))
    except StopIteration:
        raise SystemExit(f"check_layering: {doc}: no '| module | may include from |' table")
    table = {}
    for line in lines[start + 2:]:
        m = ROW.match(line)
        if not m:
            break
        allowed = {a.strip(" `/") for a in m.group(2).split(",") if a.strip()}
        if any("nothing" in a for a in allowed):
            allowed = set()
        table[m.group(1)] = allowed
    if not table:
        raise SystemExit(f"check_layering: {doc}: the layering table is empty")
    return table


def violations(src: pathlib.Path, table: dict) -> list:
    found = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".h", ".cc", ".cu", ".cuh") or not path.is_file():
            continue
        module = path.relative_to(src).parts[0]
        if module not in table:
            found.append(f"{path}: module '{module}' has no row in the layering table")
            continue
        allowed = table[module]
        if "all" in allowed:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if m and m.group(1) != module and m.group(1) not in allowed:
                found.append(f"{path}:{n}: {module}/ may not include {m.group(1)}/ "
                             f"(allowed: {', '.join(sorted(allowed)) or 'nothing of ours'})")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parents[1]),
                    help="repository root (default: this script's repository)")
    args = ap.parse_args()
    root = pathlib.Path(args.root)
    src = root / "src" / "deepinfer"
    if not src.is_dir():
        print(f"check_layering: {src} is not a directory", file=sys.stderr)
        return 2
    table = read_table(root / "docs" / "architecture.md")
    found = violations(src, table)
    for v in found:
        print(v, file=sys.stderr)
    if found:
        print(f"check_layering: {len(found)} include(s) point up the module table", file=sys.stderr)
        return 1
    print(f"check_layering: {len(table)} modules, no include points up the table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
