#!/usr/bin/env bash
# `make test`: lint, then the test suite, with the venv's tools first on PATH (horovodrun, the
# mpirun wrappers, hvd-linreg). Extra arguments go to pytest, e.g. `bash ci/test.sh -m "not
# multiprocess"`.
#
# In CI (CI set, as root) the suite runs where users' would: in clean Debian 13 and Debian 12
# roots (ci/cleanroot.sh runs `make run` and `make test` there with the root's own python3, 3.13
# and 3.11, Horovod built from source). This machine runs what only it can (SLURM, the
# namespaced hosts) and the multi-process core on Python 3.10 and 3.12. Outside CI the suite runs
# here, and each CI stage can be asked for:
#   HVD_LINREG_SLURM=1 (a one-node SLURM), HVD_LINREG_MULTIHOST=1 (tests/test_multihost.py on
#   ci/cluster.sh's namespaced hosts), HVD_LINREG_PYTHONS=1, HVD_LINREG_CLEANROOT=1.
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
  stage "suite, this machine" python -m pytest -ra -m "slurm or multihost" --durations=10 "$@"
else
  stage suite python -m pytest -ra "$@"
fi

if wanted HVD_LINREG_PYTHONS; then
  # The supported Pythons that neither this venv nor a clean root covers (those run 3.11 and
  # 3.13): each gets its own venv on the same stack and runs the multi-process core. Found on
  # PATH, else where pyenv keeps them (this CI machine has them there; the tool itself never
  # looks for pyenv).
  for version in 3.10 3.12; do
    python=
    for candidate in "python$version" "$HOME"/.pyenv/versions/"$version".*/bin/"python$version"; do
      if "$candidate" -c "import sys; assert '%d.%d' % sys.version_info[:2] == '$version'" 2>/dev/null; then
        python=$(command -v "$candidate")
        break
      fi
    done
    if [ -z "$python" ]; then
      echo "no Python $version on this machine: its stage cannot run" >&2
      failed+=("Python $version")
      continue
    fi
    other_venv=$repo/.venv-py${version/./}
    stage "Python $version set-up" env PYTHON="$python" VENV="$other_venv" bash ci/setup.sh
    stage "Python $version core" env PATH="$other_venv/bin:$PATH" \
      "$other_venv/bin/python" -m pytest -ra -m core "$@"
  done
fi

if wanted HVD_LINREG_CLEANROOT; then
  # Where users are: Debian 13's python3 is 3.13, Debian 12's is 3.11. Each root installs
  # everything itself, Horovod built from source with the patches, and runs `make run`. The
  # suite is split between them to keep CI near 50 minutes: Debian 13, today's Debian, runs all
  # of it but the repeated launches (tests/test_lines_get_out.py, about 10 minutes); Debian 12
  # runs those and the multi-process core. Each root can run the whole suite:
  # `bash ci/cleanroot.sh bookworm` (its default command is `make run && make test`).
  stage "clean Debian 13 root" bash ci/cleanroot.sh trixie -- \
    'make run && bash ci/test.sh -m "not repeat" --durations=10'
  stage "clean Debian 12 root" bash ci/cleanroot.sh bookworm -- \
    'make run && bash ci/test.sh -m "core or repeat" --durations=10'
fi

printf '\n=== stages\n'
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'FAILED: %s\n' "${failed[*]}"
  exit 1
fi
