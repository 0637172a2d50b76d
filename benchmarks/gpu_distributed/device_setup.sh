# Sourced by the device scripts: the carried wheels (WHEELS, default .whl: the wheels of
# ../shared/wheels/gpu-py312-torch2.11/ plus prometheus-client, rich and its dependencies,
# pytest, pytest-timeout and py-spy) into /tmp/site, and the three packages on PYTHONPATH.
# On exit, everything under $OUT is packed into $OUT/0-all.tgz (see pack_out). $OUT/tree.txt
# holds the fingerprint of the code (benchmarks/tree_fingerprint.sh).
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
WHEELS="${WHEELS:-.whl}"
# once per machine: scripts that run side by side share the install
if [ ! -e /tmp/site/.installed ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    "${WHEELS}"/*.whl || exit 1
  touch /tmp/site/.installed
fi
devpath() {  # devpath TREE: TREE/build/devpath holds TREE's three packages under their names
  mkdir -p "$1/build/devpath"
  for p in api operator workload; do ln -sfn "../../${p}" "$1/build/devpath/distgnn_${p}"; done
}
devpath .
export PYTHONPATH="/tmp/site:${PWD}/build/devpath" PATH="/tmp/site/bin:${PATH}"
OUT="${OUT:-results/run}"
mkdir -p "${OUT}"
# the code that ran, by content: the copy on the device carries no trustworthy git history
bash benchmarks/tree_fingerprint.sh >"${OUT}/tree.txt"
# At most 8 files come back from a call (the first by name): on exit every script leaves one
# archive of everything under $OUT, named to sort first (traces and archives left out).
pack_out() {
  (cd "${OUT}" && tar czf 0-all.tgz --exclude='*.tgz' --exclude='*.json.gz' -- *) 2>/dev/null || true
}
trap pack_out EXIT
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "${OUT}/gpus.txt"
