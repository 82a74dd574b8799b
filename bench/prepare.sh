#!/bin/sh
# Run here, before a device call: gathers into .devcarry/ (ignored by git) what the GPU machine lacks to build
# and run kb. The device call carries the working tree and the paths named in its carry list, so name
# '.devcarry' there; bench/device_build.sh builds from these on the GPU machine.
#   .devcarry/debs/    the Debian packages kb builds with (simdjson, fmt, doctest, dlpack) and the runtime
#                      libraries they link (libsimdjson14, libfmt9), fetched with `apt-get download`
#   .devcarry/shared/  a copy of ../shared's flashinfer-trace and backendbench folders (the tests' data)
# usage: bench/prepare.sh
set -eu
cd "$(dirname "$0")/.."
shared=${KB_SHARED_SOURCE:-../shared}
for d in flashinfer-trace backendbench; do
  [ -d "$shared/$d" ] || { echo "prepare.sh: $shared/$d not found (KB_SHARED_SOURCE names another shared folder)" >&2; exit 1; }
done
rm -rf .devcarry
mkdir -p .devcarry/debs .devcarry/shared
(cd .devcarry/debs && apt-get download -q libsimdjson-dev libsimdjson14 libfmt-dev libfmt9 doctest-dev libdlpack-dev)
cp -r "$shared/flashinfer-trace" "$shared/backendbench" .devcarry/shared/
du -sh .devcarry
