#!/usr/bin/env bash
# `make test`: lint, then the test suite, with the venv's tools first on PATH (horovodrun, the
# mpirun wrappers, hvd-linreg). Extra arguments go to pytest, e.g. `bash ci/test.sh -m "not
# multiprocess"`.
#
# In CI (CI set, as root) the suite runs where a user's would: in a clean Debian 12 root
# (ci/cleanroot.sh runs `make run` and `make test` there, Horovod built from source). This
# machine runs what only it can (SLURM, the namespaced hosts) and the multi-process core on the
# Python 3.12 stack. Outside CI the suite runs here, and each CI stage can be asked for:
#   HVD_LINREG_SLURM=1 (a one-node SLURM), HVD_LINREG_MULTIHOST=1 (tests/test_multihost.py on
#   ci/cluster.sh's namespaced hosts), HVD_LINREG_PY312=1, HVD_LINREG_CLEANROOT=1.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$repo/.venv}
export PATH=$venv/bin:$PATH
cd "$repo"

ci=false
[ -n "${CI:-}" ] && [ "$(id -u)" = 0 ] && ci=true
# tests/test_multihost.py brings up ci/cluster.sh's hosts and takes them down itself; should
# pytest be killed before its clean-up runs, take them down here (root only: only root has them).
if [ "$(id -u)" = 0 ]; then
  trap 'bash ci/cluster.sh down' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
fi
wanted() { $ci || [ "${!1:-}" = 1 ]; }

failed=()
summary=()
# stage NAME COMMAND...: run it, time it, remember whether it passed.
stage() {
  local name=$1 start=$SECONDS status
  shift
  printf '\n=== %s: %s\n' "$name" "$*"
  "$@"
  status=$?
  # pytest's 5 means "no test selected": a stage that selects none has nothing to fail.
  [ "$status" = 5 ] && status=0
  summary+=("$(printf '%-28s %-6s %5d s' "$name" "$([ "$status" = 0 ] && echo passed || echo FAILED)" $((SECONDS - start)))")
  [ "$status" = 0 ] || failed+=("$name")
}

stage lint bash -c 'ruff check . && ruff format --check .'

# In CI, or when asked, start a one-node SLURM for tests/test_slurm.py. In CI a SLURM that
# cannot start fails the run (else the SLURM promise would go untested without anyone
# noticing); elsewhere that test skips with the reason.
if wanted HVD_LINREG_SLURM; then
  if ! bash ci/slurm.sh; then
    if $ci; then
      echo "error: ci/slurm.sh failed (above): CI must run tests/test_slurm.py" >&2
      failed+=("SLURM start")
    else
      echo "warning: ci/slurm.sh failed; tests/test_slurm.py will skip" >&2
    fi
  fi
fi

if $ci; then
  stage "suite, this machine" python -m pytest -ra -m "slurm or multihost" "$@"
else
  stage suite python -m pytest -ra "$@"
fi

if wanted HVD_LINREG_PY312; then
  # The second stack: found on PATH, else where pyenv keeps it (this CI machine has one there;
  # the tool itself never looks for pyenv).
  py312=
  for candidate in python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
    if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
      py312=$(command -v "$candidate")
      break
    fi
  done
  if [ -z "$py312" ]; then
    echo "no Python 3.12 on this machine: the Python 3.12 stage cannot run" >&2
    failed+=("Python 3.12 stack")
  else
    py312_venv=$repo/.venv-py312
    stage "Python 3.12 set-up" env PYTHON="$py312" VENV="$py312_venv" bash ci/setup.sh
    stage "Python 3.12 core" env PATH="$py312_venv/bin:$PATH" \
      "$py312_venv/bin/python" -m pytest -ra -m core "$@"
  fi
fi

if wanted HVD_LINREG_CLEANROOT; then
  # Debian 13's only Python is 3.13, which no stack serves: set-up must stop at once and say so.
  stage "clean Debian 13 root" bash ci/cleanroot.sh trixie -- \
    'if make setup 2>setup.err; then exit 1; fi; cat setup.err
     grep -q "The stacks here are for Python 3.12" setup.err'
  stage "clean Debian 12 root" bash ci/cleanroot.sh bookworm
fi

printf '\n=== stages\n'
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'FAILED: %s\n' "${failed[*]}"
  exit 1
fi
