#!/usr/bin/env bash
# Gathers what a kernels-only build (-DDEEPINFER_KERNELS_ONLY=ON) needs beyond a compiler, CMake
# and the CUDA toolkit, from this machine's Debian packages (libfmt-dev, libgtest-dev) into
# .gpudeps/ (git-ignored): the lent GPU machine starts bare and reaches no package registry.
# Run it here, then name .gpudeps in the device run's `carry`; scripts/gpu_check.sh uses it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dst="$root/.gpudeps"
arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
lib=/usr/lib/$arch
rm -rf "$dst"
mkdir -p "$dst/include" "$dst/lib/$arch/cmake"
for d in fmt gtest gmock; do
  [ -d /usr/include/$d ] && cp -r /usr/include/$d "$dst/include/"
done
for d in fmt GTest; do
  cp -r "$lib/cmake/$d" "$dst/lib/$arch/cmake/"
done
cp -P "$lib"/libfmt.so* "$dst/lib/$arch/"
cp "$lib"/libgtest*.a "$lib"/libgmock*.a "$dst/lib/$arch/" 2>/dev/null || cp "$lib"/libgtest*.a "$dst/lib/$arch/"
du -sh "$dst"
