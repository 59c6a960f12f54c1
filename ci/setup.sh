#!/usr/bin/env bash
# One-time set-up for hvd_linreg: Open MPI, a pinned .venv, and Horovod built from source.
# Safe to run again: every step is skipped when it is already done.
#
# Environment:
#   PYTHON            interpreter for the venv (default: python3.11, else python3)
#   VENV              venv directory (default: .venv in the repo)
#   HVD_LINREG_CACHE  where the built Horovod wheel is cached (default: ~/.cache/hvd_linreg)
set -euo pipefail

HOROVOD_VERSION=0.28.1
TF_VERSION=2.15.1

repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$repo/.venv}
cache=${HVD_LINREG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hvd_linreg}

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

# --- 1. Open MPI: the one on PATH (a cluster module), else Debian's, else stop. ---
if ! command -v mpirun >/dev/null 2>&1 || ! command -v mpicc >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Open MPI (openmpi-bin, libopenmpi-dev) with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
  else
    die "no MPI found. Load your cluster's MPI module (e.g. 'module load openmpi') or install
       Open MPI with its headers: 'sudo apt-get install openmpi-bin libopenmpi-dev'."
  fi
fi
mpi_version=$(mpirun --version 2>&1 | head -n 1)
case "$mpi_version" in
  *"Open MPI"*) ;;
  *) say "warning: '$mpi_version' is not Open MPI; Horovod is tested here with Open MPI 4.1" ;;
esac
mpi_tag=$(printf '%s' "$mpi_version" | tr -cs 'A-Za-z0-9.' '-' | sed 's/-*$//')

# --- 2. The venv with pinned packages. ---
python=${PYTHON:-$(command -v python3.11 || command -v python3)}
py_tag=$("$python" -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')
case "$py_tag" in
  py39|py310|py311) ;;
  *) die "TensorFlow $TF_VERSION needs Python 3.9-3.11; $python is $py_tag. Set PYTHON=/path/to/python3.11." ;;
esac

stamp=$venv/.hvd_linreg-setup
key="horovod-$HOROVOD_VERSION tf-$TF_VERSION $py_tag $mpi_tag $(cksum < "$repo/ci/requirements.txt") $(cksum < "$repo/setup.cfg")"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ]; then
  exit 0
fi

if [ ! -x "$venv/bin/python" ]; then
  say "creating $venv with $python"
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
say "installing pinned packages (ci/requirements.txt)"
"${pip[@]}" install --upgrade pip
"${pip[@]}" install --no-binary mpi4py -r "$repo/ci/requirements.txt"

# --- 3. Horovod: build the wheel once per (Horovod, TF, Python, MPI), then reuse it. ---
wheel_dir=$cache/wheels/horovod-$HOROVOD_VERSION-tf$TF_VERSION-$py_tag-$mpi_tag
if ! ls "$wheel_dir"/horovod-"$HOROVOD_VERSION"-*.whl >/dev/null 2>&1; then
  say "building Horovod $HOROVOD_VERSION from source (a few minutes, once) into $wheel_dir"
  mkdir -p "$wheel_dir"
  # Build against the TensorFlow in the venv (no build isolation), without the frameworks
  # we do not use, with both controllers. No deps: 'horovod[tensorflow]' would pull a
  # different TensorFlow and numpy 2 over the pinned ones.
  tmp=$(mktemp -d "$wheel_dir.tmp.XXXXXX")
  PATH=$venv/bin:$PATH \
  HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 \
  HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS=-j"$(nproc)" \
    "${pip[@]}" wheel --no-build-isolation --no-deps -w "$tmp" "horovod==$HOROVOD_VERSION"
  mv "$tmp"/horovod-*.whl "$wheel_dir"/   # appears in the cache only when complete
  rmdir "$tmp"
fi
"${pip[@]}" install "$wheel_dir"/horovod-"$HOROVOD_VERSION"-*.whl
"${pip[@]}" install --no-deps -e "$repo"

# --- 4. Verify: Horovod must have TensorFlow, MPI and Gloo. ---
check=$(PATH=$venv/bin:$PATH TF_CPP_MIN_LOG_LEVEL=2 "$venv/bin/horovodrun" --check-build)
for need in TensorFlow MPI Gloo; do
  printf '%s\n' "$check" | grep -q "\[X\] $need" \
    || die "Horovod was built without $need:
$check
Remove $wheel_dir and run again."
done
say "Horovod $HOROVOD_VERSION ready with TensorFlow, MPI and Gloo"
printf '%s\n' "$key" > "$stamp"
