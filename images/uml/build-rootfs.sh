#!/usr/bin/env bash
# Build the root filesystem the UML guest boots from (hostfs root): a Debian tree holding
# everything an experiment runs inside the guest. Idempotent: a finished tree is marked with a
# stamp that hashes this script, so editing the package list rebuilds it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:?usage: build-rootfs.sh DEST}
stamp="$dest/.wearlab-rootfs-stamp"
want=$(sha256sum "$here/build-rootfs.sh" | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
mirror=${WEARLAB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# The guest runs the same Python code and venv as the host (mounted over hostfs at the same path),
# so it needs the same python3 and Mininet as the host, plus the programs experiments start.
pkgs=python3,python3-venv,mininet,iproute2,iputils-ping,ethtool,kmod,procps,psmisc,curl,openssl,ca-certificates,nginx-light,tcpdump,iperf3,socat,haproxy
tmp="$dest.tmp"
rm -rf "$tmp"
mkdir -p "$(dirname "$dest")"
debootstrap --variant=minbase --include="$pkgs" "$suite" "$tmp" "$mirror"
# Modules of the UML kernel (sch_netem lives there).
mkdir -p "$tmp/lib/modules"
cp -a /usr/lib/uml/modules/. "$tmp/lib/modules/"
# Do not let nginx/haproxy start as services inside the guest's boot: wearlab starts them itself.
rm -rf "$tmp/var/cache/apt/archives/"*.deb
echo "$want" > "$tmp/.wearlab-rootfs-stamp"
rm -rf "$dest"
mv "$tmp" "$dest"
