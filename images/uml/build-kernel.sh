#!/usr/bin/env bash
# Build wearlab's User-Mode Linux guest kernel from Debian's linux-source-6.12 with the options
# in kernel.config (everything built in). Cached: the binary's name carries the source version
# and a hash of kernel.config and this script, so a changed configuration builds a new kernel
# and an unchanged one costs nothing. Prints the path of the kernel binary on its last line.
#
# usage: build-kernel.sh CACHE_DIR        (e.g. /var/cache/wearlab/kernel)
set -euo pipefail
# Called from make: our own -j, not the caller's jobserver.
unset MAKEFLAGS MFLAGS MAKELEVEL
here=$(cd "$(dirname "$0")" && pwd)
cache=${1:?usage: build-kernel.sh CACHE_DIR}
package=${WEARLAB_KERNEL_SOURCE_PACKAGE:-linux-source-6.12}
tarball=/usr/src/$package.tar.xz
[ -f "$tarball" ] || { echo "build-kernel.sh: $tarball missing (apt-get install $package)" >&2; exit 2; }
version=$(dpkg-query -W -f='${Version}' "$package")
# Our patches over Debian's source (patches/*.patch, applied in order with -p1).
patches=("$here"/patches/*.patch)
key=$(cat "$here/kernel.config" "$here/build-kernel.sh" "${patches[@]}" | sha256sum | cut -c1-12)
patched=$(cat "${patches[@]}" | sha256sum | cut -c1-12)
name="linux-$version-$key"
out="$cache/$name"
if [ -x "$out" ]; then
  ln -sfn "$name" "$cache/linux.uml"
  echo "$out"
  exit 0
fi
mkdir -p "$cache"
src="$cache/src-$version"
if [ "$(cat "$src/.extracted" 2>/dev/null)" != "$patched" ]; then
  rm -rf "$src" "$src.tmp"
  mkdir -p "$src.tmp"
  tar -xf "$tarball" -C "$src.tmp" --strip-components=1
  for p in "${patches[@]}"; do patch -s -d "$src.tmp" -p1 <"$p"; done
  echo "$patched" > "$src.tmp/.extracted"
  mv "$src.tmp" "$src"
fi
build="$cache/build-$key"
mkdir -p "$build"
start=$(date +%s)
make -s -C "$src" O="$build" ARCH=um defconfig >/dev/null
# Apply the fragment: `CONFIG_X=n` means "is not set"; anything else is a value.
fragment=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/kernel.config")
args=()
while IFS='=' read -r opt val; do
  opt=${opt#CONFIG_}
  case "$val" in
    y) args+=(--enable "$opt") ;;
    n) args+=(--disable "$opt") ;;
    *) args+=(--set-val "$opt" "$val") ;;
  esac
done <<<"$fragment"
"$src/scripts/config" --file "$build/.config" "${args[@]}"
make -s -C "$src" O="$build" ARCH=um olddefconfig >/dev/null
# olddefconfig silently drops an option whose dependencies are unmet: refuse that.
missing=()
while IFS='=' read -r opt val; do
  if [ "$val" = n ]; then
    grep -q "^$opt=[ym]" "$build/.config" && missing+=("$opt still set")
  else
    grep -qx "$opt=$val" "$build/.config" || missing+=("$opt=$val")
  fi
done <<<"$fragment"
if [ ${#missing[@]} -gt 0 ]; then
  echo "build-kernel.sh: the kernel configuration did not take: ${missing[*]}" >&2
  rm -rf "$build"
  exit 1
fi
make -s -C "$src" O="$build" ARCH=um -j"$(nproc)" linux
cp "$build/linux" "$out.tmp"
mv "$out.tmp" "$out"
ln -sfn "$name" "$cache/linux.uml"
# The build tree is only needed to rebuild this exact configuration; the binary is what runs.
rm -rf "$build"
echo "built $name in $(( $(date +%s) - start )) s" >&2
echo "$out"
