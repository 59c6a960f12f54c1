#!/usr/bin/env bash
# `make test`: lint, then the test suite, with the venv's tools first on PATH (horovodrun, the
# mpirun wrappers, hvd-linreg). `--marks EXPR` first selects tests by marker; further arguments
# go to pytest, e.g. `bash ci/test.sh --marks "not multiprocess" -x`. The single-process tests
# run on as many pytest-xdist workers as there are cores, the multi-process ones after them, one
# at a time (their ranks already fill the cores).
#
# In CI (CI set, as root) the suite runs where users' would: in clean Debian 13 and Debian 12
# roots (ci/cleanroot.sh runs set-up, `make run` and the tests there with the root's own
# python3, 3.13 and 3.11). This machine runs what only it can (SLURM, the namespaced hosts) and
# the multi-process core on Python 3.12. The roots compute while this machine's stage
# mostly waits (stall limits, elastic resets, sbatch), so they run beside it, niced, in a lane of
# their own whose lines start with "[roots]". Outside CI the suite runs here, and each CI stage
# can be asked for:
#   HVD_LINREG_SLURM=1 (a one-node SLURM), HVD_LINREG_MULTIHOST=1 (tests/test_multihost.py on
#   ci/cluster.sh's namespaced hosts), HVD_LINREG_PYTHONS=1, HVD_LINREG_CLEANROOT=1.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$repo/.venv}
export PATH=$venv/bin:$PATH
cd "$repo"

marks=
if [ "${1:-}" = --marks ]; then
  marks=$2
  shift 2
fi

ci=false
[ -n "${CI:-}" ] && [ "$(id -u)" = 0 ] && ci=true
# In CI a skip whose reason tests/conftest.py does not declare fails the stage it happens in,
# the clean roots' included (ci/cleanroot.sh passes it in).
if $ci; then export HVD_LINREG_STRICT_SKIPS=1; fi
# tests/test_multihost.py brings up ci/cluster.sh's hosts and takes them down itself; should
# pytest be killed before its clean-up runs, take them down here (root only: only root has them).
# Only a run that may have brought them up does: the hosts are the machine's, and a run that
# builds none (`make test-fast` beside a CI run) must not take down the hosts another run uses.
lane_pid=
if [ "$(id -u)" = 0 ]; then
  # The roots' lane, if it still runs, ends through cleanroot.sh's own traps (undoing its root).
  trap 'if [ -n "$lane_pid" ]; then kill -- -"$lane_pid" 2>/dev/null; wait "$lane_pid"; fi
    if wanted HVD_LINREG_MULTIHOST; then bash ci/cluster.sh down; fi' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
fi
wanted() { $ci || [ "${!1:-}" = 1 ]; }

# Each stage's line and failure go to files, so that a lane in the background adds its own.
record=$(mktemp -d /tmp/hvd-linreg-test.XXXXXX)
export HVD_LINREG_TIMES=${HVD_LINREG_TIMES:-$record/times} # set-up's and the roots' own times
touch "$record/stages" "$record/failed" "$record/failures" "$HVD_LINREG_TIMES"
# stage NAME COMMAND...: run it, time it, remember whether it passed.
# Its failed tests (pytest's summary lines, the roots' included), or the last lines of a stage
# that failed outside its tests, are listed again at the end, where a reader of the run's last
# lines finds them.
stage() {
  local name=$1 start=$SECONDS status log
  shift
  log=$(mktemp "$record/log.XXXXXX")
  printf '\n=== %s: %s\n' "$name" "$*"
  "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  # pytest's 5 means "no test selected": a stage that selects none has nothing to fail.
  [ "$status" = 5 ] && status=0
  printf '%-28s %-6s %5d s\n' "$name" "$([ "$status" = 0 ] && echo passed || echo FAILED)" \
    $((SECONDS - start)) >>"$record/stages"
  if [ "$status" != 0 ]; then
    echo "$name" >>"$record/failed"
    grep -E '^(FAILED|ERROR|UNDECLARED SKIP) ' "$log" | cut -c1-400 | sed "s/^/$name: /" \
      >>"$record/failures"
    # A stage that failed outside its tests (a set-up, a root's): its last lines say why.
    if ! grep -qE '^(\[roots\] )?(FAILED|ERROR) ' "$log"; then
      tail -n 25 "$log" | cut -c1-300 | sed "s/^/$name: /" >>"$record/failures"
    fi
  fi
  rm -f "$log"
}

# pytest_in PYTHON EXPR ARGS...: the tests EXPR selects, single-process ones on xdist workers
# (one per core), then the multi-process ones alone. 5 (none selected) only if both select none.
pytest_in() {
  local python=$1 expr=${2:+($2) and } status_1 status_2
  shift 2
  "$python" -m pytest -ra -n "$(nproc)" -m "${expr}not multiprocess" "$@"
  status_1=$?
  "$python" -m pytest -ra -m "${expr}multiprocess" "$@"
  status_2=$?
  if [ "$status_1" = 5 ] && [ "$status_2" = 5 ]; then return 5; fi
  for status in "$status_1" "$status_2"; do
    case $status in 0 | 5) ;; *) return "$status" ;; esac
  done
}

# The Debian 12 root's stage, run by the first lane to get here (mkdir is atomic): the other
# lane then finds it taken and goes on.
debian_12() {
  mkdir "$record/debian-12" 2>/dev/null || return 0
  stage "clean Debian 12 root" bash ci/cleanroot.sh --cached bookworm -- \
    "$at_niceness_5" "bash ci/test.sh --marks 'core and not slurm' --durations=10"
}
# A root's tests run at niceness 5, whichever lane runs them: the roots' lane builds at 19, and
# a test there that waits for a launch (a safety net of minutes) starved at 19 while this
# machine's lane computed (a CI run's Debian 13 root failed so). At 5 this machine's lane still
# has three quarters of the CPU it wants.
at_niceness_5='exec nice -n $((5 - $(nice)))'


if $ci && [ "${HVD_LINREG_CLEANROOT:-1}" = 1 ]; then
  # Where users are: Debian 13's python3 is 3.13, Debian 12's is 3.11. Debian 13, today's
  # Debian, proves the two commands from nothing on every run: no cached wheel, venv or pip
  # cache, Horovod built with every patch by its GCC 14 against Open MPI 5 (the build most
  # likely to break), and all of the suite that runs without SLURM and several hosts but the
  # repeated launches. Debian 12 shares this machine's Horovod wheel and pip cache, keyed alike
  # (the same Python minor, Open MPI and GCC as this machine's venv), and runs the core. Each
  # root can run the whole suite: `bash ci/cleanroot.sh bookworm`. The Debian 12 root runs
  # in whichever lane ends its own stages first (debian_12 below): warm, this machine's lane
  # is the shorter; cold, its three set-ups make it the longer.
  set -m # the lane is a process group of its own, which the trap above can end whole
  (
    renice -n 19 -p "$BASHPID" >/dev/null # the waiting stages' time windows keep their CPU
    {
      stage "clean Debian 13 root" bash ci/cleanroot.sh trixie -- "$at_niceness_5" \
        "bash ci/test.sh --marks 'not multihost and not slurm and not repeat and not glmnet' --durations=10"
      debian_12
    } 2>&1 | sed -u 's/^/[roots] /'
  ) &
  lane_pid=$!
  set +m
fi

# This machine's venv (ci/setup.sh, which skips what is done): a stage of its own, so that its
# time is in the table, and in CI after the roots' lane has started, which needs none of it.
# Without it nothing else of this lane can run.
stage set-up bash ci/setup.sh
if grep -qx set-up "$record/failed"; then
  set_up=false
else
  set_up=true
  stage lint bash -c 'ruff check . && ruff format --check .'
fi

# In CI, or when asked, start a one-node SLURM for tests/test_slurm.py. In CI a SLURM that
# cannot start fails the run (else the SLURM promise would go untested without anyone
# noticing); elsewhere that test skips with the reason.
if $set_up && wanted HVD_LINREG_SLURM; then
  if ! bash ci/slurm.sh; then
    if $ci; then
      echo "error: ci/slurm.sh failed (above): CI must run tests/test_slurm.py" >&2
      echo "SLURM start" >>"$record/failed"
    else
      echo "warning: ci/slurm.sh failed; tests/test_slurm.py will skip" >&2
    fi
  fi
fi

# In CI, R and its glmnet (Debian's packages) for the tests that compare with glmnet, which
# run on this machine: a clean root installs only what a user's two commands need. Elsewhere
# those tests skip with the reason where R is missing.
if $set_up && $ci && ! Rscript -e 'library(glmnet)' >/dev/null 2>&1; then
  stage "R and glmnet" bash -c 'source ci/apt.sh && apt_get update -qq &&
    apt_get install -y -qq --no-install-recommends r-base-core r-cran-glmnet >/dev/null'
fi

if ! $set_up; then
  : # its failure is recorded; the roots' lane still ends and reports
elif $ci; then
  # The repeated launches run here, beside the roots' niced lane, as on a machine of one user:
  # a lost line is a race, and this lane keeps its CPU.
  stage "suite, this machine" python -m pytest -ra -m "slurm or multihost or repeat or glmnet" \
    --durations=10 "$@"
else
  stage suite pytest_in python "$marks" "$@"
fi

if $set_up && wanted HVD_LINREG_PYTHONS; then
  # The supported Python that neither this venv nor a clean root covers (those run 3.11 and
  # 3.13): it gets its own venv on the same stack and runs the multi-process core. Found on
  # PATH, else where pyenv keeps it (this CI machine has it there; the tool itself never
  # looks for pyenv).
  for version in 3.12; do
    python=
    for candidate in "python$version" "$HOME"/.pyenv/versions/"$version".*/bin/"python$version"; do
      if "$candidate" -c "import sys; assert '%d.%d' % sys.version_info[:2] == '$version'" 2>/dev/null; then
        python=$(command -v "$candidate")
        break
      fi
    done
    if [ -z "$python" ]; then
      echo "no Python $version on this machine: its stage cannot run" >&2
      echo "Python $version" >>"$record/failed"
      continue
    fi
    other_venv=$repo/.venv-py${version/./}
    stage "Python $version set-up" env PYTHON="$python" VENV="$other_venv" bash ci/setup.sh
    stage "Python $version core" env PATH="$other_venv/bin:$PATH" \
      "$other_venv/bin/python" -m pytest -ra -m core --durations=10 "$@"
  done
fi

if [ -n "$lane_pid" ]; then
  debian_12
  wait "$lane_pid"
  lane_pid=
fi
if ! $ci && wanted HVD_LINREG_CLEANROOT; then
  stage "clean Debian 13 root" bash ci/cleanroot.sh trixie
  stage "clean Debian 12 root" bash ci/cleanroot.sh --cached bookworm
fi

printf '\n=== stages\n'
cat "$record/stages"
printf '%-28s %-6s %5d s\n' "the run, lanes side by side" "" "$SECONDS"
if [ -s "$HVD_LINREG_TIMES" ]; then
  printf '\n=== where the set-up time went\n'
  cat "$HVD_LINREG_TIMES"
fi
if [ -s "$record/failures" ]; then
  printf '\n=== what failed\n'
  cat "$record/failures"
fi
failed=$(paste -sd, "$record/failed" | sed 's/,/, /g')
rm -rf "$record"
if [ -n "$failed" ]; then
  printf 'FAILED: %s\n' "$failed"
  exit 1
fi
