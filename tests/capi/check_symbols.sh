#!/bin/sh
# The exported ABI of libkb: every dynamic symbol begins with kb_, the set
# equals capi/kb.symbols (committed, sorted) and the functions kb.h declares,
# and the SONAME is libkb.so.<ABI version>.
#
# Usage: check_symbols.sh LIBKB_SO KB_SYMBOLS KB_H
# When the ABI grows on purpose, regenerate the list with
#   nm -D --defined-only LIBKB_SO | awk '{print $3}' | LC_ALL=C sort > capi/kb.symbols
set -eu
lib=$1
list=$2
header=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0

# Defined dynamic symbols, version suffixes (@@...) dropped.
nm -D --defined-only "$lib" | awk 'NF >= 3 {print $3}' | sed 's/@.*//' | LC_ALL=C sort -u > "$tmp/exported"
if [ ! -s "$tmp/exported" ]; then
  echo "FAIL: $lib exports nothing"
  exit 1
fi
if grep -v '^kb_' "$tmp/exported" > "$tmp/foreign"; then
  echo "FAIL: symbols without the kb_ prefix are exported:"
  cat "$tmp/foreign"
  status=1
fi
if ! diff -u "$list" "$tmp/exported"; then
  echo "FAIL: exported symbols differ from $list (lines with + are exported but not listed)"
  status=1
fi
# Functions declared in kb.h: lines starting with KB_API, name before '('.
grep '^KB_API ' "$header" | sed -E 's/\(.*//; s/.*[ *]//' | LC_ALL=C sort -u > "$tmp/declared"
if ! diff -u "$list" "$tmp/declared"; then
  echo "FAIL: functions declared in kb.h differ from $list (lines with + are declared but not listed)"
  status=1
fi

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
abi=$(sed -n 's/^#define KB_ABI_VERSION \([0-9]*\).*/\1/p' "$header")
if [ "$soname" != "libkb.so.$abi" ]; then
  echo "FAIL: SONAME is '$soname', expected libkb.so.$abi (KB_ABI_VERSION $abi)"
  status=1
fi

if [ $status -eq 0 ]; then
  echo "ok: $(wc -l < "$tmp/exported") kb_* symbols, SONAME $soname"
fi
exit $status
