#!/usr/bin/env bash
# Podman for the container tests (tests/test_docker_images.py, tests/lab/test_containers.py), set up by
# the project alone and kept apart from the machine's own configuration:
# - packages from Debian: podman, runc, netavark with aardvark-dns, podman-compose, debootstrap, iptables;
# - a containers.conf of the project's own (CONTAINERS_CONF, under kprobe's cache, never the user's):
#   runc (crun refuses cgroups in hybrid mode), cgroupfs, rlimits no higher than this process may set
#   (podman's defaults ask for more and the sandbox lacks CAP_SYS_RESOURCE), networks kept in the cache;
# - every podman command runs in the network namespace `kprobe-podman`, so netavark's bridges, its
#   iptables rules and the published ports live there and the root namespace's firewall is never touched
#   (`nsenter --net`, not `ip netns exec`, which remounts /sys and hides the cgroup mounts from runc);
# - `podman system service` answers the Docker API on a socket in the cache (testcontainers, docker-py);
# - the images, made here because no registry answers: debian:bookworm-slim by debootstrap (once per
#   machine), then the broker image (docker/kafka) and both kprobe targets (docker/Dockerfile), built with
#   no network at all: apt reads the package lists and .debs fetched beside debootstrap, pip the wheels
#   built on this host (`pip install --no-index --find-links`).
# Everything is skipped when already there. `env` prints the variables the tests read (also in $DIR/env);
# `stop` stops the service and removes the containers and the namespace. Timings of each step go to $DIR/timings.log.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-$ROOT/.venv/bin/python}
CACHE=${KPROBE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kprobe}
DIR=$CACHE/podman
NETNS=kprobe-podman
KAFKA_VERSION=${KPROBE_KAFKA_VERSION:-4.1.1}
BASE=docker.io/library/debian:bookworm-slim
BROKER=localhost/kprobe-kafka:$KAFKA_VERSION
PROBE=localhost/kprobe:latest
AGGREGATE=localhost/kprobe-aggregate:latest
SOCKET=$DIR/podman.sock
export CONTAINERS_CONF=$DIR/containers.conf

pod() { nsenter --net="/run/netns/$NETNS" podman "$@"; }
say() { echo "podman.sh: $*" >&2; }
timed() {  # timed LABEL COMMAND...: run it, log its wall time
  local start=$SECONDS
  "${@:2}"
  echo "$(date -u +%FT%TZ) $1 $((SECONDS - start))s" >> "$DIR/timings.log"
  say "$1: $((SECONDS - start)) s"
}

write_env() {
  cat > "$DIR/env" <<EOF
CONTAINERS_CONF=$CONTAINERS_CONF
DOCKER_HOST=unix://$SOCKET
TESTCONTAINERS_RYUK_DISABLED=true
KPROBE_PODMAN_NETNS=/run/netns/$NETNS
KPROBE_KAFKA_IMAGE=$BROKER
KPROBE_PROBE_IMAGE=$PROBE
KPROBE_AGGREGATE_IMAGE=$AGGREGATE
EOF
}

install_packages() {
  local need=()
  command -v podman >/dev/null || need+=(podman)
  command -v runc >/dev/null || need+=(runc)
  [[ -x /usr/lib/podman/netavark ]] || need+=(netavark)
  [[ -x /usr/lib/podman/aardvark-dns ]] || need+=(aardvark-dns)
  command -v podman-compose >/dev/null || need+=(podman-compose)
  command -v debootstrap >/dev/null || need+=(debootstrap)
  command -v iptables >/dev/null || need+=(iptables)  # netavark's firewall, inside the namespace only
  command -v nsenter >/dev/null || need+=(util-linux)
  command -v curl >/dev/null || need+=(curl)
  if ((${#need[@]})); then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
}

write_conf() {
  mkdir -p "$DIR/networks"
  # RLIMIT_NPROC: podman caps its own at the kernel's pid_max, and runc cannot raise it past that.
  local nofile nproc pid_max
  nofile=$(ulimit -Hn)
  nproc=$(ulimit -Hu)
  pid_max=$(cat /proc/sys/kernel/pid_max)
  [[ $nproc == unlimited || $nproc -gt $pid_max ]] && nproc=$pid_max
  [[ $nofile == unlimited ]] && nofile=1048576
  cat > "$CONTAINERS_CONF.tmp" <<EOF
# Written by .ci/podman.sh for kprobe's container tests (CONTAINERS_CONF); the machine's own files are untouched.
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"

[network]
network_backend = "netavark"
network_config_dir = "$DIR/networks"
EOF
  mv "$CONTAINERS_CONF.tmp" "$CONTAINERS_CONF"
}

make_netns() {
  if [[ ! -e /run/netns/$NETNS ]]; then
    ip netns add "$NETNS"
  fi
  ip -n "$NETNS" link set lo up
}

service_answers() { curl -sf --max-time 2 --unix-socket "$SOCKET" http://podman/_ping >/dev/null 2>&1; }

# A service whose working directory is gone (started from a checkout since removed) still answers /_ping, but
# conmon, which it starts in that directory, fails every container start: such a service is replaced.
service_usable() {
  service_answers || return 1
  [[ -f $DIR/service.pid ]] || return 0
  local cwd
  cwd=$(readlink "/proc/$(cat "$DIR/service.pid")/cwd" 2>/dev/null) || return 0
  [[ $cwd != *" (deleted)" ]]
}

start_service() {
  service_usable && return 0
  stop_service
  rm -f "$SOCKET"
  # started in the cache, which outlives any checkout the setup ran from
  (cd "$DIR" && exec setsid nsenter --net="/run/netns/$NETNS" podman system service --time=0 "unix://$SOCKET" \
    >"$DIR/service.log" 2>&1 </dev/null) &
  echo $! > "$DIR/service.pid"
  for _ in $(seq 50); do
    service_answers && return 0
    sleep 0.2
  done
  say "podman system service did not answer on $SOCKET: $(tail -1 "$DIR/service.log")"
  return 1
}

stop_service() {
  if [[ -f $DIR/service.pid ]] && kill -0 "$(cat "$DIR/service.pid")" 2>/dev/null; then
    kill "$(cat "$DIR/service.pid")"
  fi
  rm -f "$DIR/service.pid" "$SOCKET"
}

# aardvark-dns, which netavark starts once and leaves running on its own, answers container names in the network
# namespace it started in. One left behind in a namespace since deleted (a container whose teardown failed, a run
# stopped before its trap) still owns aardvark.pid: netavark signals it instead of starting one in the new
# namespace, and no container name resolves (a broker cannot find its voters, a client its bootstrap). Stopped
# here: every aardvark-dns outside this shell's namespace and the named ones that remain ("ours" too: ours
# is about to go).
stop_stray_aardvark() {
  local live=() file pid ns
  live+=("$(readlink "/proc/$$/ns/net")")  # this machine's own, where the setup runs (pid 1's may not be readable)
  for file in /run/netns/*; do
    [[ ${1:-} == ours && $file == "/run/netns/$NETNS" ]] && continue
    mountpoint -q "$file" 2>/dev/null && live+=("net:[$(stat -L -c %i "$file")]")
  done
  for pid in $(pgrep -x aardvark-dns); do
    ns=$(readlink "/proc/$pid/ns/net") || continue
    [[ " ${live[*]} " == *" $ns "* ]] || kill "$pid" 2>/dev/null || true
  done
  # a container's namespace file whose mount is gone is an empty file no one can enter: litter
  for file in /run/netns/netns-*; do
    [[ -e $file ]] && ! mountpoint -q "$file" && rm -f "$file"
  done
  return 0
}

# `stop` after a run: the service stopped, the containers the tests left removed, and the namespace deleted, so
# nothing of the run stays on the machine but the image store and this cache (setup makes them again in seconds).
stop_all() {
  if [[ -e /run/netns/$NETNS ]]; then
    pod rm --all --force --time 0 >/dev/null 2>&1 || true
    pod network prune --force >/dev/null 2>&1 || true
  fi
  stop_service
  stop_stray_aardvark ours
  if [[ -e /run/netns/$NETNS ]]; then
    ip netns delete "$NETNS"
  fi
}

# debian:bookworm-slim from Debian's packages: minbase, slimmed as Docker Hub's slim images are, with apt's
# lists and the .debs the images install kept aside (not in the image) for the offline builds below.
make_base() {
  if pod image exists "$BASE" && [[ -f $DIR/apt/.complete ]]; then return 0; fi
  local rootfs=$DIR/rootfs.partial
  rm -rf "$rootfs" "$DIR/apt"
  debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian > "$DIR/debootstrap.log"
  chroot "$rootfs" apt-get update -qq
  chroot "$rootfs" apt-get install -qq -y --download-only --no-install-recommends \
    python3 python3-venv openjdk-17-jre-headless maven > "$DIR/apt-download.log"
  mkdir -p "$DIR/apt/archives"
  cp -a "$rootfs/var/lib/apt/lists" "$DIR/apt/lists"
  cp "$rootfs"/var/cache/apt/archives/*.deb "$DIR/apt/archives/"
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
    "$rootfs/etc/resolv.conf" "$rootfs/etc/hostname"
  mkdir -p "$rootfs/var/lib/apt/lists/partial"
  cat > "$rootfs/etc/dpkg/dpkg.cfg.d/slim" <<'EOF'
# What Docker Hub's debian:*-slim images leave out, so that images built on this base stay small.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
EOF
  # Docker Hub's apt settings: no package caches left in image layers, no translations fetched.
  cat > "$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'Acquire::Languages "none";' > "$rootfs/etc/apt/apt.conf.d/docker-no-languages"
  echo 'Apt::AutoRemove::SuggestsImportant "false";' > "$rootfs/etc/apt/apt.conf.d/docker-autoremove-suggests"
  find "$rootfs/usr/share/doc" -mindepth 1 -not -type d -not -name copyright -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  find "$rootfs"/usr/share/{info,locale,man} -not -type d -delete  # the folders stay, as in Docker Hub's
  tar -C "$rootfs" -c . | pod import -q - "$BASE" >/dev/null
  rm -rf "$rootfs"
  touch "$DIR/apt/.complete"
}

# Builds with no network: apt's lists and .debs (above) and the host's wheels are mounted, as overlays
# (":O") where apt would write, so the cache stays as it is.
# The .debs sit in an archive directory of their own, named by a mounted apt setting, because the base's
# docker-clean hook empties /var/cache/apt/archives after every `apt-get update`.
offline_build() {
  echo 'Dir::Cache::Archives "/var/cache/apt/offline/";' > "$DIR/apt/offline.conf"
  pod build -q --network none -v "$DIR/apt/offline.conf:/etc/apt/apt.conf.d/zz-offline:ro" \
    -v "$DIR/apt/lists:/var/lib/apt/lists:O" -v "$DIR/apt/archives:/var/cache/apt/offline:O" "$@" >/dev/null
}

make_broker() {
  pod image exists "$BROKER" && return 0
  local libs context=$DIR/kafka-context
  libs=$("$PY" -c '
import sys
from pathlib import Path
from kprobe.maven import dependencies
from kprobe.paths import cache_root
version = sys.argv[1]
print(dependencies(cache_root() / f"kafka-image-{version}", Path("docker/kafka/pom.xml").read_text(),
                   {"kafka.version": version}, expect="kafka-tools-*.jar"))' "$KAFKA_VERSION")
  rm -rf "$context"
  cp -a docker/kafka "$context"
  cp -a "$libs" "$context/libs"
  offline_build -t "$BROKER" "$context"
  rm -rf "$context"
}

make_wheels() {
  # Keyed by pyproject.toml: its dependencies decide the set. kprobe itself is built from source in the image.
  local key
  key=$(sha256sum pyproject.toml | cut -c1-16)
  [[ -f $DIR/wheels/.complete-$key ]] && return 0
  rm -rf "$DIR/wheels"
  "$PY" -m pip wheel -q --wheel-dir "$DIR/wheels" '.[spark,serve]' 'setuptools>=77' wheel
  rm -f "$DIR"/wheels/kprobe-*.whl
  touch "$DIR/wheels/.complete-$key"
}

make_kprobe_images() {
  local wheels=(-v "$DIR/wheels:/wheels:ro" --build-arg "PIP_INDEX_OPTIONS=--no-index --find-links /wheels")
  timed "build $PROBE" offline_build "${wheels[@]}" --target kprobe -t "$PROBE" -f docker/Dockerfile .
  timed "build $AGGREGATE" offline_build "${wheels[@]}" --target aggregate -t "$AGGREGATE" -f docker/Dockerfile .
  # The images a changed kprobe replaced, now untagged: gigabytes after a day of builds. Only images nothing
  # builds on go, so the layers the next build reuses (its cache) stay.
  pod image prune --force >/dev/null
}

case ${1:-setup} in
  setup)
    mkdir -p "$DIR"
    timed "install packages" install_packages
    write_conf
    make_netns
    stop_stray_aardvark
    timed "start service" start_service
    timed "base image (debootstrap)" make_base
    timed "broker image" make_broker
    timed "wheels" make_wheels
    make_kprobe_images
    write_env
    ;;
  env) write_env; cat "$DIR/env" ;;
  stop) stop_all ;;
  *) say "usage: $0 [setup|env|stop]"; exit 2 ;;
esac
