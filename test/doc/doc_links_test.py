#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The documentation points only inside the tree: every relative Markdown link in README.md
and doc/ names a file that exists (and, with #anchor, a heading that exists), and no file
refers to a design document kept outside the repository (a sibling directory of the
checkout, or a design file that is not in it), which a clone lacks."""
import os
import re
import subprocess
import sys

# What such a reference looks like, spelled in pieces so this file does not match itself.
OUTSIDE = (os.path.join("..", "sha" + "red"), "sha" + "red/DESIGN", "DESIGN" + ".md")
ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def tracked_files():
    r = subprocess.run(["git", "-C", ROOT, "ls-files"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    if r.returncode == 0 and r.stdout:
        return r.stdout.split()
    # Not a git checkout (an unpacked tarball): walk it.
    out = []
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if not x.startswith(".") and not x.startswith("build")]
        out += [os.path.relpath(os.path.join(d, f), ROOT) for f in files]
    return out


def anchors(path):
    """GitHub-style anchors of the Markdown headings in path."""
    out = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"#+\s+(.*)", line)
            if m:
                a = m.group(1).strip().lower()
                a = re.sub(r"[^\w\- ]", "", a).replace(" ", "-")
                out.add(a)
    return out


def main():
    bad = []
    files = tracked_files()
    for rel in files:
        if "/corpus/" in rel:
            continue
        path = os.path.join(ROOT, rel)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if any(p in line for p in OUTSIDE):
                bad.append("%s:%d: points outside the tree: %s" % (rel, n, line.strip()))
        if not rel.endswith(".md"):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target):
                    continue
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                    if file_part else path
                if not os.path.exists(dest):
                    bad.append("%s:%d: link to missing %s" % (rel, n, target))
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    bad.append("%s:%d: no heading for #%s in %s" % (rel, n, anchor, file_part))
    if not os.path.exists(os.path.join(ROOT, "doc", "guides", "design.md")):
        bad.append("doc/guides/design.md is missing")
    for b in bad:
        print(b)
    print("%d problems in %d files" % (len(bad), len(files)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
