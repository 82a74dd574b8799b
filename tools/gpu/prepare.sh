#!/bin/sh
# Builds kb for the GPU machine here (release, CUDA, sm_90a) and gathers what
# a run there needs into .devcarry/ (ignored by git, carried by the device
# tool): binaries, the two shared libraries the GPU machine lacks (simdjson,
# fmt), and a copy of ../shared/flashinfer-trace.
# usage: tools/gpu/prepare.sh      then run tools/gpu/on_device.sh there with carry ['.devcarry']
set -eu
cd "$(dirname "$0")/../.."
tools/setup.sh
if [ -f build-gpu/build.ninja ]; then :; else
  meson setup build-gpu -Dbuildtype=release -Dcuda=enabled -Dfuzz=disabled -Dtests=true >/dev/null
fi
ninja -C build-gpu >/dev/null
rm -rf .devcarry
mkdir -p .devcarry/bin .devcarry/lib .devcarry/shared
cp build-gpu/tools/kb/kb .devcarry/bin/
for t in build-gpu/tests/gpu/test_*; do if [ -f "$t" ] && [ -x "$t" ]; then cp "$t" .devcarry/bin/; fi; done
strip .devcarry/bin/* 2>/dev/null || true
for lib in libsimdjson.so.14 libfmt.so.9; do cp -L "/usr/lib/x86_64-linux-gnu/$lib" .devcarry/lib/; done
cp -r ../shared/flashinfer-trace .devcarry/shared/
du -sh .devcarry
