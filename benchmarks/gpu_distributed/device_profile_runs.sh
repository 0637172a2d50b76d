#!/usr/bin/env bash
# On the device machine, one call: bench.py's runs once each, trainer 0 of every run profiled
# over steps 20-40 of its first epoch (torch.profiler), and each trace summarised by
# trace_gaps.py (the GPU's idle time, what the host threads did meanwhile, and per host
# thread its time by operator): where a partitioned run loses against a replicated one.
# The summaries are 1-gaps-<run>.json; the traces come back as 2-trace-<run>.json.gz.
#   OUT=<dir> RUNS="worker-2-bf16 worker-2-bf16-0.2" bash benchmarks/gpu_distributed/device_profile_runs.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
RUNS="${RUNS:-worker-2-bf16 worker-2-bf16-0.2}"
BUDGET_S="${BUDGET_S:-200}"
# shellcheck disable=SC2206
runs=(${RUNS})
timeout "$((BUDGET_S + 30))" python benchmarks/gpu_distributed/bench.py --repeats 1 \
  --eval-every 1 --run-timeout 60 --budget "${BUDGET_S}" --work-dir /tmp/distgnn-profile \
  --profile "${runs[@]}" --runs "${runs[@]}" --out "${OUT}/bench.jsonl" 2>&1 \
  | grep -v Warning >"${OUT}/bench.log"
tail -n "$((${#runs[@]} + 2))" "${OUT}/bench.log"
for trace in "${OUT}"/trace-*.json.gz; do
  [ -e "${trace}" ] || continue
  run="$(basename "${trace}" .json.gz)"
  run="${run#trace-}"
  python benchmarks/gpu_distributed/trace_gaps.py "${trace}" --steps 20 --top 15 \
    --out "${OUT}/1-gaps-${run}.json" >/dev/null
  mv "${trace}" "${OUT}/2-trace-${run}.json.gz"
  echo "== ${run}: $(python -c 'import json,sys; d=json.load(open(sys.argv[1])); print({k: d[k] for k in ("span_ms_per_step", "busy_ms_per_step", "idle_ms_per_step")})' "${OUT}/1-gaps-${run}.json")"
done
