"""The doctor across hosts (--hosts, --hostfile): ssh, the same venv, distinct host names, a
shared network, then the launch test over all of them."""

from __future__ import annotations

import argparse
import ipaddress
import json
import math
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator

import psutil  # a Horovod dependency

from hvd_linreg.doctor.check import Check
from hvd_linreg.doctor.launch import check_launch, diagnose, mpirun_command
from hvd_linreg.runtime.ranks import say

# What each host says about itself over ssh, in one line (host_report).
HOST_SCRIPT = "from hvd_linreg.doctor.hosts import host_report; host_report()"
SAME_VENV = (
    "every node needs the same venv at the same path: a shared file system, or `make setup` in "
    "a checkout at the same path on that node"
)


def parse_hosts(spec: str) -> list[tuple[str, int]]:
    """'node1:2,node2:2' (horovodrun's -H) as [(host, slots), ...]."""
    hosts = []
    for part in spec.split(","):
        host, _, slots = part.strip().partition(":")
        if not host or not (slots or "1").isdigit() or int(slots or "1") < 1:
            raise argparse.ArgumentTypeError(f"expected host:slots,host:slots..., got {spec!r}")
        hosts.append((host, int(slots or "1")))
    return hosts


def read_hostfile(path: str) -> list[tuple[str, int]]:
    """A hostfile of 'host slots=N' lines (what horovodrun and mpirun read)."""
    try:
        with open(path) as f:
            lines = [line.split() for line in f if line.strip()]
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {e.strerror}") from None
    return parse_hosts(
        ",".join(f"{w[0]}:{w[1].removeprefix('slots=')}" if len(w) > 1 else w[0] for w in lines)
    )


def host_report() -> None:
    """Print what this host is, for the node that runs the doctor: its name, whether that name
    can carry a job across hosts (the tool's own check), the address the name resolves to, its
    IPv4 networks and the versions the tool would report here."""
    import socket

    from hvd_linreg.report import versions
    from hvd_linreg.runtime.hosts import host_name_problem

    name = socket.gethostname()
    try:
        address = socket.gethostbyname(name)
    except OSError:
        address = None
    networks = [
        (nic, f"{a.address}/{a.netmask}")
        for nic, addresses in psutil.net_if_addrs().items()
        for a in addresses
        if a.family == socket.AF_INET and not ipaddress.ip_address(a.address).is_loopback
    ]
    report = {
        "name": name,
        "problem": host_name_problem(spans_hosts=True, gloo=True),
        "address": address,
        "networks": networks,
        "versions": versions(),
    }
    say("doctor-host " + json.dumps(report))


def check_host(host: str, timeout: float) -> tuple[Check, dict | None]:
    """ssh to the host, run this Python there; the result and what the host reported."""
    forward = [f"PYTHONPATH={os.environ['PYTHONPATH']}"] if os.environ.get("PYTHONPATH") else []
    remote = shlex.join(
        ["env", "TF_CPP_MIN_LOG_LEVEL=2", *forward, sys.executable, "-c", HOST_SCRIPT]
    )
    ssh = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={math.ceil(timeout)}", host, remote]
    try:
        proc = subprocess.run(ssh, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return Check(f"{host}: no answer", False, f"ssh timed out after {timeout:g} s"), None
    found = re.search(r"^doctor-host (.*)$", proc.stdout, re.MULTILINE)
    if proc.returncode == 255 and not found:
        seen = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        fix = f"password-less ssh from this node: ssh-keygen, then ssh-copy-id {host}"
        return Check(f"{host}: ssh fails", False, seen, fix), None
    if not found:
        seen, _ = diagnose(proc.stdout + proc.stderr)
        return Check(f"{host}: cannot run {sys.executable}", False, seen, SAME_VENV), None
    report = json.loads(found.group(1))
    name = report["name"]
    if report["problem"]:
        return Check(f"{host}: host name {name!r}", False, "", report["problem"]), report
    from hvd_linreg.report import versions  # imports TensorFlow: only once a host answered

    here = versions()
    differ = [f"{k} {v} (here {here[k]})" for k, v in report["versions"].items() if here[k] != v]
    if differ:
        return Check(f"{host}: other versions", False, ", ".join(differ), SAME_VENV), report
    return Check(f"{host}: {name}, same Python and packages at {sys.executable}", True), report


def interface_setting(nic: str) -> str:
    """The one setting that names the hosts' network interface, as each launcher takes it."""
    return (
        f"export OMPI_MCA_btl_tcp_if_include={nic} OMPI_MCA_oob_tcp_if_include={nic} "
        f"(mpirun), horovodrun --network-interfaces {nic}"
    )


def check_network(reports: dict[str, dict]) -> Check:
    """The hosts share an IPv4 network on which each has its own address, their names resolve
    to addresses on it, and no other network looks shared to Open MPI when it is not."""
    seen: dict[ipaddress.IPv4Network, dict[str, tuple[str, str]]] = {}
    for host, report in reports.items():
        for nic, address in report["networks"]:
            interface = ipaddress.ip_interface(address)
            seen.setdefault(interface.network, {})[host] = (nic, str(interface.ip))
    own = {net: on for net, on in seen.items() if len({ip for _, ip in on.values()}) == len(on)}
    shared = [net for net, on in own.items() if len(on) == len(reports)]
    if not shared:
        where = "; ".join(
            f"{host} {', '.join(f'{a} ({nic})' for nic, a in r['networks']) or 'none'}"
            for host, r in reports.items()
        )
        return Check(
            "the hosts share no network",
            False,
            where,
            "connect every host to one IPv4 network (one subnet), then name its interface: "
            + interface_setting("NIC"),
        )
    nics = sorted({nic for net in shared for nic, _ in seen[net].values()})
    named = ", ".join(
        f"{net} ({'/'.join(sorted({n for n, _ in seen[net].values()}))})" for net in shared
    )
    for host, report in reports.items():
        address = report["address"]
        if address and not any(ipaddress.ip_address(address) in net for net in shared):
            return Check(
                f"{host}'s name {report['name']!r} resolves to {address}, not on {named}",
                False,
                "Gloo ranks bind to that address, and the other hosts cannot reach it",
                f"map {report['name']} to its address on {named} in /etc/hosts or DNS",
            )
    # The same address on several hosts (a docker0 bridge on each, say): Open MPI takes it for a
    # network between them, connects there to itself and hangs, unless told the interface.
    clashes = [net for net, on in seen.items() if len(on) > 1 and net not in own]
    if clashes and not _mpi_interface_named():
        net = clashes[0]
        hosts = sorted(seen[net])
        nic, address = seen[net][hosts[0]]
        return Check(
            f"the same address {address} ({nic}, {net}) on {' and '.join(hosts)}",
            False,
            f"not a network between them, but mpirun may try it and hang; they share {named}",
            "name the interface the hosts share: " + interface_setting(nics[0]),
        )
    return Check(f"the hosts share {named}", True, "each host with its own address there")


def _mpi_interface_named() -> bool:
    return bool(os.environ.get("OMPI_MCA_btl_tcp_if_include"))


def check_hosts(
    hosts: list[tuple[str, int]], mpirun: str, horovodrun: str, timeout: float
) -> Iterator[Check]:
    """Each host over ssh, unique names, a shared network, then a real allreduce across all of
    them per launcher (only when the hosts passed: else the launches could only fail, slowly)."""
    reports: dict[str, dict] = {}
    named: dict[str, str] = {}
    passed = True
    for host, _ in hosts:
        result, report = check_host(host, timeout)
        yield result
        passed &= result.ok
        if report is None:
            continue
        reports[host] = report
        name = report["name"]
        if name in named:
            passed = False
            yield Check(
                f"{host} and {named[name]} are both called {name!r}",
                False,
                "",
                "give each host its own name (hostnamectl set-hostname NAME), with its own "
                "address in /etc/hosts or DNS",
            )
        named.setdefault(name, host)
    if len(reports) == len(hosts):
        network = check_network(reports)
        yield network
        passed &= network.ok
    if not passed:
        yield Check("launches across the hosts", True, "fix the problems above first", skipped=True)
        return
    spec = ",".join(f"{host}:{slots}" for host, slots in hosts)
    ranks = sum(slots for _, slots in hosts)
    forward = [a for v in ("PATH", "PYTHONPATH") if v in os.environ for a in ("-x", v)]
    horovodrun_hosts = [horovodrun, "-np", str(ranks), "-H", spec]
    yield check_launch(horovodrun_hosts, timeout, ranks)
    yield check_launch([*horovodrun_hosts, "--gloo"], timeout, ranks)
    yield check_launch([*mpirun_command(mpirun, ranks), "--host", spec, *forward], timeout, ranks)
