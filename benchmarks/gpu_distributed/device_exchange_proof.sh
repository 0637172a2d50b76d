#!/usr/bin/env bash
# On a 4-GPU device machine, one call of at most 9 minutes: repeated worker-mode runs with
# partitioned features (cacheRatio 0.2, 2 GPUs each) and evaluation every epoch, two at a
# time (GPUs 0,1 and 2,3), up to 15 runs each: every run that outlives its timeout is
# reported as hung, with the stacks of every process. The count of runs that finished, hung
# or failed is in the tails of proof-a.log and proof-b.log. On a machine of 2 or 3 GPUs,
# one run at a time (proof-a only).
#   OUT=<dir> [PROOF_S=500] [EPOCHS=3] [PROOF_RUNS=15] bash benchmarks/gpu_distributed/device_exchange_proof.sh
# (PROOF_RUNS: the most runs of each half; the budget may end them sooner)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
PROOF_S="${PROOF_S:-500}"
half() {
  CUDA_VISIBLE_DEVICES="$1" timeout "${PROOF_S}" python benchmarks/gpu_distributed/bench.py \
    --repeats "${PROOF_RUNS:-15}" --epochs "${EPOCHS:-3}" --eval-every 1 --run-timeout 60 --budget "$((PROOF_S - 5))" \
    --work-dir "/tmp/distgnn-proof-$2" --runs worker-2-bf16-0.2 \
    --out "${OUT}/proof-$2.jsonl" 2>&1 | grep -v Warning > "${OUT}/proof-$2.log"
}
if (($(nvidia-smi --list-gpus | wc -l) >= 4)); then
  half 0,1 a &
  first=$!
  half 2,3 b
  wait "${first}"
  tail -n 4 "${OUT}/proof-a.log" "${OUT}/proof-b.log"
else
  half 0,1 a
  tail -n 4 "${OUT}/proof-a.log"
fi
