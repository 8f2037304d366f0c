#!/usr/bin/env python3
"""Checks that the docs point at things that exist: every relative Markdown link names an existing file and,
with #anchor, one of its headings (GitHub's heading slugs), and every source path in backticks
(`kernels/gemm_amx.cpp`, `src/plan/packing.h`, ...) names a file of the tree, read from the repository root or
from src/, include/, include/hanpu/, python/ or the document's own folder (the docs name files both ways).

Usage: scripts/check-docs.py [--root DIR] [FILE.md ...]   (default: README.md and docs/*.md under the root)
Prints FILE:LINE: what is missing, one line each, and exits 1 if anything is; 0 otherwise.
"""
import argparse
import glob
import os
import re
import sys

SOURCE_PATH = re.compile(r"`([A-Za-z0-9_][A-Za-z0-9_./-]*/[A-Za-z0-9_./-]*\.(?:h|c|cc|cpp|py|md|sh|json|txt|toml))`")
LINK = re.compile(r"\]\(([^)\s#]*)(#[^)\s]*)?\)")
SEARCH_DIRS = ("", "src", "include", "include/hanpu", "python")


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation other than '-' and '_' dropped, spaces -> '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def lines_outside_fences(text):
    """(line number, line) for every line not inside a ``` fenced block."""
    fenced = False
    for n, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield n, line


_anchors = {}  # document path -> its headings' slugs


def anchors(path):
    if path not in _anchors:
        with open(path, encoding="utf-8") as f:
            _anchors[path] = {slug(line.lstrip("#")) for _, line in lines_outside_fences(f.read())
                              if line.startswith("#")}
    return _anchors[path]


def check(doc, root, counts):
    problems = []
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    here = os.path.dirname(doc)
    for n, line in lines_outside_fences(text):
        for m in LINK.finditer(line):
            target, anchor = m.group(1), m.group(2)
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            counts["links"] += 1
            path = os.path.normpath(os.path.join(here, target)) if target else doc
            if not os.path.exists(path):
                problems.append(f"{doc}:{n}: link to a missing file: {target}")
            elif anchor and path.endswith(".md") and anchor[1:] not in anchors(path):
                problems.append(f"{doc}:{n}: link to a missing heading: {target}{anchor}")
        for m in SOURCE_PATH.finditer(line):
            name = m.group(1)
            counts["paths"] += 1
            if not any(os.path.exists(os.path.join(d, name))
                       for d in [os.path.join(root, s) for s in SEARCH_DIRS] + [here]):
                problems.append(f"{doc}:{n}: names a file that is not in the tree: {name}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("docs", nargs="*")
    a = ap.parse_args()
    root = os.path.normpath(a.root)
    docs = a.docs or [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    problems, counts = [], {"links": 0, "paths": 0}
    for d in docs:
        if not os.path.isfile(d):
            print(f"{d}: no such document", file=sys.stderr)
            return 2
        problems += check(d, root, counts)
    for p in problems:
        print(p)
    print(f"{len(docs)} documents, {counts['links']} relative links, {counts['paths']} source paths, "
          f"{len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
