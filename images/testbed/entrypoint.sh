#!/bin/sh
# The testbed's entrypoint. Gives what `privileged: true` (or `--security-opt
# systempaths=unconfined`, which only the docker CLI understands, not docker-compose 1.29) would:
# Docker's masked and read-only paths under /proc are undone, so /proc/sys is writable (sysctls
# of every network namespace wearlab makes). Processes started with `docker exec` share this
# mount namespace and see the same /proc. Then tini (-s: a subreaper, as with `pid: host` it is
# not PID 1) runs the command and reaps what exits under it.
#
# /dev/shm (shm_size in docker-compose.yml) holds a UML guest's memory, which it maps executable:
# Docker mounts it noexec.
mount -o remount,exec /dev/shm || echo "testbed: cannot remount /dev/shm exec: the uml runtime will fail" >&2
awk '$2 ~ "^/proc/." {print $2}' /proc/mounts | sort -r | while read -r m; do
  umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || echo "testbed: cannot unmount $m" >&2
done
exec /usr/bin/tini -s -- "$@"
