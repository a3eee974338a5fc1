#!/usr/bin/env bash
# Build the root filesystem the UML guest boots from (hostfs root): a Debian tree holding
# everything an experiment runs inside the guest. Idempotent: a finished tree is marked with a
# stamp that hashes this script, so editing the package list rebuilds it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:?usage: build-rootfs.sh DEST}
stamp="$dest/.wearlab-rootfs-stamp"
# The packages tagged `guest` in the one list (images/packages.txt).
pkgs=$(awk '!/^#/ && NF > 1 { for (i = 2; i <= NF; i++) if ($i == "guest") print $1 }' "$here/../packages.txt" | paste -sd,)
want=$( (cat "$here/build-rootfs.sh"; echo "$pkgs") | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
mirror=${WEARLAB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# The guest runs the same Python code and venv as the host (mounted over hostfs at the same path),
# so it needs the same python3 and Mininet as the host, plus the programs experiments start
# (the `guest` packages above).
tmp="$dest.tmp"
start=$(date +%s)
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
# Do not let nginx/haproxy start as services inside the guest's boot: wearlab starts them itself.
rm -rf "$tmp/var/cache/apt/archives/"*.deb
echo "$want" > "$tmp/.wearlab-rootfs-stamp"
rm -rf "$dest"
mv "$tmp" "$dest"
echo "built the guest's root filesystem in $(( $(date +%s) - start )) s" >&2
