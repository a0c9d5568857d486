#!/usr/bin/env bash
# Makes a relocatable bundle of tessera binaries: DIR/bin/<binaries> and DIR/lib/<every non-system
# shared library they load, as ldd resolves them here>. Run it on the build machine; on the target
#   LD_LIBRARY_PATH=DIR/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib DIR/bin/<binary>
# Left out, because the target must provide its own: the C/C++ runtime (libc, libm, libstdc++,
# libgcc_s, ld-linux, libpthread, librt, libdl), the driver (libcuda, libnvidia-*) and cuBLAS /
# cuBLASLt (the host's, of the same CUDA major version). The CUDA runtime is linked statically.
#
# usage: deploy/bundle.sh [-o DIR] BINARY...      (DIR defaults to .bundle, which git ignores)
set -euo pipefail

out=.bundle
if [[ "${1:-}" == "-o" ]]; then
  out=$2
  shift 2
fi
if [[ $# -eq 0 ]]; then
  echo "usage: $0 [-o DIR] BINARY..." >&2
  exit 2
fi

excluded='^(linux-vdso|libc\.so|libm\.so|libstdc\+\+\.so|libgcc_s\.so|ld-linux|libpthread\.so|librt\.so|libdl\.so|libcuda\.so|libnvidia-|libcublas|libcublasLt)'

mkdir -p "$out/bin" "$out/lib"
for bin in "$@"; do
  [[ -x "$bin" ]] || { echo "bundle: $bin is not an executable file" >&2; exit 1; }
  cp -L "$bin" "$out/bin/"
  # "name => path (addr)" lines; a "not found" library fails the bundle rather than the target.
  while read -r name arrow path _; do
    [[ "$arrow" == "=>" ]] || continue
    if [[ "$path" == "not" ]]; then
      echo "bundle: $bin needs $name, which is not found here" >&2
      exit 1
    fi
    [[ "$name" =~ $excluded ]] && continue
    cp -L -u "$path" "$out/lib/$name"
  done < <(ldd "$bin")
done

echo "bundle: $out/bin: $(ls "$out/bin" | wc -l) binaries; $out/lib: $(ls "$out/lib" | wc -l) libraries," \
  "$(du -sh "$out" | cut -f1)"
