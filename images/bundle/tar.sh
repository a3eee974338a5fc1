#!/usr/bin/env bash
# The bundle as one file (make bundle-tar; docs/many-machines.md#the-bundle-as-one-file):
# OUTDIR/wearlab-bundle-VERSION.tar.gz, holding the directory wearlab-bundle-VERSION/, and its
# checksum OUTDIR/wearlab-bundle-VERSION.tar.gz.sha256 (`sha256sum -c` format).
#
# Made to be extracted by an ordinary user anywhere (`tar -xzf FILE -C DIR`, GNU tar):
# - owners: the members say root (0:0, numeric) and an unprivileged extraction makes them the
#   user's; nothing depends on them: the guest's files and their owners are inside rootfs.img (an
#   ext4 image, its own metadata), which the guest only reads (each task writes a copy-on-write
#   file of its own);
# - rootfs.img is sparse (~1.4 GB long, ~0.9 GB of data): stored as a POSIX (pax) sparse member,
#   which GNU tar extracts sparse again (a tar without sparse support would extract it wrong);
# - relative names under one directory, no links to outside, no device nodes, no set-id bits;
#   the hard links build.sh made to the cache are stored as the files they are.
# gzip, not zstd: every cluster node has gzip, and Rocky 8's GNU tar (1.30) has no --zstd.
#
# Compressing the image is what costs (~0.9 GB), and it changes only with the image: its part of
# the tar (rootfs.img and linux, no end-of-archive blocks) is compressed once into CACHE, keyed by
# what the manifest says they are; each call compresses the rest (a few MB) and appends it as a
# second gzip member. `gzip -d` (and so `tar -xz`) reads concatenated members as one stream, and
# a tar stream is blocks, so the two parts are one archive.
#
# usage: tar.sh BUNDLE OUTDIR CACHE
set -euo pipefail
usage="usage: tar.sh BUNDLE OUTDIR CACHE"
bundle=${1:?$usage} outdir=${2:?$usage} cache=${3:?$usage}
outdir=${outdir%/}
[ -f "$bundle/manifest" ] && [ -x "$bundle/wearlab" ] || { echo "tar.sh: no bundle at $bundle (make bundle)" >&2; exit 2; }
version=$(sed -n 's/^wearlab=//p' "$bundle/manifest")
[ -n "$version" ] || { echo "tar.sh: $bundle/manifest names no wearlab version" >&2; exit 2; }
name=wearlab-bundle-$version
start=$(date +%s)
# The bundle's "." becomes NAME/ (S: symlink targets are left as they are; there are none today).
tar_opts=(--create --format=posix --sparse --hard-dereference --sort=name
          --owner=0 --group=0 --numeric-owner --mode='a+rX,go-w,ug-s' --pax-option=delete=atime,delete=ctime
          --transform="s|^\\.|$name|S" -C "$bundle")
here=$(cd "$(dirname "$0")" && pwd)
key=$( (sed -e 's/[[:space:]]#.*//' -e '/^[[:space:]]*#/d' "$here/tar.sh"; echo "$name"
        grep -E '^(kernel|rootfs)=' "$bundle/manifest"; stat -c %s "$bundle/rootfs.img" "$bundle/linux") |
      sha256sum | cut -c1-16)
heavy=$cache/tar-$key.gz
mkdir -p "$cache" "$outdir"
if [ ! -f "$heavy" ]; then
  # Record size 512 (-b 1): the archive ends in exactly two zero blocks (1024 bytes), left out.
  tar "${tar_opts[@]}" -b 1 ./rootfs.img ./linux | head -c -1024 | gzip -6 -n > "$heavy.tmp"
  mv "$heavy.tmp" "$heavy"
  ls -1t "$cache"/tar-*.gz | tail -n +3 | xargs -r rm -f
fi
out=$outdir/$name.tar.gz
{ cat "$heavy"; tar "${tar_opts[@]}" --anchored --exclude=./rootfs.img --exclude=./linux . | gzip -6 -n; } > "$out.tmp"
mv "$out.tmp" "$out"
(cd "$outdir" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
echo "$out: $(( $(stat -c %s "$out") / 1048576 )) MB in $(( $(date +%s) - start )) s" >&2
echo "$out"
