#!/usr/bin/env bash
# Build wearlab/base:bookworm, the root of every image of the Compose stack, without a registry:
# debootstrap (minbase) a Debian tree and `docker import` it. Idempotent: the image carries a
# label with a hash of this script and of the CA certificates copied in; when the local image's
# label matches, nothing is done (a few ms). The debootstrap tree is cached under
# /var/cache/wearlab/ (like the UML guest's root filesystem), so a deleted image is re-imported
# in seconds without downloading anything.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
image=${WEARLAB_BASE_IMAGE:-wearlab/base:bookworm}
dest=${1:-/var/cache/wearlab/base-bookworm}
suite=bookworm
mirror=${WEARLAB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${WEARLAB_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# The host's CA certificates go in, so apt and pip inside the images trust what the host trusts
# (a TLS-inspecting egress proxy's CA included): the bundle itself, and the local CAs it was made
# from, so that installing Debian's ca-certificates in a derived image keeps them.
cas=(/etc/ssl/certs/ca-certificates.crt)
shopt -s nullglob
cas+=(/usr/local/share/ca-certificates/*.crt)
shopt -u nullglob
want=$( { cat "$here/build.sh"; echo "$mirror $security"; cat "${cas[@]}" 2>/dev/null; } | sha256sum | cut -c1-16)

have=$(docker image inspect -f '{{index .Config.Labels "wearlab.base.hash"}}' "$image" 2>/dev/null || true)
if [ "$have" = "$want" ]; then
  echo "$image is up to date ($want)"
  exit 0
fi

stamp="$dest/.wearlab-base-stamp"
if ! { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }; then
  command -v debootstrap >/dev/null || {
    echo "images/base/build.sh: debootstrap is missing: apt-get install debootstrap" >&2; exit 2; }
  tmp="$dest.tmp"
  rm -rf "$tmp"
  mkdir -p "$(dirname "$dest")"
  echo "debootstrap $suite (minbase) into $tmp ..."
  debootstrap --variant=minbase "$suite" "$tmp" "$mirror" >"$tmp.log" 2>&1 || {
    tail -20 "$tmp.log" >&2; exit 1; }
  rm -f "$tmp.log"
  cat > "$tmp/etc/apt/sources.list" <<SOURCES
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security $suite-security main
SOURCES
  # Small images: no recommends, no documentation, no .deb cache (as Docker's own Debian images).
  cat > "$tmp/etc/apt/apt.conf.d/90wearlab" <<'APT'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT
  cat > "$tmp/etc/dpkg/dpkg.cfg.d/90wearlab-nodoc" <<'DPKG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
DPKG
  # Services never start at install time inside an image (nginx, haproxy, prometheus ...).
  printf '#!/bin/sh\nexit 101\n' > "$tmp/usr/sbin/policy-rc.d"
  chmod 755 "$tmp/usr/sbin/policy-rc.d"
  mkdir -p "$tmp/etc/ssl/certs" "$tmp/usr/local/share/ca-certificates"
  cp /etc/ssl/certs/ca-certificates.crt "$tmp/etc/ssl/certs/ca-certificates.crt"
  for c in "${cas[@]:1}"; do cp "$c" "$tmp/usr/local/share/ca-certificates/"; done
  chroot "$tmp" apt-get clean
  rm -rf "$tmp/var/lib/apt/lists/"* "$tmp/var/cache/apt/"*.bin "$tmp/var/log/"*.log "$tmp/root/.cache"
  : > "$tmp/etc/hostname"
  rm -f "$tmp/etc/resolv.conf" "$tmp/etc/hosts"   # docker provides them
  echo "$want" > "$tmp/.wearlab-base-stamp"
  rm -rf "$dest"
  mv "$tmp" "$dest"
fi

echo "importing $dest as $image ..."
tar -C "$dest" --numeric-owner --exclude=./.wearlab-base-stamp -c . | docker import \
  --change "LABEL wearlab.base.hash=$want" \
  --change "ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --change 'CMD ["bash"]' \
  --message "wearlab base: debootstrap --variant=minbase $suite" - "$image" >/dev/null
echo "$image built ($want)"
