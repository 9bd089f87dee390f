#!/usr/bin/env bash
# Set up what is missing, start the whole stack on this machine, evaluate a bundled example through the
# HTTP API and print its verdict and reward. Add --keep to leave the stack running afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ "${1:-}" = "--keep" ]; then
  exec python3 -m evalsvc.cli up --data-dir var
fi
exec python3 -m evalsvc.cli up --data-dir var --exit-after-demo
