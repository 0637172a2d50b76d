#!/usr/bin/env bash
# Builds the pinned Kueue controller manager (sigs.k8s.io/kueue/cmd/kueue) from its Go module
# through the Go module proxy, for the Kueue scenarios of the integration tier, and caches it
# under ~/.cache/distgnn. Its CRDs are read from the same module in the module cache. A warm
# run finds the stamp file and returns at once.
#
# Usage: hack/build-kueue.sh [--print-bin-dir|--print-module-dir|--check]
#   (no flag)           build what is missing, then print the bin dir on the last line
#   --print-bin-dir     print the bin dir the pinned version lives in; build nothing
#   --print-module-dir  print where the module's source (and its CRDs) lives; build nothing
#   --check             exit 0 if the binary is built and stamped, 1 otherwise
# Environment: DISTGNN_CACHE (default ~/.cache/distgnn), GOCACHE (default ~/.cache/go-build).
set -euo pipefail

KUEUE_VERSION=v0.17.0
MIN_GO_MINOR=25
MODULE=sigs.k8s.io/kueue

CACHE_DIR="${DISTGNN_CACHE:-${HOME}/.cache/distgnn}"
KEY="$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-12)"
BIN_DIR="${CACHE_DIR}/kueue/${KUEUE_VERSION}-${KEY}/bin"
STAMP="${BIN_DIR}/.complete"
export GOMODCACHE="${CACHE_DIR}/gomod"
MODULE_DIR="${GOMODCACHE}/${MODULE}@${KUEUE_VERSION}"

built() { [[ -f "${STAMP}" && -x "${BIN_DIR}/kueue" && -d "${MODULE_DIR}/config/components/crd/bases" ]]; }

case "${1:-}" in
  --print-bin-dir) echo "${BIN_DIR}"; exit 0 ;;
  --print-module-dir) echo "${MODULE_DIR}"; exit 0 ;;
  --check) built; exit $? ;;
  "") ;;
  *) echo "usage: $0 [--print-bin-dir|--print-module-dir|--check]" >&2; exit 2 ;;
esac

if built; then
  echo "kueue: cached in ${BIN_DIR}" >&2
  echo "${BIN_DIR}"
  exit 0
fi

if ! command -v go >/dev/null; then
  echo "error: 'go' is not on PATH; Kueue is built from its Go module (Go >= 1.${MIN_GO_MINOR} needed)" >&2
  exit 1
fi
go_minor="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
if [[ ! "${go_minor}" =~ ^[0-9]+$ ]] || ((go_minor < MIN_GO_MINOR)); then
  echo "error: $(go env GOVERSION) is too old; ${MODULE}@${KUEUE_VERSION} needs Go >= 1.${MIN_GO_MINOR}" >&2
  exit 1
fi

export GOCACHE="${GOCACHE:-${HOME}/.cache/go-build}"
export GOTOOLCHAIN=local CGO_ENABLED=0
mkdir -p "${BIN_DIR}" "${GOMODCACHE}" "${GOCACHE}"

# One build at a time per cache: a second caller waits, then finds the binary built.
exec 9>"${CACHE_DIR}/kueue/.build.lock"
if ! flock -n 9; then
  echo "kueue: another build holds ${CACHE_DIR}/kueue/.build.lock; waiting" >&2
  flock 9
fi
if built; then
  echo "${BIN_DIR}"
  exit 0
fi

STAGING="$(mktemp -d "${BIN_DIR}/.staging.XXXXXX")"
trap 'rm -rf "${STAGING}"' EXIT
echo "kueue: building ${MODULE}/cmd/kueue@${KUEUE_VERSION} (minutes when cold) ..." >&2
start=${SECONDS}
# The module's go.mod has no replace directives, so 'go install PKG@VERSION' builds it as
# released; the version is stamped the way Kueue's Makefile does.
(cd "${STAGING}" && GOFLAGS="-buildvcs=false -trimpath" GOBIN="${STAGING}" \
  go install -ldflags "-s -w -X ${MODULE}/pkg/version.GitVersion=${KUEUE_VERSION}" \
  "${MODULE}/cmd/kueue@${KUEUE_VERSION}")
mv -f "${STAGING}/kueue" "${BIN_DIR}/kueue"
took=$((SECONDS - start))
printf 'kueue\t%s\t%ss\n' "$(date -u +%FT%TZ)" "${took}" >>"${BIN_DIR}/build-times.tsv"

# The CRDs come from the same module version (downloaded by the build above).
if [[ ! -d "${MODULE_DIR}/config/components/crd/bases" ]]; then
  echo "error: ${MODULE_DIR}/config/components/crd/bases is missing after the build" >&2
  exit 1
fi
{
  echo "kueue ${KUEUE_VERSION}"
  echo "go $(go env GOVERSION)"
} >"${STAMP}"
echo "kueue: built in ${took}s into ${BIN_DIR}" >&2
echo "${BIN_DIR}"
