#!/usr/bin/env bash
# The single-GPU benchmark suite on a GPU machine: our pipeline (bf16, fp32, tf32),
# a torch.profiler table per precision, the PyG NeighborLoader baseline and the gpu-marked
# tests of sampling/models/loader. Logs and JSON lines go to $OUT. Needs the wheels of
# ../shared/wheels/gpu-py312-torch2.11/ (plus pytest's) copied into .wheels/.
set -u
OUT=${OUT:-/tmp/distgnn-bench}
mkdir -p "$OUT"
LOG=$OUT/log.txt
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .wheels/*.whl || exit 1
mkdir -p build/devpath
ln -sfn ../../api build/devpath/distgnn_api
ln -sfn ../../workload build/devpath/distgnn_workload
export PYTHONPATH=/tmp/site:$PWD/build/devpath
{
    nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv
    python3 -c "import torch, torch_geometric; print(torch.__version__, torch_geometric.__version__)"
    nproc
} >>"$LOG" 2>&1
echo "== pipeline_bench" >>"$LOG"
timeout "${BENCH_TIMEOUT:-220}" python3 benchmarks/gpu/pipeline_bench.py \
    --precision ${PRECISIONS:-bf16 fp32 tf32} --aggregation segment embedding_bag \
    --sampler graph static dynamic --pipeline-sampler graph dynamic \
    --prefetch ${PREFETCH:-1 2} --torch-profile bf16 fp32 --profile-dir "$OUT" \
    --out "$OUT/bench.jsonl" >>"$LOG" 2>&1
echo "== pipeline_bench rc=$?" >>"$LOG"
timeout "${PYG_TIMEOUT:-120}" python3 benchmarks/gpu/pyg_baseline.py --workers 12 \
    --out "$OUT/bench.jsonl" >>"$LOG" 2>&1
echo "== pyg_baseline rc=$?" >>"$LOG"
timeout "${TEST_TIMEOUT:-60}" python3 -m pytest -q -p no:cacheprovider --noconftest -m gpu \
    tests/workload/test_sampling_neighbor.py tests/workload/test_models_gnn.py \
    tests/workload/test_loader_batches.py >>"$LOG" 2>&1
echo "== pytest gpu rc=$?" >>"$LOG"
grep -E "^== |Error|error|Traceback" "$LOG" | tail -20
python3 benchmarks/gpu/summarise.py "$OUT/bench.jsonl"
