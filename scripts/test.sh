#!/usr/bin/env bash
# The whole test suite: unit tests, then real compiles in the Docker sandbox, real Redis, Celery and gateway.
set -euo pipefail
cd "$(dirname "$0")/.."
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export EVALSVC_REQUIRE_DOCKER=${EVALSVC_REQUIRE_DOCKER:-1}
ruff check evalsvc workers tests bench
mypy
exec python3 -m pytest -q -p no:cacheprovider --durations=40 "$@"
