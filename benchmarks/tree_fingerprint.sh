#!/usr/bin/env bash
# The fingerprint of the code a benchmark ran: 12 hex digits of one sha1 over the Python files
# of api/, operator/ and workload/ (names and contents). The device scripts write it to
# $OUT/tree.txt (the copy on the device machine carries no trustworthy git history); compare
# it with a commit's to name the code of a result.
#   bash benchmarks/tree_fingerprint.sh              # this checkout's files
#   bash benchmarks/tree_fingerprint.sh --dir DIR    # the tree in DIR (e.g. a before tree)
#   bash benchmarks/tree_fingerprint.sh COMMIT       # a commit of this repository
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fingerprint() {  # in the current directory
  find api operator workload -type f -name '*.py' -print0 | LC_ALL=C sort -z \
    | xargs -0 sha1sum | sha1sum | cut -c1-12
}
case "${1:-}" in
  "") cd "${root}" && fingerprint ;;
  --dir) cd "${2:?--dir needs a folder}" && fingerprint ;;
  *)
    tmp="$(mktemp -d)"
    trap 'rm -rf "${tmp}"' EXIT
    git -C "${root}" archive "$1" api operator workload | tar -x -C "${tmp}"
    cd "${tmp}" && fingerprint
    ;;
esac
