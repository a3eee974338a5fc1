#!/usr/bin/env bash
# Make the bundle (make bundle; docs/many-machines.md#the-bundle): one relocatable directory that
# runs wearlab's UML runtime as an ordinary user on a machine with a POSIX shell and nothing else
# of ours:
#
#   wearlab        the launcher (images/bundle/wearlab, POSIX sh)
#   linux          the guest kernel with ubd and ext4 (images/uml/bundle.config)
#   rootfs.img     an ext4 image: the guest's Debian tree (build-rootfs.sh) with wearlab's Python
#                  dependencies in /opt/wearlab/venv and the guest's init; each task boots it
#                  behind a copy-on-write file of its own, so nothing needs the right owners
#   lib/wearlab    wearlab's code, read by the guest over hostfs (a code change costs a copy,
#                  not a new image); experiments/, topologies/ and wearlab's small builds beside
#   manifest       what it was made of (kernel, image key, wearlab version and commit)
#
# The image is cached under CACHE, keyed by this recipe (without comments), the guest tree's
# stamp, the venv's packages and the guest's init: made once (~30 s), then linked.
#
# usage: build.sh OUT CACHE KERNEL ROOTFS VENV     (run as root: the guest tree is root's)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:?usage: build.sh OUT CACHE KERNEL ROOTFS VENV}
cache=${2:?} kernel=$(readlink -f "${3:?}") rootfs=$(readlink -f "${4:?}") venv=${5:?}
init=$root/src/wearlab/runtime/guest-init.sh
[ -f "$rootfs/.wearlab-rootfs-stamp" ] || { echo "build.sh: no guest tree at $rootfs (make guest)" >&2; exit 2; }
[ -x "$kernel" ] || { echo "build.sh: no kernel at $kernel" >&2; exit 2; }
py="$venv/bin/python"
pyver=$("$py" -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}")')
deps=$("$py" -m pip freeze --exclude-editable --disable-pip-version-check)
recipe=$(sed -e 's/[[:space:]]#.*//' -e '/^[[:space:]]*#/d' -e '/^[[:space:]]*echo .*>&2$/d' "$here/build.sh")
key=$( (echo "$recipe"; cat "$rootfs/.wearlab-rootfs-stamp"; echo "$deps"; cat "$init") | sha256sum | cut -c1-16)
img="$cache/rootfs-$key.img"
mkdir -p "$cache"
if [ ! -f "$img" ]; then
  start=$(date +%s)
  stage="$cache/stage-$key"
  rm -rf "$stage" "$img.tmp"
  cp -a "$rootfs/." "$stage/"
  # The venv the guest's wearlab runs in: the guest's python3 (the host venv's own: same Debian),
  # the host venv's packages, not wearlab's editable install (lib/ over hostfs instead).
  chroot "$stage" python3 -m venv --system-site-packages --without-pip /opt/wearlab/venv
  site="$stage/opt/wearlab/venv/lib/$pyver/site-packages"
  cp -a "$venv/lib/$pyver/site-packages/." "$site/"
  rm -rf "$site"/__editable__*wearlab* "$site"/wearlab-*.dist-info
  # Bytecode now: the guest's writes go to a per-task copy-on-write file and are thrown away.
  chroot "$stage" python3 -m compileall -q -j 0 /opt/wearlab/venv/lib >/dev/null || true
  install -m 755 "$init" "$stage/sbin/wearlab-init"
  # Room for what a run writes outside tmpfs (little: results go to the host over hostfs).
  size=$(( $(du -sm "$stage" | cut -f1) * 5 / 4 + 256 ))
  mke2fs -q -t ext4 -O ^has_journal -L wearlab-root -d "$stage" "$img.tmp" "${size}M"
  mv "$img.tmp" "$img"
  rm -rf "$stage"
  # The newest image and the one before it stay (a running bundle may use the older one).
  ls -1t "$cache"/rootfs-*.img | tail -n +3 | xargs -r rm -f
  echo "built the bundle's root filesystem image ($size MB, sparse) in $(( $(date +%s) - start )) s" >&2
fi

tmp="$out.tmp"
rm -rf "$tmp"
mkdir -p "$tmp/lib" "$tmp/build"
# Hard links where the cache shares the file system (instant), else sparse copies.
ln "$img" "$tmp/rootfs.img" 2>/dev/null || cp --sparse=always "$img" "$tmp/rootfs.img"
ln "$kernel" "$tmp/linux" 2>/dev/null || cp "$kernel" "$tmp/linux"
install -m 755 "$here/wearlab" "$tmp/wearlab"
cp -r "$root/src/wearlab" "$tmp/lib/wearlab"
cp -r "$root/experiments" "$root/topologies" "$tmp/"
[ ! -d "$root/build/devicecpu" ] || cp -r "$root/build/devicecpu" "$tmp/build/"
[ ! -d "$root/build/tlstickets" ] || cp -r "$root/build/tlstickets" "$tmp/build/"
if [ -x "$root/tcpcrypt/target/release/tcpcryptd" ]; then
  mkdir -p "$tmp/tcpcrypt/target/release"
  cp "$root/tcpcrypt/target/release/tcpcryptd" "$tmp/tcpcrypt/target/release/"
fi
find "$tmp" -name __pycache__ -prune -exec rm -rf {} +
{
  echo "kernel=$(basename "$kernel")"
  echo "rootfs=rootfs-$key (guest tree $(cat "$rootfs/.wearlab-rootfs-stamp"))"
  echo "wearlab=$("$py" -c 'import wearlab; print(wearlab.__version__)')"
  echo "commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' (dirty)')"
} > "$tmp/manifest"
chmod -R a+rX "$tmp"
rm -rf "$out"
mv "$tmp" "$out"
echo "$out"
