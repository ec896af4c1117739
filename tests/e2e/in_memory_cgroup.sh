#!/usr/bin/env bash
# in_memory_cgroup.sh DIR LIMIT_BYTES CMD ARGS...: runs CMD in a new memory
# cgroup DIR/<pid> limited to LIMIT_BYTES (so each MPI rank started through it
# gets a limit of its own, as Slurm's --mem-per-cpu gives). DIR is made by
# `in_memory_cgroup.sh --make` (prints it; exit 77 when no writable memory
# cgroup, v1 or v2, is there) and removed by `in_memory_cgroup.sh --remove DIR`.
set -euo pipefail
if [ "$1" = --make ]; then
  own=$(sed -n 's/^[0-9]*:memory:\(.*\)$/\1/p' /proc/self/cgroup)
  if [ -n "$own" ] && [ -w "/sys/fs/cgroup/memory$own" ]; then
    dir=/sys/fs/cgroup/memory$own/ymlopt-e2e-$$
  else  # v2: a child of our own cgroup, with the memory controller on in it
    own=$(sed -n 's/^0::\(.*\)$/\1/p' /proc/self/cgroup)
    root=/sys/fs/cgroup; [ -f $root/cgroup.controllers ] || root=/sys/fs/cgroup/unified
    dir=$root$own/ymlopt-e2e-$$
    grep -qw memory "$root$own/cgroup.controllers" 2>/dev/null || { echo "no memory cgroup controller"; exit 77; }
  fi
  mkdir "$dir" 2>/dev/null || { echo "cannot create a cgroup under $(dirname "$dir")"; exit 77; }
  [ -f "$dir/memory.limit_in_bytes" ] || echo +memory >"$dir/cgroup.subtree_control" 2>/dev/null || {
    rmdir "$dir"; echo "cannot enable the memory controller in $dir"; exit 77; }
  # a probe: a limit can be set on a child and a process moved into it
  probe=$dir/probe
  if ! { mkdir "$probe" &&
         { [ -f "$probe/memory.limit_in_bytes" ] && echo 1073741824 >"$probe/memory.limit_in_bytes" ||
           echo 1073741824 >"$probe/memory.max"; } &&
         sh -c "echo \$\$ >'$probe/cgroup.procs'"; } 2>/dev/null; then
    rmdir "$probe" "$dir" 2>/dev/null; echo "cannot limit a process's memory under $dir"; exit 77
  fi
  rmdir "$probe"
  echo "$dir"
  exit 0
fi
if [ "$1" = --remove ]; then
  for d in "$2"/*/; do [ -d "$d" ] && rmdir "$d" 2>/dev/null || true; done
  rmdir "$2" 2>/dev/null || true
  exit 0
fi
dir=$1/$$ limit=$2
shift 2
mkdir "$dir"
if [ -f "$dir/memory.limit_in_bytes" ]; then echo "$limit" >"$dir/memory.limit_in_bytes"; else echo "$limit" >"$dir/memory.max"; fi
echo $$ >"$dir/cgroup.procs"
exec "$@"
