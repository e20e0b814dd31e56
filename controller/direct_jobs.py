"""From a direct-connect plan (``controller.direct``) and the cluster's real addresses (``controller.direct_site``)
to what every rank's ``worker.direct.DirectWorker`` runs.

A tree part is an ordinary INA job on its devices: ``part_network`` is the part's topology
(``controller.direct.tree_topology``'s links) with the site's addresses and the devices' P4Runtime access, and
``create_parts`` has a controller of its own per tree part set the devices up and create the job.  A ring_tree
part's devices are set up the same way, their job over the chain ends (``chain_network``, from
``controller.ring_tree.device_topology``), and every worker's relay from that job's numbers and the site's
addresses (``chain_part``).  A NIC mesh part is a job too, on the workers' streaming NICs (``mesh_network``:
``controller.nic_mesh``'s topology with the site's addresses, every NIC running p4src/nic.p4): its job's trees
are the mesh routes' meeting trees, and a rank runs it as it runs a tree part (``TreePart``: an INA job of
several trees, each through the rank's own NIC); several meshes share the NICs and one controller
(``meshes_network``), a job each.  A ring or torus part needs nothing installed, only every worker's listening
addresses (``ring_part``, ``torus_part``).  DirectWorker runs every kind; a plan that puts a NIC mesh beside parts
whose traffic would cross the NICs is refused by name before anything is installed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from controller.circuits import end_of
from controller.controller import Controller
from controller.direct import RUNS_ON_SOCKETS, DirectCluster, DirectError, DirectPlan, Part, tree_topology
from controller.direct_site import DirectSite
from controller.network import Network, SwitchAccess
from controller.nic_mesh import host, mesh_job, mesh_topology, nic
from controller.p4runtime_client import SwitchError
from controller.pipeline import PipelineOptions
from controller.ring_tree import OWN, chain_ends, chain_spec, device_interfaces, device_topology, relay_roles
from controller.state import STATE_FILE
from controller.topology import Topology
from worker.chain import ChainLink, ChainPart, ChainRelay
from worker.direct import RingPart, TorusPart, TreePart, parts_to_json
from worker.jobspec import JobSpec

log = logging.getLogger("ina.direct")
WHY_NOT: dict[str, str] = {}  # kinds DirectWorker does not run, and why (none now)
CHAIN_RELAY = ("127.0.0.1", "02:00:00:00:00:00")  # the chain spec's relay: in-process (worker.chain), never on a wire
PARTS_FILE = "parts.json"  # in the state directory: what every rank loads
ELECTION_ID = 2  # as ina-ctl's other commands that change switches: a watch (id 1) may hold them


def check_runnable(plan: DirectPlan) -> None:
    """Every part is one DirectWorker runs, and NIC meshes are the plan's only parts (a DirectError naming the
    first part that is not).  A streaming NIC (nic.p4) sits in the wire of every interface and passes only its
    meshes' traffic (its routes are their hosts, its jobs their trees), so a tree, ring or torus part on the same
    interfaces' circuits would be dropped by the NICs.  Several meshes share the NICs: one controller sets them
    up, with a job per mesh (``meshes_network``)."""
    for k, part in enumerate(plan.parts):
        if part.shape.kind not in RUNS_ON_SOCKETS:
            why = WHY_NOT.get(part.shape.kind, f"DirectWorker runs {', '.join(RUNS_ON_SOCKETS)} parts only")
            raise DirectError(f"part {k + 1}/{len(plan.parts)} is {part.shape.name}: {why}; plan without it "
                              f"(--kinds {','.join(RUNS_ON_SOCKETS)})")
    meshes = [k for k, part in enumerate(plan.parts) if part.shape.kind == "nic_mesh"]
    others = [k for k in range(len(plan.parts)) if k not in meshes]
    if meshes and others:
        k = others[0]
        raise DirectError(f"part {k + 1}/{len(plan.parts)} is {plan.parts[k].shape.name} beside the NIC mesh part "
                          f"{meshes[0] + 1} ({plan.parts[meshes[0]].shape.name}): the streaming NICs pass only their "
                          f"meshes' traffic, so NIC meshes run without other parts; plan with --kinds nic_mesh")


def part_network(cluster: DirectCluster, plan: DirectPlan, k: int, site: DirectSite) -> Network:
    """Tree part ``k`` as a network the controller sets up: worker w is host h<w+1> at its address on the
    part's interface, device j is switch d<j> at the site's address and P4Runtime access, linked as
    ``tree_topology`` links them."""
    part = _part(cluster, plan, k, site, "tree")
    return _addressed(tree_topology(cluster, part), {w: part.interfaces[0] for w in range(cluster.workers)},
                      part, site, f"part {k + 1}/{len(plan.parts)}")


def chain_network(cluster: DirectCluster, plan: DirectPlan, k: int, site: DirectSite) -> Network:
    """Ring_tree part ``k``'s devices as a network the controller sets up: the devices and the chain ends (worker
    w as host h<w+1> at its address on the interface whose circuit goes to its device), as
    ``controller.ring_tree.device_topology`` links them.  The circuits between workers are the relays' own."""
    part = _part(cluster, plan, k, site, "ring_tree")
    return _addressed(device_topology(cluster, part), device_interfaces(cluster, part), part, site,
                      f"part {k + 1}/{len(plan.parts)}")


def _addressed(topology: dict, interface_of: dict[int, int], part: Part, site: DirectSite, where: str) -> Network:
    """A part's topology with the site's addresses: worker w (h<w+1>) on interface ``interface_of[w]``, the
    devices with their addresses and P4Runtime access."""
    for w, interface in interface_of.items():
        end = site.workers[w][interface]
        topology["hosts"][f"h{w + 1}"] = {"ip": str(end.ip), "mac": end.mac}
    for j in part.devices:
        device = site.devices[j]
        topology["switches"][f"d{j}"].update(ip=str(device.ip), mac=device.mac)
    return Network(Topology.from_dict(topology, where), {f"d{j}": site.devices[j].access for j in part.devices})


def mesh_network(cluster: DirectCluster, plan: DirectPlan, k: int, site: DirectSite) -> Network:
    """NIC mesh part ``k`` as a network the controller sets up: worker w is host ``mesh_hosts(plan, k)``h<w+1> at
    its address on the part's first interface (the one its NIC's host port faces), its NIC switch n<w> at the
    site's ``nic`` address and P4Runtime access, running the NIC program, linked as ``mesh_topology`` links
    them."""
    part = _part(cluster, plan, k, site, "nic_mesh")
    topology = mesh_topology(cluster, part, host_prefix=mesh_hosts(plan, k))
    interface = part.interfaces[0]
    access = {}
    for w in range(cluster.workers):
        end, card = site.workers[w][interface], site.nic(w)
        if card is None:
            raise DirectError(f"site: workers[{w}].nic is missing: part {k + 1}/{len(plan.parts)} is a NIC mesh")
        topology["hosts"][host(w, mesh_hosts(plan, k))] = {"ip": str(end.ip), "mac": end.mac}
        topology["switches"][nic(w)].update(ip=str(card.ip), mac=card.mac)
        access[nic(w)] = SwitchAccess(card.p4runtime, card.device_id, card.target, "nic")
    return Network(Topology.from_dict(topology, f"part {k + 1}/{len(plan.parts)}"), access)


def meshes_network(cluster: DirectCluster, plan: DirectPlan, site: DirectSite) -> Network:
    """Every NIC mesh part of the plan as one network of the workers' NICs, which one controller sets up (each
    mesh its own job): each mesh's hosts (``mesh_hosts``) on the NIC port facing that mesh's first interface,
    every mesh's circuits between the NICs' circuit ports.  A controller per mesh would each take over the NICs
    the other set up."""
    meshes = [k for k, part in enumerate(plan.parts) if part.shape.kind == "nic_mesh"]
    if not meshes:
        raise DirectError("the plan has no NIC mesh part")
    networks = [mesh_network(cluster, plan, k, site) for k in meshes]
    merged = networks[0].topology.to_dict()
    for other in networks[1:]:
        more = other.topology.to_dict()
        merged["hosts"].update(more["hosts"])
        merged["links"] += more["links"]
    where = f"the NIC meshes (parts {', '.join(str(k + 1) for k in meshes)}/{len(plan.parts)})"
    return Network(Topology.from_dict(merged, where), networks[0].access)


def mesh_hosts(plan: DirectPlan, k: int) -> str:
    """The host names' prefix of NIC mesh part ``k`` (the first mesh's hosts are h<w+1>, mesh part k's after it
    m<k>h<w+1>): the meshes' hosts are the same workers at their addresses on different interfaces."""
    first = next(i for i, part in enumerate(plan.parts) if part.shape.kind == "nic_mesh")
    return "" if k == first else f"m{k}"


def ring_part(plan: DirectPlan, k: int, site: DirectSite) -> RingPart:
    """Ring part ``k``'s listening addresses.  Worker order[i]'s interface a is a circuit to order[i+1]'s
    interface b, so in the ring in ``order`` a worker hears its predecessor on b (``forward``), and in the
    reversed ring on a (``backward``).  The i-th ring part of the plan listens on ring_port + 2i forward and
    the port after it backward (two workers have one circuit, both directions on it)."""
    part = _part(plan.cluster, plan, k, site, "ring")
    a, b = part.interfaces if len(part.interfaces) == 2 else part.interfaces * 2
    port = site.ring_port + 2 * sum(p.shape.kind == "ring" for p in plan.parts[:k])
    if port + 1 > 65535:
        raise DirectError(f"ring_port {site.ring_port}: part {k + 1}/{len(plan.parts)} would listen on port "
                          f"{port + 1}, beyond 65535")
    workers = range(plan.cluster.workers)
    return RingPart(part.share, part.order, tuple(f"{site.workers[w][b].ip.ip}:{port}" for w in workers),
                    tuple(f"{site.workers[w][a].ip.ip}:{port + 1}" for w in workers))


def torus_part(plan: DirectPlan, k: int, site: DirectSite) -> TorusPart:
    """Torus part ``k``'s listening addresses.  On interfaces (a, b, c, d), worker w's interface a is a circuit to
    the next worker of its first-level ring's interface b, and its c to the next of its second-level ring's d
    (``controller.circuits.torus_circuits``; a level of 2's pair has both), so in the rings of rings in ``order``
    a worker hears its predecessors on b and d (``forward``), and in the reversed ones on a and c
    (``backward``).  Its four addresses are on four interfaces, so one port does: the i-th torus part of the
    plan listens on the port after the ring parts' (ring_port + 2 x ring parts + i)."""
    part = _part(plan.cluster, plan, k, site, "torus")
    a, b, c, d = part.interfaces
    port = site.ring_port + 2 * sum(p.shape.kind == "ring" for p in plan.parts) \
        + sum(p.shape.kind == "torus" for p in plan.parts[:k])
    if port > 65535:
        raise DirectError(f"ring_port {site.ring_port}: part {k + 1}/{len(plan.parts)} would listen on port "
                          f"{port}, beyond 65535")
    n = plan.cluster.workers

    def on(interface: int) -> tuple[str, ...]:
        return tuple(f"{site.workers[w][interface].ip.ip}:{port}" for w in range(n))

    return TorusPart(part.share, part.order, (part.shape.group, n // part.shape.group), (on(b), on(d)),
                     (on(a), on(c)))


def create_parts(cluster: DirectCluster, plan: DirectPlan, site: DirectSite, state_dir: Path,
                 options: PipelineOptions | None = None) -> list[TreePart | ChainPart | RingPart | TorusPart]:
    """Every part of the plan, in its order, as DirectWorker takes them: each tree part's job created on its
    devices by a controller whose network file, state and job specs are in state_dir/part-<k> (so that
    ``ina-ctl --net state_dir/part-<k>/net.json watch`` keeps them provisioned), each ring and torus part's
    addresses.

    The tree part's job is ``direct-<k>``, mode ina, one tree, as many slots as its window (the planner's, at
    most what the devices have free); the NIC mesh part's ``nic-mesh-<k>``, a meeting tree per route, each with
    its share of the window.  Either every job is created or none: a failure deletes the ones made (a
    device that does not answer keeps their entries until it is set up again), and the directory may be used
    again."""
    _check(cluster, plan, site)
    check_runnable(plan)
    if (state_dir / PARTS_FILE).exists():
        raise DirectError(f"{state_dir} holds an earlier setup ({PARTS_FILE}), whose ranks may be running: give a "
                          f"fresh state directory (its controllers set the devices up anew)")
    controllers: list[Controller] = []
    made: list[tuple[Controller, str]] = []
    try:
        parts: list[TreePart | ChainPart | RingPart | TorusPart] = []
        nics: Controller | None = None  # the NIC meshes' one controller
        for k, part in enumerate(plan.parts):
            if part.shape.kind in ("ring", "torus"):
                parts.append(ring_part(plan, k, site) if part.shape.kind == "ring" else torus_part(plan, k, site))
                continue
            if part.shape.kind == "nic_mesh" and nics is not None:
                ctl = nics
            else:
                chained = part.shape.kind == "ring_tree"
                network = (meshes_network(cluster, plan, site) if part.shape.kind == "nic_mesh" else
                           (chain_network if chained else part_network)(cluster, plan, k, site))
                where = state_dir / f"part-{k}"
                where.mkdir(parents=True, exist_ok=True)
                network.save(where / "net.json")
                ctl = Controller(network, where / STATE_FILE, options, ELECTION_ID)
                controllers.append(ctl)
            if part.shape.kind == "nic_mesh":
                name = f"nic-mesh-{k}"  # as errors name it
                parts.append(_mesh_job(ctl, cluster, part, name, mesh_hosts(plan, k),
                                       sum(p.shape.kind == "nic_mesh" for p in plan.parts[k:]), setup=nics is None))
                nics = ctl
                made.append((ctl, name))
                continue
            chained = part.shape.kind == "ring_tree"
            members = chain_ends(cluster, part) if chained else list(range(cluster.workers))
            spec, spec_file = _device_job(ctl, part, members, f"direct-{k}")
            made.append((ctl, f"direct-{k}"))
            parts.append(chain_part(cluster, part, spec, site) if chained else TreePart(spec, part.share, spec_file))
        return parts
    except BaseException:
        _undo(made)
        raise
    finally:
        for ctl in controllers:
            ctl.close()


def write_parts(parts: Sequence[TreePart | ChainPart | RingPart | TorusPart], state_dir: Path) -> Path:
    """state_dir/parts.json, which every rank loads (``worker.direct.parts_from_json``)."""
    state_dir.mkdir(parents=True, exist_ok=True)  # a plan of rings and tori alone made no part's directory
    path = state_dir / PARTS_FILE
    path.write_text(parts_to_json(parts) + "\n")
    return path


def _device_job(ctl: Controller, part: Part, workers: Sequence[int], name: str) -> tuple[JobSpec, str]:
    """The part's devices set up, and its job on them (``workers`` in rank order), with where its spec is."""
    ctl.setup()
    pool = min(part.shape.window, *(ctl.room(d).free_slots for d in ctl.topology.switches))
    spec = ctl.create_job(name, [f"h{w + 1}" for w in workers], max(1, pool), trees=1, mode="ina")
    assert ctl.spec_dir is not None
    return spec, str((ctl.spec_dir / f"{name}.json").absolute())


def chain_part(cluster: DirectCluster, part: Part, devices: JobSpec, site: DirectSite) -> ChainPart:
    """A ring_tree part as every rank runs it, from its devices' job (members: ``chain_ends``): every worker's
    relay (``relay_roles``) with, per relay port, its interface's address and the far end's.  Relay to relay
    and device to chain end the datagrams go to the devices' tree port (each worker listens there on each of the
    part's interfaces), relay to device to the device's aggregation port."""
    (tree,) = devices.trees
    at_device = {w: tree.children[rank] for rank, w in enumerate(chain_ends(cluster, part))}
    roles = relay_roles(cluster, part, tree.job_id, devices.pool_size, at_device)

    def address(end: str) -> str:
        kind, node, port = end_of(end)
        return f"{site.workers[node][port].ip.ip}:{tree.port}" if kind == "w" \
            else f"{site.devices[node].ip}:{devices.udp_port}"

    relays = []
    for role in roles:
        t = role.tree
        used = {port for _, port in t.children if port != OWN} | {t.parent_port}
        here = {port: f"w{role.worker}.{port - 1}" for port in used}  # relay port 1 + interface
        relays.append(ChainRelay(t, tuple(ChainLink(port, address(here[port]), address(role.far[port]),
                                                    f"{here[port]} <-> {role.far[port]}") for port in sorted(used))))
    addresses = [str(site.workers[w][part.interfaces[0]].ip.ip) for w in range(cluster.workers)]
    return ChainPart(part.share, chain_spec(devices, addresses, CHAIN_RELAY), tuple(relays))


def _mesh_job(ctl: Controller, cluster: DirectCluster, part: Part, name: str, hosts: str, meshes_left: int,
              setup: bool) -> TreePart:
    """The NICs set up (``setup``: the first mesh), and the part's job of meeting trees on them (its hosts, named
    with ``hosts``, in rank order), its pools from an equal share of the NICs' free slots among the ``meshes_left``
    meshes not yet made: a rank runs it as a tree part, since to a worker a NIC mesh is an INA job of several
    trees through its own NIC."""
    if setup:
        ctl.setup()
    free = min(ctl.room(n).free_slots for n in {nic(w) for w in range(cluster.workers)})
    trees, pool = mesh_job(cluster, part, free_slots=free // meshes_left, host_prefix=hosts)
    spec = ctl.create_job(name, [host(w, hosts) for w in range(cluster.workers)], pool, trees=trees, mode="ina")
    assert ctl.spec_dir is not None
    return TreePart(spec, part.share, str((ctl.spec_dir / f"{name}.json").absolute()))


def _undo(made: Sequence[tuple[Controller, str]]) -> None:
    """Delete the jobs already made (best effort: a switch that does not answer keeps them until set up)."""
    for ctl, name in made:
        try:
            ctl.delete_job(name, force=True)
        except (SwitchError, OSError, ValueError) as e:
            log.warning("job %s not deleted after a failed setup: %s", name, e)


def _check(cluster: DirectCluster, plan: DirectPlan, site: DirectSite) -> None:
    if plan.cluster != cluster:
        raise DirectError("the plan was made for another cluster")
    site.check(cluster)


def _part(cluster: DirectCluster, plan: DirectPlan, k: int, site: DirectSite, kind: str) -> Part:
    _check(cluster, plan, site)
    if not 0 <= k < len(plan.parts) or plan.parts[k].shape.kind != kind:
        raise DirectError(f"part {k + 1} of {len(plan.parts)} is not a {kind} part")
    return plan.parts[k]
