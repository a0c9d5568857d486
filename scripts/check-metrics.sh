#!/usr/bin/env bash
# Lints a Prometheus exposition with `promtool check metrics` (Debian package: prometheus).
#   scripts/check-metrics.sh http://127.0.0.1:8002/metrics   # a live scrape
#   scripts/check-metrics.sh metrics.prom                   # a saved one ('-': stdin)
#   ... [--require METRIC ...]   also fail unless each METRIC has a sample
# Exit 0 when promtool reports nothing; otherwise its findings and a non-zero exit.
set -euo pipefail
usage() { echo "usage: $0 URL|FILE|- [--require METRIC ...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
source="$1"; shift
required=()
while [ $# -gt 0 ]; do
  case "$1" in
    --require) [ $# -ge 2 ] || usage; required+=("$2"); shift 2 ;;
    *) usage ;;
  esac
done
if ! command -v promtool >/dev/null 2>&1; then
  echo "check-metrics: promtool not found (apt-get install prometheus; scripts/setup.sh installs it)" >&2
  exit 2
fi

tmp="$(mktemp)"; trap 'rm -f "$tmp"' EXIT
case "$source" in
  http://*|https://*)
    if command -v curl >/dev/null 2>&1; then
      curl -fsS --max-time 10 "$source" -o "$tmp"
    else
      python3 - "$source" "$tmp" <<'PY'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as r, open(sys.argv[2], "wb") as out:
    out.write(r.read())
PY
    fi ;;
  -) cat > "$tmp" ;;
  *) [ -f "$source" ] || { echo "check-metrics: no such file: $source" >&2; exit 2; }
     cp "$source" "$tmp" ;;
esac

if ! grep -q '^[a-zA-Z_:]' "$tmp"; then
  echo "check-metrics: $source has no samples" >&2
  exit 1
fi
rc=0
findings="$(promtool check metrics < "$tmp" 2>&1)" || rc=$?
if [ "$rc" -ne 0 ] || [ -n "$findings" ]; then
  echo "check-metrics: promtool check metrics on $source (exit $rc):" >&2
  echo "$findings" >&2
  exit $(( rc == 0 ? 1 : rc ))
fi
for metric in "${required[@]}"; do
  if ! grep -Eq "^${metric}(\{| )" "$tmp"; then
    echo "check-metrics: $source has no sample of $metric" >&2
    exit 1
  fi
done
echo "check-metrics: $source OK ($(grep -c '^# TYPE ' "$tmp") families, $(grep -c '^[a-zA-Z_:]' "$tmp") samples)"
