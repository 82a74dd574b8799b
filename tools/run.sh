#!/bin/sh
# kb's main job on its bundled dataset (kernels/): build kb, list the GPUs it
# can use (or say why none), and validate every bundled definition and
# workload. `kb bench` joins here once it exists.
set -eu
cd "$(dirname "$0")/.."
tools/setup.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
build/tools/kb/kb --version
build/tools/kb/kb devices || echo "(no GPU: kb runs its CPU paths)"
exec build/tools/kb/kb validate kernels "$@"
