#!/usr/bin/env bash
# A real one-node SLURM on this machine, so that tests/test_slurm.py can submit
# hostfiles/slurm_job.sh with sbatch. Needs root and apt-get (CI). There is no systemd in CI
# containers, so munged, slurmctld and slurmd are started directly; everything talks to
# localhost only. Idempotent: when the node is already up with this config it returns at once.
set -euo pipefail
. "$(dirname "$0")/apt.sh" # apt_get

conf=/etc/slurm/slurm.conf
logs=/var/log/slurm
# At least 4 CPUs whatever the machine has, so that 2-4 tasks fit on a 2-core runner
# (SlurmdParameters=config_overrides makes slurmd trust this number instead of draining the node).
cpus=$(($(nproc) > 4 ? $(nproc) : 4))
# Settings shared by every SLURM of the tests: ci/slurm-base.conf (ci/cluster.sh reads it too).
config="ClusterName=hvdci
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/munge
$(cat "$(dirname "$0")/slurm-base.conf")
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$logs/slurmctld.log
SlurmdLogFile=$logs/slurmd.log
NodeName=localhost CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"

node_state() { sinfo -h -n localhost -o %t 2>/dev/null || true; }
running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Jobs of the tests that a killed run left behind: a srun killed by SIGKILL leaves its job
# "running" in slurmctld, holding the node's CPUs, and every srun of the next run then waits
# until its launch limit (seen: two repeated-launch tests failing at 180 s each). Runs on this
# machine take turns (the suite is the only submitter), so none of these jobs is a live one.
cancel_leftovers() {
  local jobs
  jobs=$(squeue -h -u root -n hvd-linreg -o %i 2>/dev/null | paste -sd' ' || true)
  if [ -n "$jobs" ]; then
    echo "slurm: cancelling jobs an earlier run left: $jobs"
    # shellcheck disable=SC2086
    scancel $jobs || true
  fi
}

# Already up with this very config: nothing to do but the leftovers.
if command -v sinfo >/dev/null && [ "$(cat "$conf" 2>/dev/null)" = "$config" ] &&
  node_state | grep -qxE 'idle|mix|alloc'; then
  echo "slurm: already up ($(node_state))"
  cancel_leftovers
  exit 0
fi

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "slurm: needs root and apt-get" >&2
  exit 1
fi
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null ||
  ! command -v sinfo >/dev/null || ! command -v munged >/dev/null; then
  apt_get update -qq
  apt_get install -y -qq slurmctld slurmd slurm-client munge >/dev/null
fi

# munge authenticates every SLURM message; the package usually creates the key, but not always.
if [ ! -s /etc/munge/munge.key ]; then
  mungekey --create --keyfile=/etc/munge/munge.key
fi
chown munge:munge /etc/munge/munge.key
chmod 400 /etc/munge/munge.key
install -d -o munge -g munge -m 755 /run/munge
if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
  runuser -u munge -- munged # forks into the background
fi

# A changed config needs restarted daemons (a new node definition is not reloaded).
mkdir -p "$logs" /var/spool/slurmctld /var/spool/slurmd
if [ "$(cat "$conf" 2>/dev/null)" != "$config" ]; then
  for pidfile in /run/slurmctld.pid /run/slurmd.pid; do
    if running "$pidfile"; then kill "$(cat "$pidfile")"; fi
  done
  sleep 1
  printf '%s\n' "$config" >"$conf"
fi
# Both fork into the background and log to $logs. The node's name is "localhost", not this
# machine's host name, hence slurmd -N.
running /run/slurmctld.pid || slurmctld
running /run/slurmd.pid || slurmd -N localhost

for _ in $(seq 60); do
  state=$(node_state)
  case $state in
    idle | mix | alloc)
      echo "slurm: node localhost is $state"
      cancel_leftovers
      exit 0
      ;;
    down* | drain* | drng* | fail*) scontrol update nodename=localhost state=resume || true ;;
  esac
  sleep 1
done
echo "slurm: node localhost not idle after 60 s (state: ${state:-no answer})" >&2
for log in "$logs/slurmctld.log" "$logs/slurmd.log"; do
  echo "--- tail of $log" >&2
  tail -n 20 "$log" >&2 || true
done
exit 1
