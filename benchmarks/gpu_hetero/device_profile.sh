#!/usr/bin/env bash
# On the device machine (1 GPU), one call (~5 minutes): the typed step's host syncs and time.
# 1. The GPU tests of the sync-free typed step, the embeddings and the samplers (captured
#    steps under torch.cuda.set_sync_debug_mode("error"); the fixed-shape step against the
#    eager one; one GPU deterministic and equal to the CPU; captured samplers' batches).
# 2. sampler_time.py (the typed sampler alone) and profile_step.py (the whole step) on the
#    full-scale MAG-shaped graph, bf16, this checkout ("after"),
#    then, if BEFORE names a folder holding an older checkout's workload/ (e.g. made here
#    with `mkdir -p .before && git archive main workload | tar -x -C .before`), the same
#    with that workload on PYTHONPATH ("before"), on the same graph (cached in /tmp).
# SCALE, STEPS, WARMUP and PRECISION can be set.
#   OUT=<dir> [BEFORE=.before] bash benchmarks/gpu_hetero/device_profile.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
SCALE="${SCALE:-1.0}" STEPS="${STEPS:-30}" WARMUP="${WARMUP:-10}" PRECISION="${PRECISION:-bf16}"
timeout 240 python -m pytest -q -p no:cacheprovider --noconftest -m gpu \
  tests/workload/test_hetero_step_syncs.py tests/workload/test_embeddings_gpu.py \
  tests/workload/test_hetero_graph_step.py tests/workload/test_sampling_hetero.py \
  tests/workload/test_sampling_neighbor.py tests/workload/test_sampling_hetero_link.py \
  tests/workload/test_side_streams.py 2>&1 | tail -n 15 | tee "${OUT}/gpu-tests.txt"
profile() {  # $1: label; the PYTHONPATH is the caller's
  timeout 100 python benchmarks/gpu_hetero/sampler_time.py --scale "${SCALE}" \
    --graph-cache /tmp/distgnn-profile-mag.pkl --out "${OUT}/sampler-time-$1.jsonl" 2>&1 \
    | grep -v -i warn | grep '"bench"' | cut -c1-300
  timeout 200 python benchmarks/gpu_hetero/profile_step.py --device cuda --scale "${SCALE}" \
    --precision "${PRECISION}" --warmup "${WARMUP}" --steps "${STEPS}" \
    --graph-cache /tmp/distgnn-profile-mag.pkl --label "$1" \
    --out "${OUT}/profile-step.jsonl" --table "${OUT}/profile-step-$1.txt" 2>&1 \
    | grep -v -i warn | tail -n 3
}
profile after
if [ -n "${BEFORE:-}" ]; then
  mkdir -p build/devpath-before
  ln -sfn "${PWD}/api" build/devpath-before/distgnn_api
  ln -sfn "${PWD}/operator" build/devpath-before/distgnn_operator
  ln -sfn "${PWD}/${BEFORE}/workload" build/devpath-before/distgnn_workload
  PYTHONPATH="/tmp/site:${PWD}/build/devpath-before" profile before
fi
