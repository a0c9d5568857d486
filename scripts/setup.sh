#!/usr/bin/env bash
# Installs what tessera needs on a fresh Debian/Ubuntu machine (idempotent, quiet when all is there).
set -euo pipefail
pkgs=(build-essential cmake ninja-build ccache pkg-config git python3 python3-pip unzip
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
      libspdlog-dev libfmt-dev libyaml-cpp-dev libgtest-dev libgmock-dev libopenblas-openmp-dev
      libpcre2-dev nlohmann-json3-dev prometheus yamllint prometheus-cpp-dev libboost-dev libssl-dev curl
      hipcc libamdhip64-dev rocm-device-libs)  # hipcc: scripts/hip-check.sh (HIP drift check)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The prometheus package is here for promtool and the end-to-end scrape test; on a systemd
  # machine it also starts a server that nobody asked for.
  if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null; then
    $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
fi
# The OpenAI API's end-to-end test drives tesserad with the official openai client.
if ! python3 -c "import openai" >/dev/null 2>&1; then
  echo "setup: pip install openai"
  python3 -m pip install -q openai || python3 -m pip install -q --break-system-packages openai
fi
