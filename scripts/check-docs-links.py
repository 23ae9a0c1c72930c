#!/usr/bin/env python3
"""Checks the relative links of keyer's Markdown pages.

Every `[text](target)` and `![alt](target)` of every Markdown file in the repository (the files
git tracks, and the untracked ones it does not ignore; without git, every *.md file outside
build*/, out/ and dot folders) whose target is not a URL must name a file or folder that
exists, relative to the page; a `#anchor` on a Markdown target (or a bare `#anchor`) must be
one of that page's headings, as GitHub makes them (lower case, punctuation other than `-` and
`_` dropped, spaces as `-`, a repeated heading with `-1`, `-2`...). Links inside code (fenced
blocks, inline `code`) are not links and are skipped.

Usage: scripts/check-docs-links.py [ROOT]       (default: the repository above this script)
Prints each broken link as PAGE:LINE: TARGET (what is wrong), then a summary line. Exit status
0 when every link resolves, 1 otherwise. ctest runs it as check_docs_links. Python 3 standard
library only.
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def markdown_files(root):
    """The Markdown files under root, relative to it."""
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "-co", "--exclude-standard", "--", "*.md"],
            check=True, capture_output=True, text=True).stdout
        return sorted(p for p in out.splitlines() if os.path.isfile(os.path.join(root, p)))
    except (OSError, subprocess.CalledProcessError):
        found = []
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs
                       if not x.startswith(".") and not x.startswith("build") and x != "out"]
            found += [os.path.relpath(os.path.join(d, f), root) for f in files if f.endswith(".md")]
        return sorted(found)


def prose_lines(text):
    """(line number, line) of the lines outside fenced code, with inline code blanked."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, INLINE_CODE.sub("", line)


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    """The anchors of the Markdown file at path (cached)."""
    if path not in _anchors:
        seen = {}
        found = set()
        with open(path, encoding="utf-8") as f:
            for _, line in prose_lines(f.read()):
                m = HEADING.match(line)
                if not m:
                    continue
                base = slug(m.group(2))
                k = seen.get(base, 0)
                seen[base] = k + 1
                found.add(base if k == 0 else f"{base}-{k}")
        _anchors[path] = found
    return _anchors[path]


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1
                           else os.path.join(os.path.dirname(__file__), ".."))
    pages = markdown_files(root)
    broken = 0
    links = 0
    for page in pages:
        path = os.path.join(root, page)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for n, line in prose_lines(text):
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", target):
                    continue  # a URL (https:, mailto:, ...)
                links += 1
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                    if file_part else path
                why = None
                if not os.path.exists(dest):
                    why = "no such file"
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    why = f"no heading #{anchor} in {os.path.relpath(dest, root)}"
                if why:
                    print(f"{page}:{n}: {target} ({why})")
                    broken += 1
    print(f"check-docs-links: {len(pages)} pages, {links} relative links, {broken} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
