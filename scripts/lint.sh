#!/usr/bin/env bash
# Static checks: ruff lint, ruff format, mypy (strict, config in pyproject.toml) and the
# import-layer contracts in .importlinter. Runs every check and fails if any failed.
#
# mypy cannot map the folders api/, operator/, workload/ to their import names
# (setuptools package-dir does that), so this script checks them through a directory of
# symlinks named distgnn_api, distgnn_operator, distgnn_workload, kept outside the
# repository, with its own mypy cache.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
PYTHON="${PYTHON:-python}"
CACHE_DIR="${DISTGNN_CACHE:-${HOME}/.cache/distgnn}"
TYPECHECK_DIR="${CACHE_DIR}/typecheck/$(printf '%s' "${ROOT}" | sha256sum | cut -c1-12)"

# The import-name -> folder mapping, read from setup.py (its one source).
mapfile -t PACKAGES < <("${PYTHON}" -P - <<'EOF'
import ast
tree = ast.parse(open("setup.py").read())
for node in ast.walk(tree):
    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "PACKAGE_DIRS":
        for name, folder in ast.literal_eval(node.value).items():
            print(f"{name}={folder}")
EOF
)
if ((${#PACKAGES[@]} == 0)); then
  echo "lint: could not read PACKAGE_DIRS from setup.py" >&2
  exit 1
fi

mkdir -p "${TYPECHECK_DIR}/path"
mypy_packages=()
for entry in "${PACKAGES[@]}"; do
  name="${entry%%=*}"
  ln -sfn "${ROOT}/${entry#*=}" "${TYPECHECK_DIR}/path/${name}"
  mypy_packages+=(-p "${name}")
done

failed=()
run() {
  local label="$1"
  shift
  echo "==> ${label}: $*"
  local start=${SECONDS}
  if "$@"; then
    echo "    ${label} ok ($((SECONDS - start))s)"
  else
    echo "    ${label} FAILED ($((SECONDS - start))s)"
    failed+=("${label}")
  fi
}

run "ruff check" "${PYTHON}" -P -m ruff check .
run "ruff format" "${PYTHON}" -P -m ruff format --check .
run "mypy" env MYPYPATH="${TYPECHECK_DIR}/path" "${PYTHON}" -P -m mypy \
  --cache-dir "${TYPECHECK_DIR}/mypy_cache" "${mypy_packages[@]}" -p tests
run "import-linter" "${PYTHON}" -P -c "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"

if ((${#failed[@]})); then
  echo "lint: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "lint: all checks passed"
