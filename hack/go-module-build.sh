# Sourced by hack/build-controlplane.sh and hack/build-kueue.sh: the steps every pinned Go
# build of this repository shares. Before sourcing, the caller sets LABEL (the log prefix) and
# BIN_DIR; it defines built (true when everything is built and stamped) before calling
# cached_exit or build_lock.
#
#   go_build_key FILE...        12 hex digits of the files' content: the cache key of a bin dir
#   cached_exit                 print BIN_DIR and exit 0 when built says so
#   require_go MINOR WHAT NEED  fail unless go >= 1.MINOR is on PATH ("WHAT (Go >= ... needed)",
#                               "NEED Go >= ...")
#   go_module_cache CACHE_DIR   GOMODCACHE: the module cache under the repository's cache dir
#   go_env                      the build cache and a local, cgo-free toolchain; makes the dirs
#   build_lock LOCK_FILE        one build at a time per cache; exits 0 if another one built it
#   make_staging                STAGING: a temporary dir under BIN_DIR, removed on exit
#   go_install_staged LDFLAGS PKG@VERSION   go install in module mode into STAGING
#   record_build_time NAME SECONDS          append to BIN_DIR/build-times.tsv
# Environment: GOCACHE (default ~/.cache/go-build).

go_build_key() {
  cat "$@" | sha256sum | cut -c1-12
}

cached_exit() {
  if built; then
    echo "${LABEL}: cached in ${BIN_DIR}" >&2
    echo "${BIN_DIR}"
    exit 0
  fi
}

require_go() {
  local min_minor="$1" what="$2" need="$3" go_minor
  if ! command -v go >/dev/null; then
    echo "error: 'go' is not on PATH; ${what} (Go >= 1.${min_minor} needed)" >&2
    exit 1
  fi
  go_minor="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
  if [[ ! "${go_minor}" =~ ^[0-9]+$ ]] || ((go_minor < min_minor)); then
    echo "error: $(go env GOVERSION) is too old; ${need} Go >= 1.${min_minor}" >&2
    exit 1
  fi
}

go_module_cache() {
  export GOMODCACHE="$1/gomod"
}

go_env() {
  export GOCACHE="${GOCACHE:-${HOME}/.cache/go-build}"
  export GOTOOLCHAIN=local CGO_ENABLED=0
  mkdir -p "${BIN_DIR}" "${GOMODCACHE}" "${GOCACHE}"
}

# A second caller (a test run while scripts/test.sh builds) waits here, then finds the
# binaries built.
build_lock() {
  local lock="$1"
  exec 9>"${lock}"
  if ! flock -n 9; then
    echo "${LABEL}: another build holds ${lock}; waiting" >&2
    flock 9
  fi
  if built; then
    echo "${BIN_DIR}"
    exit 0
  fi
}

make_staging() {
  STAGING="$(mktemp -d "${BIN_DIR}/.staging.XXXXXX")"
  trap 'rm -rf "${STAGING}"' EXIT
}

go_install_staged() {
  local ldflags="$1" pkg="$2"
  (cd "${STAGING}" && GOFLAGS="-buildvcs=false -trimpath" GOBIN="${STAGING}" \
    go install -ldflags "${ldflags}" "${pkg}")
}

record_build_time() {
  printf '%s\t%s\t%ss\n' "$1" "$(date -u +%FT%TZ)" "$2" >>"${BIN_DIR}/build-times.tsv"
}
