#!/usr/bin/env python3
"""Holds every #include of tessera's sources to the layers of docs/architecture.md ("Layers").

A file may include its own folder and the folders of lower layers, except where a rule below says
less: kernels see only base/ and the Backend seam's front door (runtime/backend.h); in runtime/
only the composition root names concrete backends (kernels/); server/ never does. Exit 0 when every include keeps
the rules; otherwise one line per violation (file:line, the include, the rule) and exit 1.

usage: check-layering.py [ROOT]   (ROOT defaults to the checkout this script is in)
"""
import os
import re
import sys

# Folders from the bottom up; a folder's rank is its layer. Folders of one rank do not include
# each other. A file's folder is the longest prefix of its path listed here.
LAYERS = [
    ["base"],
    ["runtime/model_io"],
    ["runtime/backend"],  # the seam's vocabulary; runtime/backend.h is its front door
    ["kernels", "runtime/jinja", "runtime/placement"],
    ["runtime/tokenizer", "runtime/tuning", "runtime/kv_cache", "runtime/request"],
    ["runtime/output"],
    ["runtime/scheduler", "runtime/runner"],
    ["runtime/model"],
    ["runtime"],  # the engine and the composition root
    ["server"],
    ["tools"],
]
RANK = {folder: rank for rank, folders in enumerate(LAYERS) for folder in folders}
# Files that belong to another folder's layer than their directory says.
FILE_FOLDER = {"runtime/backend.h": "runtime/backend"}
# Our own include roots (anything else is a system or third-party header).
OWN = ("base/", "runtime/", "kernels/", "server/", "tools/")
# The composition root: the one place in runtime/ that names concrete backends.
COMPOSITION_ROOT = {"runtime/backend_factory.cc", "runtime/backend_factory.h"}
SOURCES = (".h", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(path):
    if path in FILE_FOLDER:
        return FILE_FOLDER[path]
    parts = path.split("/")[:-1]
    while parts:
        candidate = "/".join(parts)
        if candidate in RANK:
            return candidate
        parts.pop()
    return None


def allowed(src, inc):
    """None when `src` may include `inc`, else the rule it breaks."""
    src_folder, inc_folder = folder_of(src), folder_of(inc)
    if src_folder is None or inc_folder is None:
        return None  # not a layered file (tests, proto)
    if src_folder == "kernels":
        if inc.startswith(("base/", "kernels/")) or inc == "runtime/backend.h":
            return None
        return "kernels include only base/, kernels/ and runtime/backend.h"
    if inc_folder == "kernels" and src_folder.startswith("runtime"):
        if src in COMPOSITION_ROOT:
            return None
        return "only the composition root (runtime/backend_factory.*) names concrete backends"
    if inc_folder == "kernels" and src_folder == "server":
        return "server/ is transport only: it reaches backends through runtime/"
    if src_folder == inc_folder:
        return None
    if RANK[inc_folder] < RANK[src_folder]:
        return None
    return f"{src_folder} (layer {RANK[src_folder]}) may not include {inc_folder} (layer {RANK[inc_folder]})"


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    violations, files = [], 0
    for top in ("base", "runtime", "kernels", "server", "tools"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                files += 1
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or not m.group(1).startswith(OWN):
                            continue
                        rule = allowed(path, m.group(1))
                        if rule:
                            violations.append(f"{path}:{lineno}: #include \"{m.group(1)}\": {rule}")
    for v in violations:
        print(v)
    print(f"check-layering: {files} files, {len(violations)} violation(s)")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
