#!/usr/bin/env bash
# One-time set-up for hvd_linreg: system prerequisites, a pinned .venv for the chosen Python,
# and Horovod built from source against it. Safe to run again: every step is skipped when it
# is already done.
#
# Environment:
#   PYTHON            interpreter for the venv (default: the venv's own if it exists, else
#                     python3, else the first python3.X on PATH that the stack is for)
#   VENV              venv directory (default: .venv in the repo)
#   XDG_CACHE_HOME    the one place set-up keeps what it caches (default: ~/.cache): Horovod
#                     wheels in hvd_linreg/wheels, keyed venvs in hvd_linreg/venvs, pip's cache
#                     in pip; emptying it is a true cold start
#   HVD_LINREG_KEYED_VENV=1  make VENV a link to a venv kept in the cache under a key of all its
#                     inputs, so that a fresh clone reuses it (CI); it serves one checkout at a
#                     time (the latest set-up's)
#   HVD_LINREG_STACK  ci/stacks/NAME.txt to install (default: tf2.21)
# `ci/setup.sh --plan` chooses the interpreter, checks the prerequisites and prints the keys
# and what it would do (reuse or build the Horovod wheel, reuse or set up the venv), doing none.
set -euo pipefail
plan=false
[ "${1:-}" = --plan ] && plan=true

HOROVOD_VERSION=0.28.1
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/ci/apt.sh" # apt_get
venv=${VENV:-$repo/.venv}
cache_home=${XDG_CACHE_HOME:-$HOME/.cache}
cache=$cache_home/hvd_linreg
export PIP_CACHE_DIR=$cache_home/pip # over any pip.conf: one place to empty
# The stack: ci/stacks/NAME.txt, whose first line names its Pythons. tf2.21 is the one the tool
# is tested on; tf2.15 is only the bench's baseline (HVD_LINREG_STACK=tf2.15).
stack=${HVD_LINREG_STACK:-tf2.21}
stack_file=$repo/ci/stacks/$stack.txt
setup_cfg=$repo/setup.cfg
# Horovod 0.28.1 (its last release) does not compile against TensorFlow >= 2.19 nor with
# GCC >= 13 as it is: ci/horovod-patches/ has one small patch per cause, applied to its sdist.
patches=("$repo"/ci/horovod-patches/*.patch)

say() { printf 'setup: %s\n' "$*"; }
# shellcheck source=ci/times.sh
. "$repo/ci/times.sh" # step_done, times_line
die() {
  printf 'setup: error: %s\n' "$*" >&2
  exit 1
}
[ -f "$stack_file" ] || die "HVD_LINREG_STACK=$stack: no $stack_file"
pythons=$(sed -n '1s/^# python: //p' "$stack_file")
supported=$(printf '%s' "$pythons" | sed 's/ /, /g')
has_stack() { case " $pythons " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# --- 1. The interpreter: chosen before anything is checked or downloaded. ---
version_of() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }
no_stack() {
  die "$1
       The stack here (TensorFlow $(sed -n 's/^tensorflow-cpu==//p' "$stack_file")) is for Python $supported.
       Python 3.14 needs TensorFlow 2.22, not yet released; Python 3.10 and older are past their
       end of life. Get a supported one, e.g. 'apt-get install python3' (Debian 12 and 13,
       Ubuntu 22.04 to 25.10), 'uv python install 3.13' or pyenv, then run again with
       PYTHON=/path/to/python3.13."
}
if [ -n "${PYTHON:-}" ]; then
  python=$PYTHON
  version=$(version_of "$python") || die "PYTHON=$python does not run"
  has_stack "$version" || no_stack "PYTHON=$python is Python $version."
elif [ -x "$venv/bin/python" ] && version=$(version_of "$venv/bin/python") &&
  has_stack "$version"; then
  # Keep the venv's Python (a newer one on PATH would rebuild it all), by the interpreter
  # behind it: a keyed venv's link is re-pointed below, and a new key's venv starts empty.
  python=$("$venv/bin/python" -c 'import os, sys; print(os.path.realpath(sys.executable))')
else
  python=
  for candidate in python3 $(printf 'python%s ' $pythons); do
    # Run it, not just find it: a pyenv shim is on PATH whether or not it can run.
    if version=$(version_of "$candidate") && has_stack "$version"; then
      python=$(command -v "$candidate")
      break
    fi
  done
  [ -n "$python" ] ||
    no_stack "no Python on PATH has a TensorFlow + Horovod stack (python3 is $(version_of python3 || echo missing))."
fi
tf_version=$(sed -n 's/^tensorflow-cpu==//p' "$stack_file")

# --- 2. System prerequisites, all checked in the first seconds. ---
# Each missing piece as "what: Debian/Ubuntu package"; installed together (root + apt-get) or
# named in one message, before anything is downloaded or built.
missing=()
system_python=false
case $("$python" -c 'import sys; print(sys.base_prefix)') in /usr) system_python=true ;; esac
if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
  missing+=("venv for Python $version: python$version-venv")
fi
if ! "$python" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  missing+=("Python $version headers (mpi4py and Horovod compile against them): python$version-dev")
fi
command -v gcc >/dev/null || missing+=("a C compiler: gcc")
command -v g++ >/dev/null || missing+=("a C++ compiler (Horovod is C++): g++")
command -v git >/dev/null || missing+=("git (applies ci/horovod-patches/ to Horovod's source): git")
if ! command -v mpirun >/dev/null || ! command -v mpicc >/dev/null; then
  missing+=("Open MPI with its headers: openmpi-bin libopenmpi-dev")
fi
if [ ${#missing[@]} -gt 0 ]; then
  packages=$(printf '%s\n' "${missing[@]}" | sed 's/.*: //' | tr '\n' ' ' | sed 's/ $//')
  if ! $plan && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 &&
    { $system_python || ! printf '%s\n' "${missing[@]}" | grep -q '^venv for \|^Python [0-9.]* headers'; }; then
    say "installing with apt-get: $packages"
    apt_get update -qq
    # shellcheck disable=SC2086 # one word per package
    apt_get install -y -qq --no-install-recommends $packages >/dev/null
    step_done apt-get
  else
    list=$(printf '         - %s\n' "${missing[@]}")
    how="apt-get install $packages"
    [ "$(id -u)" = 0 ] || how="sudo $how"
    if ! $system_python && printf '%s\n' "${missing[@]}" | grep -q '^venv for \|^Python [0-9.]* headers'; then
      how="$how; $python is not the system's Python: build it with venv and headers, or pick
       another with PYTHON="
    fi
    die "this machine lacks what the set-up needs, for $python (Python $version):
$list
       Install them ($how) or, on a cluster, load the modules (e.g. 'module load openmpi');
       then run again."
  fi
fi
mpi_version=$(mpirun --version 2>&1 | head -n 1)
case "$mpi_version" in
  *"Open MPI"*) ;;
  *) say "warning: '$mpi_version' is not Open MPI; Horovod is tested here with Open MPI 4.1" ;;
esac
mpi_tag=$(printf '%s' "$mpi_version" | tr -cs 'A-Za-z0-9.' '-' | sed 's/-*$//')

# --- 3. The keys: every input of the Horovod wheel and of the venv, read before either is used. ---
py_tag=py${version/./}
cxx_tag=gxx$(g++ -dumpfullversion 2>/dev/null || g++ -dumpversion)
patch_set=$(cat "${patches[@]}" | cksum | cut -d' ' -f1)
# Horovod is built with --no-build-isolation against what the venv holds (TensorFlow, CMake, ...)
# and with these switches: the stack, the requirements and the switches are all its inputs.
# Release (-O3, no -g; 09-cmake-build-type.patch): Horovod's default RelWithDebInfo spends most
# of its compile and link time on debug information for TensorFlow's headers.
build_env=(HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1
  HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_CMAKE_BUILD_TYPE=Release)
build_inputs=$( {
  cat "${patches[@]}" "$stack_file" "$repo/ci/requirements.txt"
  printf '%s\n' "${build_env[@]}"
} | cksum | cut -d' ' -f1)
wheel_dir=$cache/wheels/horovod-$HOROVOD_VERSION-tf$tf_version-$py_tag-$mpi_tag-$cxx_tag-$build_inputs
# mpi4py is compiled against the MPI on PATH too: its wheel is kept under the same kind of key
# (pip's own wheel cache keys a built wheel by the Python alone, and would hand this venv one
# compiled against another MPI). -g0: the debug information of its one large C file was 3/4 of
# its compile time (210 s against 46 s here).
mpi4py_pin=$(grep '^mpi4py==' "$repo/ci/requirements.txt")
mpi4py_cflags=-g0
cc_tag=gcc$(gcc -dumpfullversion 2>/dev/null || gcc -dumpversion)
mpi4py_dir=$cache/wheels/${mpi4py_pin/==/-}-$py_tag-$mpi_tag-$cc_tag$mpi4py_cflags
# The venv: its Python (by path: a venv is tied to its interpreter) and the wheels' inputs, with
# setup.cfg for the tool's own dependencies.
interpreter=$("$python" -c 'import os, sys; print(os.path.realpath(sys.executable))')
key="horovod-$HOROVOD_VERSION $(basename "$wheel_dir") $(basename "$mpi4py_dir") python $interpreter $(cksum <"$setup_cfg") references $(cksum <"$repo/ci/references.txt") extras $(cksum <"$repo/ci/extras.txt")"
if [ "${HVD_LINREG_KEYED_VENV:-}" = 1 ]; then
  keyed=$cache/venvs/$stack-$py_tag-$(printf '%s' "$key" | cksum | cut -d' ' -f1)
else
  keyed=
fi
if $plan; then
  printf 'wheel %s (%s)\n' "$wheel_dir" "$(ls "$wheel_dir"/horovod-*.whl >/dev/null 2>&1 && echo reuse || echo build)"
  printf 'mpi4py %s (%s)\n' "$mpi4py_dir" "$(ls "$mpi4py_dir"/mpi4py-*.whl >/dev/null 2>&1 && echo reuse || echo build)"
  printf 'venv %s\n' "${keyed:-$venv}"
  exit 0
fi
if [ -n "$keyed" ]; then
  if [ -e "$venv" ] && [ ! -L "$venv" ]; then
    die "HVD_LINREG_KEYED_VENV=1, but $venv is a directory of its own: remove it, or unset it"
  fi
  mkdir -p "$keyed"
  ln -sfn "$keyed" "$venv"
fi
# Everything runs the venv's Python by its real path: pip writes that path into the console
# scripts (horovodrun, hvd-linreg, pytest), and a keyed venv outlives the clone whose link
# would otherwise be in them.
home=$(realpath -m "$venv")
stamp=$home/.hvd_linreg-setup
# The checkout the venv's editable install points to: a keyed venv outlives its clone.
checkout=$home/.hvd_linreg-checkout
mkdir -p "$cache/locks"
exec 8>"$cache/locks/venv-$(printf '%s' "$home" | cksum | cut -d' ' -f1)"
flock 8 # one set-up of a venv at a time
# A console script whose first line runs a Python other than the venv's own (a venv set up
# through a clone's link before the scripts were written by the real path): it breaks once
# that clone is gone, so such a venv is set up again.
foreign_script() {
  local script line
  for script in "$home"/bin/*; do
    [ -f "$script" ] && [ ! -L "$script" ] || continue
    IFS= read -r line <"$script" || continue
    case $line in
      "#!$home/bin/"*) ;;
      '#!'*python*) printf '%s (%s)' "$script" "$line" && return 0 ;;
    esac
  done
  return 1
}
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ]; then
  if foreign=$(foreign_script); then
    say "$foreign does not run $home's Python: setting the venv up again"
    rm -rf "$home"
    mkdir -p "$home"
  else
    if [ "$(cat "$checkout" 2>/dev/null)" != "$repo" ]; then
      "$home/bin/python" -m pip --disable-pip-version-check -q install --no-deps -e "$repo"
      printf '%s\n' "$repo" >"$checkout"
    fi
    exit 0
  fi
fi

# --- 4. The venv with the pinned packages of this Python's stack. ---
if [ -x "$home/bin/python" ] && [ "$(version_of "$home/bin/python")" != "$version" ]; then
  say "$venv is for Python $(version_of "$home/bin/python"), not $version: recreating it"
  rm -rf "$home"
  if [ -n "$keyed" ]; then mkdir -p "$keyed"; fi
fi
if [ ! -x "$home/bin/python" ]; then
  say "creating $venv with $python (Python $version, stack $stack: TensorFlow $tf_version)"
  "$python" -m venv "$home" # venv refuses a link: the link's target
fi
pip=("$home/bin/python" -m pip --disable-pip-version-check -q)
say "installing pinned packages (ci/requirements.txt, ci/stacks/$stack.txt)"
"${pip[@]}" install --upgrade pip
if ! ls "$mpi4py_dir"/mpi4py-*.whl >/dev/null 2>&1; then
  mkdir -p "$mpi4py_dir"
  tmp=$(mktemp -d "$mpi4py_dir.tmp.XXXXXX")
  CFLAGS=$mpi4py_cflags "${pip[@]}" wheel --no-cache-dir --no-deps --no-binary mpi4py \
    -w "$tmp" "$mpi4py_pin"
  mv "$tmp"/mpi4py-*.whl "$mpi4py_dir"/ # appears in the cache only when complete
  rm -rf "$tmp"
fi
"${pip[@]}" install --no-deps "$mpi4py_dir"/mpi4py-*.whl
# tf-keras names the 'tensorflow' package, which would pull the full TensorFlow over
# tensorflow-cpu: it goes in alone, without its dependencies.
"${pip[@]}" install --no-binary mpi4py -r "$repo/ci/requirements.txt" \
  -r <(grep -v '^tf-keras' "$stack_file") -r "$repo/ci/references.txt" -r "$repo/ci/extras.txt"
if grep -q '^tf-keras' "$stack_file"; then
  "${pip[@]}" install --no-deps "$(grep '^tf-keras' "$stack_file")"
fi

step_done "venv and pinned packages"

# --- 5. Horovod: build the wheel once per key (wheel_dir above), then reuse it. ---
wheel_was=cached
if ! ls "$wheel_dir"/horovod-"$HOROVOD_VERSION"-*.whl >/dev/null 2>&1; then
  say "building Horovod $HOROVOD_VERSION from source with ${#patches[@]} patches (a few minutes, once) into $wheel_dir"
  mkdir -p "$wheel_dir"
  tmp=$(mktemp -d "$wheel_dir.tmp.XXXXXX")
  "${pip[@]}" download --no-deps --no-binary horovod -d "$tmp" "horovod==$HOROVOD_VERSION"
  tar -xzf "$tmp/horovod-$HOROVOD_VERSION.tar.gz" -C "$tmp"
  src=$tmp/horovod-$HOROVOD_VERSION
  for patch in "${patches[@]}"; do
    # Outside any git repository (the ceiling), git apply works on plain files, as patch(1) does.
    GIT_CEILING_DIRECTORIES=$tmp git -C "$src" apply "$patch" ||
      die "$(basename "$patch") does not apply to Horovod $HOROVOD_VERSION's source"
  done
  # Build against the TensorFlow in the venv (no build isolation), without the frameworks
  # we do not use, with both controllers. No deps: 'horovod[tensorflow]' would pull a
  # different TensorFlow over the pinned one.
  env PATH="$home/bin:$PATH" "${build_env[@]}" MAKEFLAGS=-j"$(nproc)" \
    "${pip[@]}" wheel --no-cache-dir --no-build-isolation --no-deps -w "$tmp" "$src"
  mv "$tmp"/horovod-*.whl "$wheel_dir"/ # appears in the cache only when complete
  rm -rf "$tmp"
  wheel_was=built
fi
# Its dependencies, then the wheel itself over any Horovod of the same version: pip would keep
# one built with other patches or against another TensorFlow ("already satisfied").
"${pip[@]}" install "$wheel_dir"/horovod-"$HOROVOD_VERSION"-*.whl
"${pip[@]}" install --force-reinstall --no-deps "$wheel_dir"/horovod-"$HOROVOD_VERSION"-*.whl
"${pip[@]}" install --no-deps -e "$repo"
printf '%s\n' "$repo" >"$checkout"
# What this Horovod was compiled against: `hvd-linreg doctor` compares it with what is installed.
printf 'tensorflow %s\npython %s\nmpi %s\ncompiler %s\npatches %s\nwheel %s\n' "$tf_version" \
  "$version" "$mpi_version" "$cxx_tag" \
  "$(for patch in "${patches[@]}"; do basename "$patch" .patch; done | tr '\n' ' ' | sed 's/ $//')" \
  "$wheel_dir" >"$home/horovod-build.txt"
step_done "Horovod ($wheel_was wheel)"

# --- 6. Verify: Horovod must have TensorFlow, MPI and Gloo. ---
# With tf-keras in the stack, Keras 2 behind tf.keras, as the tool itself has it.
legacy_keras=$(grep -q '^tf-keras' "$stack_file" && echo 1 || echo 0)
check=$(PATH=$home/bin:$PATH TF_CPP_MIN_LOG_LEVEL=2 TF_USE_LEGACY_KERAS=$legacy_keras \
  "$home/bin/horovodrun" --check-build)
for need in TensorFlow MPI Gloo; do
  printf '%s\n' "$check" | grep -q "\[X\] $need" ||
    die "Horovod was built without $need:
$check
Remove $wheel_dir and run again."
done
step_done "check"
say "Horovod $HOROVOD_VERSION ready with TensorFlow $tf_version, MPI and Gloo (Python $version)"
printf '%s\n' "$key" >"$stamp"
say "$(times_line "set-up for Python $version")"
