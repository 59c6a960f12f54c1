#!/usr/bin/env bash
# A test cluster on this machine: N hosts made of Linux namespaces, for the multihost tests.
#
#   bash ci/cluster.sh up N           # hosts node1..nodeN (root)
#   bash ci/cluster.sh exec NODE CMD  # run CMD on a host (launch jobs from inside one)
#   bash ci/cluster.sh slurm          # after up: SLURM on the hosts (slurmctld on node1, a slurmd
#                                     # on each); exec then finds it (SLURM_CONF)
#   bash ci/cluster.sh down           # remove everything up and slurm made; safe to run any time
#
# HVD_LINREG_CLUSTER=NAME gives a cluster of another name (namespaces, state, ssh drop-in of its
# own), so that two can run side by side; the default name is "hvdl".
#
# Each host is a network namespace with one interface (eth0) on a bridge that lives in a
# namespace of its own, an address in 198.18.0.0/15 (the benchmarking range: never a real
# network), its own hostname (a UTS namespace around its sshd), its own /etc/hosts
# (/etc/netns/NS/hosts, which `ip netns exec` mounts over /etc/hosts) and an sshd that accepts a
# key made for the cluster. A client drop-in in /etc/ssh/ssh_config.d gives horovodrun and mpirun
# password-less ssh between the hosts with no flags. Nothing is added to this machine's own
# network namespace, so no traffic of the cluster can leave it. The hosts share the file system,
# as a cluster with a shared FS does: the same venv and data paths everywhere.
set -euo pipefail
. "$(dirname "$0")/apt.sh" # apt_get

NAME=${HVD_LINREG_CLUSTER:-hvdl}
[[ $NAME =~ ^[a-z][a-z0-9]{0,7}$ ]] || { echo "cluster.sh: HVD_LINREG_CLUSTER: 1-8 of a-z0-9" >&2; exit 1; }
PREFIX=$NAME-                         # every namespace of the cluster carries it
SWITCH=${PREFIX}switch                # the namespace holding the bridge
SUBNET=198.18.0                       # host i is $SUBNET.i/24 (each cluster has its own bridge)
STATE=/run/hvd-linreg-cluster-$NAME   # the cluster's key, sshd configs and pid files
DROPIN=/etc/ssh/ssh_config.d/hvd-linreg-cluster-$NAME.conf
SLURM_DIR=$STATE/slurm                # the cluster's SLURM: a config per host, spools, logs

die() {
  echo "cluster.sh: $*" >&2
  exit 1
}

host_ns() { echo "${PREFIX}$1"; }

# A shell in host NODE: its network, hostname and mount (its /etc/hosts) namespaces, those of
# its sshd, so that what runs there sees what an ssh session on it sees.
enter() {
  local pid
  pid=$(cat "$STATE/$1.pid" 2>/dev/null) || die "no host $1 (is the cluster up?)"
  if [ -f "$SLURM_DIR/$1/slurm.conf" ]; then export SLURM_CONF=$SLURM_DIR/$1/slurm.conf; fi
  shift
  exec nsenter --target "$pid" --net --uts --mount --wd="$PWD" -- "$@"
}

install_missing() {
  local packages=()
  command -v ip >/dev/null || packages+=(iproute2)
  [ -x /usr/sbin/sshd ] || packages+=(openssh-server)
  command -v ssh >/dev/null || packages+=(openssh-client)
  command -v ssh-keygen >/dev/null || packages+=(openssh-client)
  [ ${#packages[@]} -eq 0 ] && return
  command -v apt-get >/dev/null || die "install ${packages[*]} (no apt-get here)"
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
}

hosts_file() {
  local n=$1 i
  echo "127.0.0.1 localhost"
  for i in $(seq 1 "$n"); do echo "$SUBNET.$i node$i"; done
}

start_host() {
  local i=$1 node=node$1 ns
  ns=$(host_ns "node$1")
  ip netns add "$ns"
  # One veth per host: one end on the bridge, the other the host's eth0.
  ip link add "$node" netns "$SWITCH" type veth peer name eth0 netns "$ns"
  ip -n "$SWITCH" link set "$node" master br0 up
  ip -n "$ns" addr add "$SUBNET.$i/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  mkdir -p "/etc/netns/$ns"
  hosts_file "$2" >"/etc/netns/$ns/hosts"
  cat >"$STATE/$node.sshd_config" <<EOF
ListenAddress $SUBNET.$i
HostKey $STATE/host_key
PidFile none
AuthorizedKeysFile $STATE/id_ed25519.pub
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 100
MaxSessions 100
EOF
  # ip netns exec, unshare and sh each exec the next, so $! is sshd itself.
  ip netns exec "$ns" unshare --uts \
    sh -c "hostname $node; exec /usr/sbin/sshd -D -e -f $STATE/$node.sshd_config" \
    </dev/null >>"$STATE/$node.log" 2>&1 &
  echo $! >"$STATE/$node.pid"
}

up() {
  local n=${1:-}
  [[ $n =~ ^[1-9][0-9]?$ ]] || die "usage: cluster.sh up N (1-99 hosts)"
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces, sshd)"
  install_missing
  down # a cluster left over from an interrupted run would clash with the new one
  trap 'echo "cluster.sh: up failed; removing what it made" >&2; down' ERR
  trap 'down; exit 130' INT TERM
  mkdir -p "$STATE" /run/sshd
  ssh-keygen -q -t ed25519 -N '' -C hvd-linreg-cluster -f "$STATE/id_ed25519"
  ssh-keygen -q -t ed25519 -N '' -C hvd-linreg-cluster-host -f "$STATE/host_key"
  ip netns add "$SWITCH"
  ip -n "$SWITCH" link add br0 type bridge
  ip -n "$SWITCH" link set br0 up
  local i
  for i in $(seq 1 "$n"); do start_host "$i" "$n"; done
  local names
  names=$(seq -f "node%g" 1 "$n" | tr '\n' ' ')
  cat >"$DROPIN" <<EOF
# Written by hvd_linreg's ci/cluster.sh up; removed by ci/cluster.sh down.
Host $names
  IdentityFile $STATE/id_ed25519
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
EOF
  # Ready when every host answers ssh from the first one, by name.
  for i in $(seq 1 "$n"); do
    local tries=0
    until (enter node1 ssh -o BatchMode=yes -o ConnectTimeout=2 "node$i" true) 2>/dev/null; do
      tries=$((tries + 1))
      [ $tries -lt 50 ] || die "node$i does not answer ssh (see $STATE/node$i.log)"
      sleep 0.2
    done
  done
  trap - ERR INT TERM
  echo "cluster.sh: up: $names($SUBNET.1-$n); run jobs with: bash ci/cluster.sh exec node1 CMD"
}

slurm_conf() {
  local i
  cat <<EOF
# Written by hvd_linreg's ci/cluster.sh slurm. A test cluster only: no authentication (auth/none).
ClusterName=$NAME
SlurmctldHost=node1($SUBNET.1)
SlurmUser=root
AuthType=auth/none
CredType=cred/none
$(cat "$(dirname "$0")/slurm-base.conf")
StateSaveLocation=$SLURM_DIR/state
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmctldLogFile=$SLURM_DIR/slurmctld.log
SlurmdSpoolDir=$SLURM_DIR/%n/spool
SlurmdPidFile=$SLURM_DIR/%n/slurmd.pid
SlurmdLogFile=$SLURM_DIR/%n/slurmd.log
EOF
  for i in $(seq 1 "$1"); do echo "NodeName=node$i NodeAddr=$SUBNET.$i CPUs=$(nproc) State=UNKNOWN"; done
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
}

# slurmd needs the cgroup file systems, which a host's own /sys (ip netns exec mounts a fresh
# one) lacks: the commands that mount there what this machine has, hierarchy by hierarchy (a
# bind mount from another mount namespace is refused).
cgroup_mounts() {
  awk '$2 == "/sys/fs/cgroup" && $3 == "tmpfs" { print "mount -t tmpfs -o mode=755 tmpfs " $2 }
    $2 ~ "^/sys/fs/cgroup" && $3 ~ "^cgroup" { print "mkdir -p " $2 "; mount -t " $3 " -o " $4 " cgroup " $2 }' \
    /proc/self/mounts
}

# SLURM on the hosts: slurmctld on node1, a slurmd on each host, each with a config directory of
# its own, for an mpi.conf of its own: in the shared /tmp the hosts' PMIx directories clash.
slurm() {
  [ -d "$STATE" ] || die "the cluster is not up (cluster.sh up N first)"
  if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null; then
    command -v apt-get >/dev/null || die "install slurmctld slurmd slurm-client (no apt-get here)"
    apt_get update -qq
    apt_get install -y -qq --no-install-recommends slurmctld slurmd slurm-client >/dev/null
  fi
  local n i node tries=0
  n=$(find "$STATE" -maxdepth 1 -name 'node*.pid' | wc -l)
  mkdir -p "$SLURM_DIR/state"
  for i in $(seq 1 "$n"); do
    node=node$i
    mkdir -p "$SLURM_DIR/$node/spool" "$SLURM_DIR/$node/pmix"
    slurm_conf "$n" >"$SLURM_DIR/$node/slurm.conf"
    echo "PMIxCliTmpDirBase=$SLURM_DIR/$node/pmix" >"$SLURM_DIR/$node/mpi.conf"
  done
  (enter node1 slurmctld) # each daemon forks into the background, inside its host
  for i in $(seq 1 "$n"); do
    (enter "node$i" sh -c "$(cgroup_mounts)")
    (enter "node$i" slurmd -N "node$i")
  done
  until [ "$( (enter node1 sinfo -h -o %t) 2>/dev/null)" = idle ]; do
    tries=$((tries + 1))
    [ $tries -lt 60 ] || die "SLURM nodes not idle after 30 s (see $SLURM_DIR/)"
    sleep 0.5
  done
  echo "cluster.sh: slurm: node1-$n idle; submit with: bash ci/cluster.sh exec node1 sbatch ..."
}

# Remove everything up made, whatever state it is in: every step tolerates what is missing.
down() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$PREFIX" || true); do
    # Every process in a host (its sshd, ssh sessions, ranks) is in its network namespace.
    for pid in $(ip netns pids "$ns" 2>/dev/null || true); do kill -9 "$pid" 2>/dev/null || true; done
  done
  # An sshd whose namespace is already gone is still known by its pid file (and its config
  # path in its command line, so that a reused pid is never someone else's process).
  for pid in $(cat "$STATE"/*.pid 2>/dev/null || true); do
    if tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q "$STATE"; then kill -9 "$pid"; fi
  done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$PREFIX" || true); do
    ip netns del "$ns" 2>/dev/null || true # takes its veths with it
    rm -rf "/etc/netns/$ns"
  done
  rm -rf /etc/netns/"$PREFIX"* "$STATE" "$DROPIN"
  rmdir /etc/netns 2>/dev/null || true # only if up made it and nothing else uses it
}

case "${1:-}" in
up) up "${2:-}" ;;
slurm) slurm ;;
down) down ;;
exec)
  [ $# -ge 3 ] || die "usage: cluster.sh exec NODE CMD..."
  shift
  enter "$@"
  ;;
*) die "usage: cluster.sh up N | slurm | exec NODE CMD... | down" ;;
esac
