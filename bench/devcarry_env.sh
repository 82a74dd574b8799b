# Sourced (from the repository root) by bench/device_build.sh and bench/run.sh on the GPU machine: unpacks
# bench/prepare.sh's packages into a private prefix once (never into /), points pkg-config, the compilers and the
# loader at it, and sets
#   $build   the build folder (KB_BUILD, default build-bench)
#   $shared  the shared data (KB_SHARED_DIR, default .devcarry/shared when prepare.sh made it, else ../shared)
#   $out     where results go ($OUT, else ./bench-out), created
prefix=${KB_DEVCARRY_PREFIX:-$PWD/.devcarry/prefix}
if [ -d .devcarry/debs ] && [ ! -f "$prefix/.unpacked" ]; then
  mkdir -p "$prefix"
  for deb in .devcarry/debs/*.deb; do dpkg -x "$deb" "$prefix" || return 1; done
  # the .pc files name prefix=/usr: rewrite them to the private prefix
  for pc in "$prefix"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
    sed -i -e "s|^prefix=/usr|prefix=$prefix/usr|" -e "s|^exec_prefix=/usr|exec_prefix=$prefix/usr|" "$pc"
  done
  touch "$prefix/.unpacked"
fi
if [ -d "$prefix/usr" ]; then
  export PKG_CONFIG_PATH="$prefix/usr/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  # doctest and dlpack ship headers only, found by cpp.has_header: the compilers' own search path (gcc, and nvcc's
  # host preprocessing, read CPATH)
  export CPATH="$prefix/usr/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # where meson finds no pkg-config it asks cmake, whose config files the -dev packages ship too
  export CMAKE_PREFIX_PATH="$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
fi
build=${KB_BUILD:-build-bench}
if [ -n "${KB_SHARED_DIR:-}" ]; then shared=$KB_SHARED_DIR
elif [ -d .devcarry/shared/flashinfer-trace ]; then shared=$PWD/.devcarry/shared
else shared=$(cd .. && pwd)/shared; fi
export KB_SHARED_DIR="$shared"
# kb's clock sampler for bench/torch_timing.py (ctypes loads libkb_clock_sampler.so by name)
case $build in /*) builddir=$build ;; *) builddir=$PWD/$build ;; esac
export LD_LIBRARY_PATH="$builddir/bench${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
out=${OUT:-$PWD/bench-out}
mkdir -p "$out"
