#!/bin/bash
# Run here (no GPU needed; nvcc 13 and pip access to PyPI): fills .whl/flashinfer/ (ignored by git) with what
# `bash bench/run.sh flashinfer` installs on the GPU machine (name .whl in the device call's carry list):
#   flashinfer-min.tar.gz   flashinfer-python, trimmed to the kernels bench/flashinfer_side_by_side.py measures, with
#                           their JIT modules built here for sm_90a (bench/flashinfer_precompile.py)
#   apache_tvm_ffi-*-cp312-*.whl  the FFI library FlashInfer's modules are loaded through, for the GPU machine's
#                           Python 3.12 (everything else `import flashinfer` needs is installed there)
# The build imports FlashInfer with a Python that has torch (any build of it: FLASHINFER_BUILD_PYTHON, default
# python3); the modules it compiles link only the CUDA runtime and tvm-ffi's C ABI, not Python, so a Python other
# than the GPU machine's builds them. Compiles run one at a time under nice (MAX_JOBS=1).
# FLASHINFER_PREPARE_DIR keeps the work folder (the unpacked package, the build tree) for a later run, which then
# rebuilds only what changed; by default a temporary one is removed at the end.
# FLASHINFER_MODULES names a subset of flashinfer_precompile.py's modules (comma-separated; default all).
# usage: [FLASHINFER_BUILD_PYTHON=PY] [FLASHINFER_CUDA_ARCH_LIST=9.0a] [FLASHINFER_PREPARE_DIR=DIR]
#        [FLASHINFER_MODULES=a,b] bench/flashinfer_prepare.sh [DEST]
set -eu
cd "$(dirname "$0")/.."
dest=${1:-.whl/flashinfer}
py=${FLASHINFER_BUILD_PYTHON:-python3}
FLASHINFER_VERSION=0.7.2.post1
TVM_FFI_VERSION=0.1.15.post2
plat="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
if [ -n "${FLASHINFER_PREPARE_DIR:-}" ]; then
  work=$FLASHINFER_PREPARE_DIR
else
  work=$(mktemp -d /tmp/flashinfer_prepare.XXXXXX)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$dest" "$work/dl" "$work/helpers"
rm -rf "$work/check" "$work/ws-check"
rm -f "$dest"/apache_tvm_ffi-*.whl "$dest"/flashinfer-min.tar.gz
# shellcheck disable=SC2086
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $plat \
    -d "$dest" "apache-tvm-ffi==$TVM_FFI_VERSION"
if [ ! -f "$work/site/flashinfer/__init__.py" ]; then  # a kept work folder's package stays (its build is current)
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$work/dl" "flashinfer-python==$FLASHINFER_VERSION"
  pyver=$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  # shellcheck disable=SC2086
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp $plat \
      -d "$work/dl" "apache-tvm-ffi==$TVM_FFI_VERSION"
  "$py" -m pip install -q --no-index --no-deps --no-compile --target "$work/site" "$work"/dl/*.whl
fi
# what the import and the build need beside torch, where the build Python lacks it
for pkg in packaging:packaging ninja:ninja jinja2:jinja2 filelock:filelock numpy:numpy click:click einops:einops \
           requests:requests tabulate:tabulate tqdm:tqdm pynvml:nvidia-ml-py; do
  "$py" -c "import ${pkg%%:*}" 2>/dev/null || "$py" -m pip download -q -d "$work/helpers" "${pkg##*:}"
done
if ls "$work"/helpers/* > /dev/null 2>&1 && [ ! -d "$work/helper-site" ]; then
  "$py" -m pip install -q --no-index --find-links "$work/helpers" --no-compile --target "$work/helper-site" \
      "$work"/helpers/*
fi
export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"
export PYTHONPATH="$work/site:$work/helper-site" FLASHINFER_WORKSPACE_BASE="$work/ws" MAX_JOBS=1
export FLASHINFER_CUDA_ARCH_LIST=${FLASHINFER_CUDA_ARCH_LIST:-9.0a}
modules=()
[ -n "${FLASHINFER_MODULES:-}" ] && modules=(--modules "$FLASHINFER_MODULES")
nice -n 15 "$py" bench/flashinfer_precompile.py ${modules[@]+"${modules[@]}"} --pack "$dest/flashinfer-min.tar.gz"
# the tarball alone, unpacked elsewhere: every module's prebuilt library loads without compiling
mkdir -p "$work/check"
tar xzf "$dest/flashinfer-min.tar.gz" -C "$work/check"
cp -r "$work"/site/tvm_ffi* "$work/check/"
PYTHONPATH="$work/check:$work/helper-site" FLASHINFER_WORKSPACE_BASE="$work/ws-check" \
    "$py" bench/flashinfer_precompile.py ${modules[@]+"${modules[@]}"} --check-aot
ls -l "$dest"
du -sh "$dest"
