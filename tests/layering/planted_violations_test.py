#!/usr/bin/env python3
"""The layering check fails on includes that run up the layers, and passes the same tree without
them: each planted violation must be reported by file and line, and nothing else."""
import os
import subprocess
import sys
import tempfile

CHECK = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "check-layering.py")

CLEAN = {
    "base/status_macros.h": "",
    "runtime/backend.h": '#include "runtime/backend/tensor.h"\n',
    "runtime/backend/tensor.h": '#include "base/status_macros.h"\n',
    "kernels/cpu/cpu_backend.h": '#include "runtime/backend.h"\n#include "base/status_macros.h"\n',
    "runtime/backend_factory.cc": '#include "kernels/cpu/cpu_backend.h"\n',
    "runtime/engine.h": '#include "runtime/runner/step_runner.h"\n',
    "runtime/runner/step_runner.h": '#include "runtime/backend.h"\n#include "runtime/kv_cache/kv_cache.h"\n',
    "runtime/kv_cache/kv_cache.h": '#include "runtime/backend.h"\n',
    "server/daemon.cc": '#include "runtime/engine.h"\n',
}
PLANTED = {
    # a kernel reaching past the seam into the engine
    "kernels/cpu/cpu_backend.h": ('#include "runtime/engine.h"\n', 1),
    # a lower runtime folder including a higher one
    "runtime/kv_cache/kv_cache.h": ('#include "runtime/runner/step_runner.h"\n', 1),
    # a file-reader including the seam above it
    "runtime/model_io/gguf_file.h": ('#include "runtime/backend.h"\n', 1),
    # the engine naming a concrete backend (only the composition root may)
    "runtime/engine.h": ('#include "kernels/cpu/cpu_backend.h"\n', 1),
    # base reaching up
    "base/status_macros.h": ('#include "runtime/backend.h"\n', 1),
    # transport naming a backend
    "server/daemon.cc": ('#include "kernels/cpu/cpu_backend.h"\n', 1),
}


def write_tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)


def run(root):
    return subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as clean:
        write_tree(clean, CLEAN)
        r = run(clean)
        if r.returncode != 0:
            failures.append(f"clean tree rejected:\n{r.stdout}")
    with tempfile.TemporaryDirectory() as planted:
        write_tree(planted, CLEAN)
        for path, (line, _) in PLANTED.items():
            full = os.path.join(planted, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "a") as f:
                f.write(line)
        r = run(planted)
        if r.returncode == 0:
            failures.append("planted violations passed the check")
        reported = [l for l in r.stdout.splitlines() if not l.startswith("check-layering:")]
        for path, (line, _) in PLANTED.items():
            include = line.split('"')[1]
            if not any(l.startswith(path + ":") and include in l for l in reported):
                failures.append(f"not reported: {path} including {include}\n{r.stdout}")
        if len(reported) != len(PLANTED):
            failures.append(f"expected {len(PLANTED)} violations, got {len(reported)}:\n{r.stdout}")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print(f"planted violations: all {len(PLANTED)} reported; the clean tree passes")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
