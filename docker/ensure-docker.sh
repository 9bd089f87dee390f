#!/usr/bin/env bash
# Idempotent host setup for the Docker compile sandbox (CI and local development):
#   1. install docker.io with apt if dockerd is missing;
#   2. start `dockerd --bridge none --iptables=false` in the background if the engine does not
#      answer (no bridge and no iptables: compile containers use network_mode=none, and hosts
#      such as CI containers often cannot program iptables);
#   3. wait (bounded) until `docker info` answers;
#   4. build or refresh the offline compile image (docker/build-compile-image.sh).
# Safe to run again: each step is skipped when already done.
#
#   EVALSVC_DOCKERD_LOG       dockerd log file (default /var/log/evalsvc-dockerd.log, else /tmp)
#   EVALSVC_DOCKER_WAIT_S     seconds to wait for the engine (default 60)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WAIT_S="${EVALSVC_DOCKER_WAIT_S:-60}"

log() { printf '[ensure-docker] %s\n' "$*"; }
as_root() { if [[ "$(id -u)" == 0 ]]; then "$@"; else sudo -n "$@"; fi; }
engine_up() { docker info >/dev/null 2>&1; }

if ! command -v dockerd >/dev/null 2>&1; then
  log "dockerd missing: installing docker.io with apt"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io
else
  log "dockerd present: $(dockerd --version)"
fi

if engine_up; then
  log "engine answering"
else
  LOG_FILE="${EVALSVC_DOCKERD_LOG:-/var/log/evalsvc-dockerd.log}"
  if ! { touch "$LOG_FILE"; } 2>/dev/null; then LOG_FILE="/tmp/evalsvc-dockerd.log"; fi
  log "engine not answering: starting dockerd --bridge none --iptables=false (log: $LOG_FILE)"
  # setsid + nohup: the daemon outlives this script and the CI step that ran it.
  as_root setsid nohup dockerd --bridge none --iptables=false >>"$LOG_FILE" 2>&1 </dev/null &
  for ((i = 0; i < WAIT_S; i++)); do
    engine_up && break
    sleep 1
  done
  if ! engine_up; then
    log "engine still not answering after ${WAIT_S}s; last lines of $LOG_FILE:"
    tail -n 20 "$LOG_FILE" >&2 || true
    exit 1
  fi
  log "engine up after ~${i}s"
fi

docker info --format 'engine {{.ServerVersion}}, storage {{.Driver}}, cgroup v{{.CgroupVersion}}, security {{join .SecurityOptions " "}}' |
  sed 's/^/[ensure-docker] /'
"$HERE/build-compile-image.sh"
