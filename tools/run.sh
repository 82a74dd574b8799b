#!/bin/sh
# kb's main job on its bundled dataset (kernels/): build kb, list the GPUs it
# can use (or say why none), validate the bundled definitions and workloads,
# then `kb bench` them: every solution that can run here (CUDA ones on a GPU,
# kb's CPU ones otherwise) judged against the oracle, timed, traces written
# to kb-results/.
set -eu
cd "$(dirname "$0")/.."
tools/setup.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
build/tools/kb/kb --version
build/tools/kb/kb devices || echo "(no GPU: kb runs its CPU paths)"
build/tools/kb/kb validate -q kernels
exec build/tools/kb/kb bench "$@"
