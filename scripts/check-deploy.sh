#!/usr/bin/env bash
# Checks deploy/ without Docker or a cluster (neither runs here):
#   - every YAML file passes yamllint (strict, deploy/.yamllint);
#   - each Dockerfile builds with the scripts' steps: it runs scripts/setup.sh and
#     scripts/build.sh, never cmake or a compiler itself, and every file it COPYs from the
#     repository exists;
#   - kustomizations name files that exist;
#   - the Grafana dashboard is JSON and its PromQL parses (promtool), prometheus.yml is valid
#     (promtool check config), compose.yaml passes `docker compose config` (no engine needed),
#     and the systemd unit passes systemd-analyze verify.
# Tools that are missing (yamllint is required; promtool, docker compose, systemd-analyze are
# optional) are named.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
deploy="$root/deploy"
failed=0
fail() { echo "check-deploy: $*" >&2; failed=1; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT

# --- YAML --------------------------------------------------------------------------------------
if ! command -v yamllint >/dev/null 2>&1; then
  echo "check-deploy: yamllint not found (apt-get install yamllint; scripts/setup.sh installs it)" >&2
  exit 2
fi
yamllint -s -c "$deploy/.yamllint" "$deploy" || fail "yamllint found problems"

# --- Dockerfiles: the scripts' steps -----------------------------------------------------------
for df in "$deploy"/docker/Dockerfile.*; do
  case "$df" in *.dockerignore) continue ;; esac
  name="${df#"$root"/}"
  # RUN instructions with their continuation lines joined.
  runs="$(awk '/^[[:space:]]*#/ { next }
               { line = line $0 }
               /\\[[:space:]]*$/ { sub(/\\[[:space:]]*$/, "", line); next }
               { print line; line = "" }' "$df" | grep -E '^[[:space:]]*RUN[[:space:]]' || true)"
  grep -Eq '(^|[[:space:];&])scripts/setup\.sh' <<<"$runs" || fail "$name: no RUN calls scripts/setup.sh"
  grep -Eq '(^|[[:space:];&=])scripts/build\.sh' <<<"$runs" \
    || fail "$name: no RUN calls scripts/build.sh"
  if grep -Eq '(^|[[:space:];&])(cmake|ninja|make|g\+\+|gcc|clang\+\+|hipcc|nvcc)([[:space:]]|$)' <<<"$runs"; then
    fail "$name: builds without the scripts (cmake/ninja/make/compiler in a RUN):"
    grep -E '(^|[[:space:];&])(cmake|ninja|make|g\+\+|gcc|clang\+\+|hipcc|nvcc)([[:space:]]|$)' <<<"$runs" >&2
  fi
  grep -Eq '^HEALTHCHECK[[:space:]]' "$df" || fail "$name: no HEALTHCHECK"
  grep -Eq '^USER[[:space:]]+[^r0]' "$df" || fail "$name: no non-root USER"
  [ "$(grep -Ec '^FROM[[:space:]]' "$df")" -ge 2 ] || fail "$name: not multi-stage"
  # COPY sources from the build context (not --from=stage) must exist.
  while read -r src; do
    [ -e "$root/$src" ] || fail "$name: COPY source $src does not exist"
  done < <(awk '$1 == "COPY" && $2 !~ /^--from=/ { for (i = 2; i < NF; ++i) if ($i !~ /^--/) print $i }' "$df")
done

# --- kustomize: referenced files exist ---------------------------------------------------------
while read -r k; do
  dir="$(dirname "$k")"
  python3 - "$k" "$dir" <<'PY' || fail "${k#"$root"/}: names a missing file"
import os, sys, yaml
k, d = sys.argv[1], sys.argv[2]
doc = yaml.safe_load(open(k))
missing = [r for r in doc.get("resources", []) if not os.path.exists(os.path.join(d, r))]
missing += [p["path"] for p in doc.get("patches", []) if "path" in p and not os.path.exists(os.path.join(d, p["path"]))]
for m in missing:
    print(f"  missing: {m}", file=sys.stderr)
sys.exit(1 if missing else 0)
PY
done < <(find "$deploy/k8s" -name kustomization.yaml)

# --- Grafana dashboards: JSON, and PromQL that parses --------------------------------------------
for dash in "$deploy"/grafana/dashboards/*.json; do
  python3 - "$dash" "$tmp/rules.yml" <<'PY' || fail "${dash#"$root"/}: not a dashboard"
import json, sys, yaml
d = json.load(open(sys.argv[1]))
exprs = []
def walk(panels):
    for p in panels:
        exprs.extend(t["expr"] for t in p.get("targets", []) if "expr" in t)
        walk(p.get("panels", []))
walk(d["panels"])
if not exprs:
    sys.exit("no queries")
# Grafana's variables, replaced by values that parse, so promtool can check the queries.
def concrete(e):
    return e.replace("$__rate_interval", "5m").replace("$instance", ".*").replace("$job", ".*")
rules = {"groups": [{"name": "dashboard", "rules": [
    {"record": f"dashboard:query{i}", "expr": concrete(e)} for i, e in enumerate(exprs)]}]}
yaml.safe_dump(rules, open(sys.argv[2], "w"))
PY
  if command -v promtool >/dev/null 2>&1 && [ -f "$tmp/rules.yml" ]; then
    promtool check rules "$tmp/rules.yml" >"$tmp/rules.log" 2>&1 \
      || { fail "${dash#"$root"/}: a query does not parse"; cat "$tmp/rules.log" >&2; }
  fi
done

# --- Compose file ------------------------------------------------------------------------------
if docker compose version >/dev/null 2>&1; then
  docker compose -f "$deploy/compose.yaml" --profile rocm --profile cuda config -q \
    || fail "deploy/compose.yaml: docker compose config failed"
elif command -v docker-compose >/dev/null 2>&1; then
  # Compose v1 predates the top-level `name:`; it checks the rest.
  grep -v '^name:' "$deploy/compose.yaml" > "$tmp/compose.yaml"
  docker-compose --project-directory "$deploy" -f "$tmp/compose.yaml" --profile rocm \
    --profile cuda config -q || fail "deploy/compose.yaml: docker-compose config failed"
else
  echo "check-deploy: no docker compose: deploy/compose.yaml checked by yamllint only" >&2
fi

# --- Prometheus config, systemd unit -------------------------------------------------------------
if command -v promtool >/dev/null 2>&1; then
  promtool check config "$deploy/prometheus/prometheus.yml" >"$tmp/prom.log" 2>&1 \
    || { fail "deploy/prometheus/prometheus.yml is not a valid Prometheus config"; cat "$tmp/prom.log" >&2; }
else
  echo "check-deploy: promtool not found: Prometheus config and dashboard queries not checked" >&2
fi
if command -v systemd-analyze >/dev/null 2>&1; then
  # The unit as installed, with a binary that exists here.
  sed 's|^ExecStart=/opt/tessera/bin/tesserad|ExecStart=/bin/true|' \
    "$deploy/systemd/tesserad.service" > "$tmp/tesserad.service"
  out="$(systemd-analyze verify "$tmp/tesserad.service" 2>&1 || true)"
  [ -z "$out" ] || { fail "deploy/systemd/tesserad.service:"; echo "$out" >&2; }
else
  echo "check-deploy: systemd-analyze not found: the systemd unit is not checked" >&2
fi

if [ "$failed" -ne 0 ]; then exit 1; fi
echo "check-deploy: deploy/ OK"
