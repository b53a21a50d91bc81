#!/usr/bin/env python3
"""hcq rdma ls and rdma bench as a user runs them: on a machine whose kernel has no RDMA
(/sys/class/infiniband absent, as on CI) the exact reason; elsewhere the listing's shape. The
bench between two processes over the shared-memory transport (--local), and its usage errors."""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from cli_check import Cli  # noqa: E402

hcq = sys.argv[1]
cli = Cli(hcq, "HCQ_EMULATED_RDMA")  # no emulated NIC: the switch only keeps it unset
run, expect = cli.run, cli.expect

NONE = "this kernel has no RDMA support (/sys/class/infiniband is absent)"
if not os.path.exists("/sys/class/infiniband"):
    expect("hcq rdma ls", run(["rdma", "ls"], emulated=False), f"no RDMA devices: {NONE}\n")
    expect("hcq rdma ls --json", json.loads(run(["rdma", "ls", "--json"], emulated=False)),
           {"devices": [], "none_because": NONE})
    expect("hcq rdma bench --listen (verbs)",
           run(["rdma", "bench", "--listen"], emulated=False, ok=False, status=1),
           f"hcq: rdma: {NONE}: Function not implemented (errno 38)\n")
else:
    ls = json.loads(run(["rdma", "ls", "--json"], emulated=False))
    expect("hcq rdma ls --json keys", sorted(ls), ["devices"] if ls["devices"] else
           ["devices", "none_because"])
    for d in ls["devices"]:
        for p in d["ports"]:
            expect("a port's link layer", p["link_layer"] in ("Ethernet", "InfiniBand"), True)

expect("hcq rdma bench without --listen or HOST",
       run(["rdma", "bench"], emulated=False, ok=False, status=2),
       "hcq: rdma bench: give --listen or HOST\nRun 'hcq rdma bench --help' for usage.\n")
expect("hcq rdma bench --rounds 0",
       run(["rdma", "bench", "--listen", "--rounds", "0"], emulated=False, ok=False,
           status=2).splitlines()[0],
       "hcq: --rounds: '0' is out of range (at least 1)")

# Two processes over the shared-memory transport: one serves, the other measures.
name = f"cli-bench-{os.getpid()}"
server = subprocess.Popen([hcq, "rdma", "bench", "--listen", "--local", name],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
out = run(["rdma", "bench", "--local", name, "--rounds", "1", "--json"], emulated=False)
try:
    s_out, s_err = server.communicate(timeout=60)
except subprocess.TimeoutExpired:
    server.kill()
    s_out, s_err = server.communicate()
expect("the serving side", (server.returncode, s_out, s_err),
       (0, f"rdma bench: served {name} over local (shared memory)\n", ""))
if not out:
    cli.finish("unreachable")  # the failure is recorded: print it and stop
b = json.loads(out)
expect("hcq rdma bench --json keys", list(b),
       ["transport", "round_trip_us", "pings", "bytes", "rounds", "bandwidth"])
expect("transport", b["transport"], "local (shared memory)")
expect("bandwidth rows", [(r["op"], r["memory"]) for r in b["bandwidth"]],
       [("write", "host"), ("read", "host"), ("write", "device (emu:gfx1100)"),
        ("read", "device (emu:gfx1100)")])
expect("figures positive", b["round_trip_us"] > 0 and all(r["gb_per_s"] > 0 for r in b["bandwidth"]),
       True)

cli.finish("rdma cli: ok")
