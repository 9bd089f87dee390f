#!/usr/bin/env bash
# Build the OFFLINE compile image `evalsvc-compile:local` without any registry.
#
# Why: the production images (Dockerfile.*) start FROM nvidia/cuda, which needs a registry. Where
# none is reachable (CI boxes, air-gapped hosts), we import a tiny root filesystem instead and
# provide the toolchain (host /usr incl. /usr/local/cuda, the Python prefix, the evalsvc package)
# as read-only bind mounts at run time (evalsvc.sandbox.docker_sandbox.host_toolchain_mounts).
# The image holds only what must be ours: merged-usr symlinks, passwd/group with the
# unprivileged user `sandbox` (65532), the host's ld.so.cache and /etc/alternatives (they
# describe the mounted /usr), empty mount points, and the environment (PATH, HOME, PYTHONPATH).
#
# Idempotent: the image carries a label with a hash of every input; it is rebuilt only when the
# hash changes (new script, new ld.so.cache or alternatives after an apt upgrade, other Python).
#
# Usage: docker/build-compile-image.sh [--force]
#   EVALSVC_COMPILE_IMAGE  image tag (default evalsvc-compile:local)
#   EVALSVC_PYTHON         interpreter whose prefix is mounted (default python3 on PATH)
set -euo pipefail

IMAGE="${EVALSVC_COMPILE_IMAGE:-evalsvc-compile:local}"
PYTHON="${EVALSVC_PYTHON:-python3}"
FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1

SANDBOX_UID=65532
SANDBOX_GID=65532

log() { printf '[build-compile-image] %s\n' "$*"; }

command -v docker >/dev/null || { log "docker CLI not found (run docker/ensure-docker.sh)"; exit 1; }
docker info >/dev/null 2>&1 || { log "Docker engine not answering (run docker/ensure-docker.sh)"; exit 1; }

PY_PREFIX="$("$PYTHON" -c 'import sys; print(sys.base_prefix)')"
PY_VENV="$("$PYTHON" -c 'import sys; print(sys.prefix if sys.prefix != sys.base_prefix else "")')"
CUDA_HOME="/usr/local/cuda"

# Everything that ends up in the image, hashed. The script's own text covers passwd/group/ENV.
inputs_hash() {
  {
    sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1
    echo "prefix=${PY_PREFIX} venv=${PY_VENV}"
    sha256sum /etc/ld.so.cache | cut -d' ' -f1
    find /etc/alternatives -mindepth 1 -printf '%P %l\n' | LC_ALL=C sort
  } | sha256sum | cut -c1-16
}
HASH="$(inputs_hash)"

CURRENT="$(docker image inspect -f '{{ index .Config.Labels "evalsvc.inputs" }}' "$IMAGE" 2>/dev/null || true)"
if [[ "$FORCE" == 0 && "$CURRENT" == "$HASH" ]]; then
  log "up to date: $IMAGE (inputs $HASH)"
  exit 0
fi
log "building $IMAGE (inputs ${CURRENT:-none} -> $HASH; python prefix $PY_PREFIX)"

ROOTFS="$(mktemp -d /tmp/evalsvc-rootfs.XXXXXX)"
trap 'rm -rf "$ROOTFS"' EXIT
chmod 0755 "$ROOTFS"

# Merged /usr: the toolchain mount replaces /usr, and these links make /bin/sh, /lib64/ld-linux...
# resolve into it. /sbin stays a real (empty) directory: Docker bind-mounts its init (tini) at
# /sbin/docker-init, which through a symlink would land inside the read-only /usr mount and fail;
# /usr/sbin is on PATH instead.
mkdir -p "$ROOTFS/usr" "$ROOTFS/etc" "$ROOTFS/proc" "$ROOTFS/sys" "$ROOTFS/dev" "$ROOTFS/opt/evalsvc/evalsvc"
for d in bin lib lib64; do ln -s "usr/$d" "$ROOTFS/$d"; done
install -d -m 0755 "$ROOTFS/sbin"
# Mount points. /out is world-writable so that, when no writable mount is given, a write there
# fails only because the root filesystem is read-only (tests rely on that distinction).
install -d -m 1777 "$ROOTFS/tmp" "$ROOTFS/scratch" "$ROOTFS/out"
install -d -m 0755 "$ROOTFS/job" "$ROOTFS/var" "$ROOTFS/run"
# The Python prefix is mounted at its host path; create its parents 0755 here so uid 65532 can
# traverse them (on the host /root is 0700).
for p in "$PY_PREFIX" ${PY_VENV:+"$PY_VENV"}; do
  case "$p" in /usr|/usr/*) ;; *) install -d -m 0755 "$ROOTFS$p" ;; esac
done

cat >"$ROOTFS/etc/passwd" <<EOF
root:x:0:0:root:/root:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
sandbox:x:${SANDBOX_UID}:${SANDBOX_GID}:evalsvc sandbox:/scratch:/usr/sbin/nologin
EOF
cat >"$ROOTFS/etc/group" <<EOF
root:x:0:
nogroup:x:65534:
sandbox:x:${SANDBOX_GID}:
EOF
cat >"$ROOTFS/etc/nsswitch.conf" <<EOF
passwd: files
group: files
hosts: files dns
EOF
cp /etc/ld.so.cache "$ROOTFS/etc/ld.so.cache"
cp -a /etc/alternatives "$ROOTFS/etc/alternatives"

# Same environment as docker/Dockerfile.compile: python3 and nvcc on PATH, scratch as HOME.
PATH_IN="${PY_VENV:+$PY_VENV/bin:}${PY_PREFIX}/bin:${CUDA_HOME}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
tar -C "$ROOTFS" --numeric-owner --owner=0 --group=0 -cf - . |
  docker import \
    --change "USER ${SANDBOX_UID}:${SANDBOX_GID}" \
    --change "WORKDIR /scratch" \
    --change "ENV PATH=${PATH_IN}" \
    --change "ENV HOME=/scratch" \
    --change "ENV TMPDIR=/tmp" \
    --change "ENV LANG=C.UTF-8" \
    --change "ENV CUDA_HOME=${CUDA_HOME}" \
    --change "ENV PYTHONPATH=/opt/evalsvc" \
    --change "ENV PYTHONDONTWRITEBYTECODE=1" \
    --change "LABEL evalsvc.inputs=${HASH}" \
    --change "LABEL evalsvc.role=compile-image" \
    --change "LABEL evalsvc.python_prefix=${PY_PREFIX}" \
    --change 'CMD ["python3", "--version"]' \
    --message "evalsvc offline compile image (toolchain bind-mounted at run time)" \
    - "$IMAGE" >/dev/null

# Drop the previous, now untagged, image of ours so repeated rebuilds do not pile up.
docker image prune -f --filter "label=evalsvc.role=compile-image" >/dev/null || true
log "built $IMAGE ($(docker image inspect -f '{{.Size}}' "$IMAGE") bytes, inputs $HASH)"
