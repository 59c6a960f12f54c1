# Sourced by the scripts that install Debian packages (setup.sh, cleanroot.sh, slurm.sh,
# cluster.sh). CI runs them side by side, and apt takes its locks without waiting: on a machine
# that had to install everything, the clean roots' `apt-get update` failed at once because the
# set-up's held /var/lib/apt/lists/lock. So each apt-get of ours waits for the others' (flock),
# and for anyone else's: DPkg::Lock::Timeout waits for dpkg's lock, and a run that finds the
# package lists' lock held (which that option does not cover) is tried again.

# apt_get ARGS...: apt-get ARGS, one at a time, noninteractive.
apt_get() {
  local err tries=0 status
  err=$(mktemp)
  while :; do
    status=0
    DEBIAN_FRONTEND=noninteractive flock /var/lib/apt/hvd_linreg.lock \
      apt-get -o DPkg::Lock::Timeout=600 "$@" 2>"$err" || status=$?
    # Held by an apt outside these scripts: wait for it, up to 10 minutes.
    if [ "$status" = 0 ] || ! grep -q "Could not get lock" "$err" || [ "$tries" -ge 120 ]; then
      cat "$err" >&2
      rm -f "$err"
      return "$status"
    fi
    tries=$((tries + 1))
    sleep 5
  done
}
