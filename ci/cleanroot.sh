#!/usr/bin/env bash
# The README's two commands on a machine nobody prepared: a minimal Debian root (debootstrap
# minbase, then only python3, git, make and ca-certificates, as on a minimal cloud image), a
# fresh clone of this repository in it, and `make run` then `make test` run there as a new user
# would. Needs root (chroot, mounts). Every mount and process is undone on every exit path.
#
# Usage: ci/cleanroot.sh [bookworm|trixie] [-- COMMAND...]
#   default COMMAND: make run && make test
# Environment:
#   HVD_LINREG_DEBIAN_MIRROR  the Debian mirror (default: the one this machine's apt uses)
#   HVD_LINREG_KEEP_ROOT=1    leave the root (unmounted) in /tmp for a look afterwards
set -euo pipefail

suite=${1:-bookworm}
shift || true
[ "${1:-}" = -- ] && shift
command=${*:-make run && make test}
repo=$(cd "$(dirname "$0")/.." && pwd)

say() { printf 'cleanroot: %s\n' "$*"; }
die() {
  printf 'cleanroot: error: %s\n' "$*" >&2
  exit 1
}
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mounts)"

# Everything mounted under a root, deepest first.
mounts_under() { awk -v r="$1/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r; }

undo_root() {
  local root=$1 pid
  # Processes whose root is this one (a rank or daemon left behind) hold its mounts.
  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
    if [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$root" ]; then
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
  for _ in 1 2 3 4 5; do
    for m in $(mounts_under "$root"); do umount "$m" 2>/dev/null || umount -l "$m" || true; done
    [ -z "$(mounts_under "$root")" ] && break
    sleep 1
  done
  if [ -n "$(mounts_under "$root")" ]; then
    # Never delete through a mount: /dev is bound in there.
    printf 'cleanroot: error: still mounted, not deleting %s:\n%s\n' "$root" \
      "$(mounts_under "$root")" >&2
    return 1
  fi
  if [ "${HVD_LINREG_KEEP_ROOT:-}" = 1 ]; then
    say "kept $root"
  else
    rm -rf --one-file-system "$root"
  fi
}

# One run at a time; then whatever root is left belongs to a run that was killed (SIGKILL
# leaves no chance to clean up), and goes first.
exec 9>/tmp/hvd-cleanroot.lock
flock -n 9 || die "another clean-root run is going on"
for old in /tmp/hvd-cleanroot.*/; do
  if [ -d "$old" ]; then undo_root "${old%/}"; fi
done

if ! command -v debootstrap >/dev/null; then
  say "installing debootstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi
mirror=${HVD_LINREG_DEBIAN_MIRROR:-$(
  { sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null || true
    sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\([^ ]*\) .*/\2/p' /etc/apt/sources.list 2>/dev/null || true
  } | grep -v security | head -n 1
)}
[ -n "$mirror" ] || die "no Debian mirror found in /etc/apt; set HVD_LINREG_DEBIAN_MIRROR"

root=$(mktemp -d /tmp/hvd-cleanroot.XXXXXX)
trap 'status=$?; undo_root "$root" || status=1; exit $status' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start=$SECONDS
say "debootstrap --variant=minbase $suite into $root"
debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
  die "debootstrap failed; see $root.debootstrap.log"
rm -f "$root.debootstrap.log"

# The network of this machine is the root's: its resolver, and its CA bundle (apt and pip may
# go through a proxy whose certificate only that bundle has). The /etc/hosts line an installer
# or cloud-init writes for the machine's name (debootstrap writes none).
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl-ca-bundle.crt"
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n' "$(hostname)" >"$root/etc/hosts"

mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --bind /dev "$root/dev"
mount -t devpts devpts "$root/dev/pts" 2>/dev/null || mount --bind /dev/pts "$root/dev/pts"
mount -t tmpfs -o mode=1777 shm "$root/dev/shm" # Open MPI's shared memory between ranks

# A new user's shell: nothing from this machine's environment but the terminal type.
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    SSL_CERT_FILE=/etc/ssl-ca-bundle.crt PIP_CERT=/etc/ssl-ca-bundle.crt \
    REQUESTS_CA_BUNDLE=/etc/ssl-ca-bundle.crt \
    bash -euo pipefail -c "$1"
}

say "apt-get install python3 git make ca-certificates (nothing else)"
in_root 'export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends python3 git make ca-certificates >/dev/null'
before=$(in_root 'apt-mark showmanual' | sort)

git clone -q --bare "$repo" "$root/tmp/hvd_linreg.git"
say "git clone, then: $command   ($(in_root 'python3 --version'), $suite)"
set +e
in_root "git clone -q /tmp/hvd_linreg.git /root/hvd_linreg && cd /root/hvd_linreg && $command"
status=$?
set -e
after=$(in_root 'apt-mark showmanual' | sort)
added=$(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after") | tr '\n' ' ')
say "packages the set-up installed: ${added:-none}"
say "'$command' exited $status after $((SECONDS - start)) s in all"
exit $status
