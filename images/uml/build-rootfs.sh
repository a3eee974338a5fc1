#!/usr/bin/env bash
# Build the root filesystem the UML guest boots from (hostfs root): a Debian tree holding
# everything an experiment runs inside the guest. Idempotent: each tree is built once into
# DEST-<key>, where the key hashes the recipe (this script without its comments and messages)
# and the guest's packages (images/packages.txt), and DEST is a link to the newest one. A guest
# boots the tree the link resolved to when it started (runtime.uml), so a rebuild never changes
# the files under a running guest; the tree before the newest is kept for such guests, older
# ones are removed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:?usage: build-rootfs.sh DEST}
# The packages tagged `guest` in the one list (images/packages.txt).
pkgs=$(awk '!/^#/ && NF > 1 { for (i = 2; i <= NF; i++) if ($i == "guest") print $1 }' "$here/../packages.txt" | paste -sd,)
recipe=$(sed -e 's/[[:space:]]#.*//' -e '/^[[:space:]]*#/d' -e '/^[[:space:]]*echo .*>&2$/d' "$here/build-rootfs.sh")
want=$( (echo "$recipe"; echo "$pkgs") | sha256sum | cut -c1-16)
tree="$dest-$want"
if [ -f "$tree/.wearlab-rootfs-stamp" ] && [ "$(cat "$tree/.wearlab-rootfs-stamp")" = "$want" ]; then
  [ "$(readlink "$dest" 2>/dev/null)" = "$(basename "$tree")" ] || ln -sfn "$(basename "$tree")" "$dest"
  exit 0
fi
start=$(date +%s)
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
mirror=${WEARLAB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# The guest runs the same Python code and venv as the host (mounted over hostfs at the same path),
# so it needs the same python3 and Mininet as the host, plus the programs experiments start
# (the `guest` packages above).
tmp="$tree.tmp"
rm -rf "$tmp"
mkdir -p "$(dirname "$dest")"
debootstrap --variant=minbase --include="$pkgs" "$suite" "$tmp" "$mirror"
# bookworm's tc (iproute2 6.1) does not know netem's `seed` (Linux >= 6.6): take iproute2 from
# bookworm-backports, whose tc knows every netem option wearlab uses.
if [ "$suite" = bookworm ]; then
  echo "deb $mirror bookworm-backports main" > "$tmp/etc/apt/sources.list.d/backports.list"
  chroot "$tmp" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive chroot "$tmp" apt-get install -y -qq --no-install-recommends \
    -t bookworm-backports iproute2 >/dev/null
  chroot "$tmp" apt-get clean
  rm -rf "$tmp/var/lib/apt/lists/"*
fi
chroot "$tmp" tc -V
# The kernel has everything built in; iptables must use the legacy back end (x_tables), which
# the guest kernel has for the phone's REDIRECT/TPROXY rules, like the nf_tables one.
chroot "$tmp" update-alternatives --set iptables /usr/sbin/iptables-legacy >/dev/null
rm -rf "$tmp/var/cache/apt/archives/"*.deb
echo "$want" > "$tmp/.wearlab-rootfs-stamp"
mv "$tmp" "$tree"
previous=$(readlink "$dest" 2>/dev/null || true)
if [ -e "$dest" ] && [ ! -L "$dest" ]; then
  # A tree from before versioned trees: moved aside (a guest may be booted from it), kept as the previous one.
  previous="$(basename "$dest")-unversioned"
  rm -rf "$dest-unversioned"
  mv "$dest" "$dest-unversioned"
fi
ln -sfn "$(basename "$tree")" "$dest"
# Only the newest tree and the one before it stay.
for old in "$dest"-*; do
  case "$(basename "$old")" in "$(basename "$tree")"|"$previous"|*.tmp) continue ;; esac
  [ -d "$old" ] && rm -rf "$old"
done
echo "built the guest's root filesystem in $(( $(date +%s) - start )) s" >&2
