#!/usr/bin/env bash
# On a 4-GPU device machine, one call of under 10 minutes: the shipped products-worker example
# through `distgnn run` as written (4 trainers, METIS partitions, features partitioned at the
# default cacheRatio, 10 epochs), then the same job with its features replicated
# (cacheRatio 1, the same partitions); then, for the rest of the call, repeated worker-mode
# runs with partitioned features and evaluation every epoch, two 2-GPU runs at a time
# (device_exchange_proof.sh), every run past its timeout reported as hung with its stacks.
#   OUT=<dir> [CALL_S=590] [EPOCHS=2] bash benchmarks/gpu_distributed/device_example4.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
CALL_S="${CALL_S:-590}"
example() {  # example LABEL [--set KEY=VALUE ...]
  local label="$1"
  shift
  timeout 300 python benchmarks/gpu_distributed/example_run.py \
    manifests/examples/products-worker.yaml --data-dir /tmp/distgnn-example --label "${label}" \
    --timeout 290 --out "${OUT}/example.jsonl" "$@" 2>&1 | grep -v -i warn | tail -n 3 | cut -c1-600
}
example as-written
example replicated --set samplers.cacheRatio=1
left=$((CALL_S - SECONDS))
echo "== proof: ${left} s left"
if ((left > 60)); then
  PROOF_S="${left}" EPOCHS="${EPOCHS:-2}" bash benchmarks/gpu_distributed/device_exchange_proof.sh
fi
