"""The checks of this host and its name that keep a job from crashing or hanging, made before
Horovod starts, and the machine identity that tells two hosts with one name apart."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

from hvd_linreg.errors import HostError, UsageError
from hvd_linreg.runtime.launcher import job_size, spans_hosts


def check_host_name() -> None:
    """Refuse, before Horovod starts, a host name that would crash or hang the job.

    Gloo binds each rank to the address its host's name resolves to (not to the interface
    horovodrun chose): a name that does not resolve kills every rank with SIGSEGV, a loopback
    address leaves the other hosts connecting to themselves, and another host's address (two
    hosts with one name) cannot be bound. Open MPI takes two hosts with one name for one host and
    crashes in its first collective. Each is seen by the ranks on the bad host alone.
    """
    gloo = "HOROVOD_GLOO_RENDEZVOUS_ADDR" in os.environ
    if job_size() > 1:
        problem = host_name_problem(spans_hosts(), gloo)
        if problem:
            raise HostError(problem)


def host_name_problem(spans_hosts: bool, gloo: bool) -> str | None:
    """What is wrong with this host's name for a job of several ranks, and how to fix it."""
    if not (spans_hosts or gloo):
        return None  # one host under MPI: the name is never looked up
    name = socket.gethostname()
    try:
        address = socket.gethostbyname(name)
    except OSError:
        return (
            f"this host's name {name!r} does not resolve to an address, and Horovod needs it for "
            f"a job across hosts or under Gloo: add the line '<its address> {name}' to /etc/hosts "
            "on this host (127.0.1.1 will do on one machine), or give it a DNS entry"
        )
    if not spans_hosts:
        return None
    if ipaddress.ip_address(address).is_loopback:
        return (
            f"this host's name {name!r} resolves to {address}, a loopback address, but the job "
            f"spans several hosts and the others cannot reach {name} there: in /etc/hosts on "
            f"{name}, put {name} on the line of its network address, not {address}"
        )
    if not _is_own_address(address):
        return (
            f"this host's name {name!r} resolves to {address}, which is not an address of this "
            "host: another host has the same name (a cloned image or container?) or the entry is "
            "stale. Give each host its own name (hostnamectl set-hostname NAME) and an /etc/hosts "
            "or DNS entry with its own address"
        )
    return None


def _is_own_address(address: str) -> bool:
    """Whether this host has the address: only then can a socket be bound to it."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind((address, 0))
        except OSError:
            return False
    return True


def machine_id() -> str:
    """What tells this host from another whatever their names: the kernel's boot id (one per
    machine) and the network namespace (one per container or namespaced host)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/net')}"
    except OSError:  # not Linux: names are all there is
        return socket.gethostname()


def check_distinct_hosts(hosts: list[tuple[str, str]]) -> None:
    """Refuse two hosts of the job with one name: (name, machine_id()) of every rank."""
    seen: dict[str, str] = {}
    for name, host in hosts:
        if seen.setdefault(name, host) != host:
            raise UsageError(
                f"two hosts of this job are both called {name!r}: give each host its own name "
                "(hostnamectl set-hostname NAME), with its own address in /etc/hosts or DNS"
            )


def check_elastic_launch(elastic: bool) -> None:
    """Refuse --elastic without an elastic launch, and an elastic launch without --elastic:
    either way a lost rank would end or restart the run instead of the job going on."""
    launched_elastic = os.environ.get("HOROVOD_ELASTIC") == "1"  # horovodrun's elastic driver
    if elastic and not launched_elastic:
        raise UsageError(
            "--elastic needs Horovod's elastic launcher: horovodrun -np N --min-np M "
            "--host-discovery-script SCRIPT hvd-linreg --elastic (README, Elastic)"
        )
    if launched_elastic and not elastic:
        raise UsageError(
            "horovodrun started this job in elastic mode (--host-discovery-script or --min-np): "
            "add --elastic, so that a lost rank does not end the run"
        )


# Open MPI's daemons notice a lost host by these TCP keep-alives; unset, mpirun can wait for a
# host cut off the network for many minutes after every rank has ended.
KEEPALIVE_SETTINGS = {
    "oob_tcp_keepalive_time": "10",
    "oob_tcp_keepalive_intvl": "5",
    "oob_tcp_keepalive_probes": "3",
}
_MCA_PARAM_FILES = ("/etc/openmpi/openmpi-mca-params.conf", "~/.openmpi/mca-params.conf")


def keepalive_warning(hosts: tuple[str, ...], controller: str, stall_limit_s: float) -> str | None:
    """What rank 0 says when a job across hosts, started by Open MPI's mpirun (also under
    horovodrun), runs without keep-alive settings: a lost node would leave mpirun waiting.

    Not under Open MPI 4 with the watchdog on: there the watchdog's rank ends mpirun and the
    lost host's daemon itself (hvd_linreg/runtime/daemons.py). Open MPI 5's prterun is untested."""
    orte = "OMPI_MCA_orte_hnp_uri" in os.environ  # Open MPI 4's daemons
    daemons = orte or "PRTE_LAUNCHED" in os.environ
    if (
        controller not in ("MPI", "mpi4py")
        or len(set(hosts)) < 2
        or not daemons
        or _keepalives_set()
    ):
        return None
    if orte and stall_limit_s > 0:
        return None
    settings = " ".join(f"OMPI_MCA_{k}={v}" for k, v in KEEPALIVE_SETTINGS.items())
    return (
        "this job spans hosts under Open MPI without its TCP keep-alive settings: if a host "
        "drops off the network, mpirun may wait for it for many minutes after the ranks end. "
        f"Set {settings} where you start the job (docs/launching.md, Several machines)"
    )


def _keepalives_set() -> bool:
    """Whether the keep-alive time is set, in the environment or in an MCA parameter file."""
    if any(f"{p}_MCA_oob_tcp_keepalive_time" in os.environ for p in ("OMPI", "PRTE")):
        return True
    for name in _MCA_PARAM_FILES:
        try:
            text = Path(name).expanduser().read_text()
        except OSError:
            continue
        if any(
            line.split("=")[0].strip() == "oob_tcp_keepalive_time" for line in text.splitlines()
        ):
            return True
    return False
