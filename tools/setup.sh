#!/bin/sh
# Installs what kb builds and tests with, from Debian's packages, if missing.
# Safe to run repeatedly; needs root or sudo only when something is missing.
set -eu
# python3-torch (Debian: 1.13, CPU): `kb bench --reference torch` and its tests
# rustc, golang-go: the Rust and Go examples (examples/rust, examples/go), built and run by the tests
# chromium: the report browser test opens kb report's pages headless (about 120 MB, half a minute to install)
packages="meson ninja-build pkg-config g++ python3 python3-jsonschema libsimdjson-dev doctest-dev libfmt-dev libdlpack-dev clang python3-torch rustc golang-go chromium"
missing=""
for p in $packages; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
# libFuzzer's runtime ships with clang's compiler-rt.
if ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  missing="$missing libclang-rt-dev"
fi
[ -z "$missing" ] && exit 0
echo "setup: installing$missing" >&2
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
