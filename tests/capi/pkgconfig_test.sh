#!/bin/sh
# kb.pc names the folders kb is installed to: this build is installed into a scratch folder
# (meson install --destdir, nothing rebuilt), then `pkg-config --cflags --libs kb` through
# PKG_CONFIG_PATH alone must point into it, and a C program built with those flags alone must
# compile, link and run against the installed libkb. Skips (exit 77) without pkg-config or a C
# compiler.
#
# Usage: pkgconfig_test.sh MESON BUILD_DIR SCRATCH_DIR CC
set -eu
meson=$1
build=$2
scratch=$3
cc=$4
if ! command -v pkg-config >/dev/null 2>&1; then
  echo "skipped: no pkg-config"
  exit 77
fi
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "skipped: no C compiler ($cc)"
  exit 77
fi
rm -rf "$scratch"
mkdir -p "$scratch"
stage=$scratch/stage
"$meson" install -C "$build" --no-rebuild --skip-subprojects --quiet --destdir "$stage" >"$scratch/install.log" 2>&1 || {
  echo "FAIL: meson install --destdir:"
  cat "$scratch/install.log"
  exit 1
}
pc=$(find "$stage" -name kb.pc -path '*/pkgconfig/*' | head -n 1)
if [ -z "$pc" ]; then
  echo "FAIL: no kb.pc installed under $stage"
  exit 1
fi
pcdir=$(dirname "$pc")
status=0

flags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs kb)
echo "pkg-config --cflags --libs kb: $flags"
prefix=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=prefix kb)
libdir=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=libdir kb)
includedir=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=includedir kb)
case $(cd "$prefix" && pwd -P) in
  "$(cd "$stage" && pwd -P)"/*) echo "ok   the prefix lies in the installed tree: $prefix" ;;
  *) echo "FAIL: the prefix $prefix is not under $stage"; status=1 ;;
esac
if [ -f "$includedir/kb/kb.h" ]; then echo "ok   includedir holds kb/kb.h"; else echo "FAIL: no $includedir/kb/kb.h"; status=1; fi
if ls "$libdir"/libkb.so* >/dev/null 2>&1; then echo "ok   libdir holds libkb"; else echo "FAIL: no libkb in $libdir"; status=1; fi

cat >"$scratch/use_kb.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <kb/kb.h>
int main(void) {
  kb_context* ctx = NULL;
  if (kb_abi_version() != KB_ABI_VERSION) return 1;
  if (kb_context_create(NULL, KB_ABI_VERSION, &ctx) != KB_OK) return 1;
  kb_context_destroy(ctx);
  printf("kb %s\n", kb_version());
  return strcmp(kb_version(), KB_VERSION_STRING) == 0 ? 0 : 1;
}
C
# shellcheck disable=SC2086  # the flags are words
if "$cc" -std=c99 -Wall -Werror -o "$scratch/use_kb" "$scratch/use_kb.c" $flags 2>"$scratch/cc.log"; then
  echo "ok   a C program compiles and links with pkg-config's flags alone"
  if out=$(LD_LIBRARY_PATH=$libdir "$scratch/use_kb"); then
    echo "ok   it runs against the installed libkb: $out"
  else
    echo "FAIL: the program failed against $libdir: $out"
    status=1
  fi
else
  echo "FAIL: compiling with pkg-config's flags:"
  cat "$scratch/cc.log"
  status=1
fi
rm -rf "$stage"
exit $status
