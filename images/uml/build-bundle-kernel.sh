#!/usr/bin/env bash
# Build the bundle's guest kernel (make bundle): build-kernel.sh with kernel.config and
# bundle.config over it (a later line wins), into a cache of its own, so that it never moves the
# linux.uml link `wearlab run` boots and the main kernel's key (which hashes build-kernel.sh) does
# not change. Its patches are the main kernel's (patches/) and its own (bundle-patches/, numbered
# after them), so its source tree is its own too (extracted once, ~1.7 GB).
# Prints the kernel's path on its last line, as build-kernel.sh does.
#
# usage: build-bundle-kernel.sh CACHE_DIR        (/var/cache/wearlab/kernel-bundle)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${1:?usage: build-bundle-kernel.sh CACHE_DIR}
recipe="$cache/recipe"
mkdir -p "$recipe"
cp "$here/build-kernel.sh" "$recipe/build-kernel.sh"
rm -rf "$recipe/patches" && cp -r "$here/patches" "$recipe/patches"
cp "$here"/bundle-patches/*.patch "$recipe/patches/"
# One line per option, its last value, in first-seen order (build-kernel.sh checks each).
sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/kernel.config" "$here/bundle.config" |
  awk -F= '{ if (!($1 in v)) order[n++] = $1; v[$1] = $0 } END { for (i = 0; i < n; i++) print v[order[i]] }' \
  > "$recipe/kernel.config.tmp"
mv "$recipe/kernel.config.tmp" "$recipe/kernel.config"
exec "$recipe/build-kernel.sh" "$cache"
