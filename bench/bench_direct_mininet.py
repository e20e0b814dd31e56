"""NTT's eight-node table in Mininet: the three plans run on real sockets, with real NICs in the wire.

Why: the virtual fabric runs NTT's table against the plan (bench_direct_runs ntt); this runs it as a cluster
would: 8 workers x 4 interfaces, one Mininet host each, every circuit a link shaped at L (links.py), each plan
set up by `ina-ctl direct setup` and run by a DirectWorker process per worker:

- ring: two flat rings of circuits both ways (``ring`` x 2), no NICs;
- ring with NIC streaming: ``nic_mesh(2)`` x 2 through the workers' NICs (switches running p4src/nic.p4, both
  meshes set up by one controller);
- optimised topology with NIC streaming: ``nic_mesh(4)`` (K_{4,4}) through the NICs.

Each plan's call (float32, ``--mb`` per worker) is timed as the slowest rank's, after a first call that warms
up; the median of ``--calls`` is printed beside the plan's time, its steps and NTT's.  The NICs are the
built-in P4 target, a software switch per worker: on a small machine they, not the shaped circuits, set the
pace of the NIC rows.  Root and Mininet only.

    sudo .venv/bin/python -m bench.bench_direct_mininet [--gbps 1] [--mb 4] [--calls 3] [--rows ring,nic2,nic4]

Writes bench/results/direct-mininet.csv (a row per plan, as it ends).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bmv2env.direct import DirectNetwork, load_circuits, mininet_site

from bench.common import RESULTS, ROOT, write_rows
from controller import cli, direct
from controller.direct import DirectCluster
from controller.direct_site import DirectSite

# (key, NTT's name, NIC streaming, --kinds, the plan's parts, NTT's steps)
ROWS = (("ring", "ring", False, "ring", ("ring", "ring"), 14),
        ("nic2", "ring, NIC streaming", True, "nic_mesh(2)", ("nic_mesh(2)", "nic_mesh(2)"), 7),
        ("nic4", "optimised topology, NIC streaming", True, "nic_mesh(4)", ("nic_mesh(4)",), 3))
FIELDS = ["plan", "parts", "gbps", "mb", "steps_planned", "ntt_steps", "planned_ms", "median_ms", "calls_ms",
          "ratio", "identical", "wall_s", "error"]


def measure(row: tuple, gbps: float, mb: float, calls: int, timeout: float, tmp: Path) -> dict:
    """One plan in its own Mininet network: a row."""
    key, name, nics, kinds, parts, ntt_steps = row
    began = time.monotonic()
    cluster = DirectCluster(8, 4, gbps, nic_streaming=nics)
    nbytes = int(mb * (1 << 20))
    planned = direct.plan(cluster, nbytes, [kinds])
    got = tuple(p.shape.name for p in planned.parts)
    if got != parts:
        raise SystemExit(f"{name}: the planner gave {got} for --kinds {kinds}, not {parts}")
    where = tmp / key
    where.mkdir()
    cluster_file, circuits_file, site_file = where / "cluster.json", where / "circuits.json", where / "site.json"
    cluster_file.write_text(json.dumps(cluster.to_dict()))
    circuits_file.write_text(json.dumps([list(c) for c in planned.circuits]))
    circuits = load_circuits(circuits_file, cluster)
    site_file.write_text(json.dumps(mininet_site(cluster, circuits, target="builtin").to_dict()))
    out = {"plan": name, "parts": " + ".join(parts), "gbps": gbps, "mb": mb, "steps_planned": planned.steps,
           "ntt_steps": ntt_steps, "planned_ms": planned.seconds * 1e3}
    with DirectNetwork(cluster, circuits, DirectSite.load(site_file), where / "run") as net:
        state = where / "state"
        if cli.main(["direct", "setup", "--cluster", str(cluster_file), "--site", str(site_file), "--size",
                     str(nbytes), "--kinds", kinds, "--state-dir", str(state), "--circuits", str(circuits_file)]):
            raise SystemExit(f"{name}: ina-ctl direct setup failed")
        procs = [net.host(f"w{r}").popen([sys.executable, "-m", "bench.direct_mininet_rank", str(state / "parts.json"),
                                          str(r), str(nbytes // 4), str(calls + 1), "--timeout", str(timeout)],
                                         cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for r in range(8)]
        lines = []
        for p in procs:
            try:
                stdout, stderr = p.communicate(timeout=(calls + 1) * timeout + 60)
            except subprocess.TimeoutExpired:
                p.kill()
                stdout, stderr = p.communicate()
            lines.append([json.loads(x) for x in stdout.decode().splitlines() if x.startswith("{")])
            if p.returncode:
                out["error"] = (lines[-1][-1].get("error", "") if lines[-1] else stderr.decode()[-300:])[:300]
    done = min(len(x) for x in lines)
    if done < calls + 1 or any("error" in x[-1] for x in lines):
        out.setdefault("error", f"{done} of {calls + 1} calls on every rank")
    slowest = [max(x[k]["seconds"] for x in lines) * 1e3 for k in range(1, done) if all("seconds" in y[k] for y in
                                                                                         lines)]
    if slowest:
        out.update(median_ms=statistics.median(slowest), calls_ms=" ".join(f"{t:.1f}" for t in slowest),
                   ratio=statistics.median(slowest) / out["planned_ms"])
    out["identical"] = done > 0 and all(len({x[k].get("digest") for x in lines}) == 1 for k in range(done))
    out["wall_s"] = time.monotonic() - began
    print(f"{name} ({out['parts']}): plan {out['planned_ms']:.2f} ms in {out['steps_planned']} steps (NTT's "
          f"{ntt_steps}); Mininet median {out.get('median_ms', float('nan')):.1f} ms over calls "
          f"[{out.get('calls_ms', '')}] ms, {out.get('ratio', float('nan')):.1f}x the plan, identical "
          f"{out['identical']}, wall {out['wall_s']:.0f} s {out.get('error', '')}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gbps", type=float, default=1.0, help="each circuit's rate (default 1 Gbit/s)")
    ap.add_argument("--mb", type=float, default=4.0, help="MiB of float32 per worker and call (default 4)")
    ap.add_argument("--calls", type=int, default=3, help="timed calls after the first (default 3)")
    ap.add_argument("--timeout", type=float, default=60.0, help="each rank's DirectWorker timeout, s")
    ap.add_argument("--rows", default=",".join(r[0] for r in ROWS), help="which plans: ring, nic2, nic4")
    args = ap.parse_args()
    wanted = args.rows.split(",")
    unknown = sorted(set(wanted) - {r[0] for r in ROWS})
    if unknown:
        ap.error(f"--rows: {unknown} not among {[r[0] for r in ROWS]}")
    rows: list[dict] = []
    csv_path = RESULTS / "direct-mininet.csv"
    with tempfile.TemporaryDirectory(prefix="ina-direct-mininet-") as tmp:
        for row in (r for r in ROWS if r[0] in wanted):
            rows.append(measure(row, args.gbps, args.mb, args.calls, args.timeout, Path(tmp)))
            write_rows(csv_path, rows, FIELDS)
    print(f"\n| plan | parts | steps planned (NTT's) | plan | Mininet, median of {args.calls} |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['plan']} | {r['parts']} | {r['steps_planned']} ({r['ntt_steps']}) | {r['planned_ms']:.2f} ms | "
              f"{r.get('median_ms', float('nan')):.1f} ms |")
    print(f"wrote {csv_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
