"""Bill of materials derived from the built cluster graph (never typed by hand).

What is counted, and from where (topology graph contract, team brief):

- NIC cards: distinct ``nic`` attrs of the ``role == "nic"`` ports (a multi-plane card has one
  port node per plane but is one card), priced as the scenario's NIC model.
- Switches: every ``leaf``/``spine``/``core``/``scaleup`` node, by radix (its degree) and speed
  (its fastest link's ``rate_bps``). The box is the cheapest catalog switch of the right fabric
  whose port mode at or above that speed has at least that many ports (``ports`` in the catalog
  lists breakout modes: a 64x800G box is also a 128x400G box).
- Links: one cable per link, or two transceivers (one per end) plus one fibre when optical. The
  medium is the cheapest catalog choice whose reach covers the link's ``length_m`` and whose rate
  covers its ``rate_bps``; with the default catalog that is a passive DAC up to 3 m (in rack), an
  AEC/LACC to 7 m, multimode SR optics to 50 m, single-mode DR optics to 500 m and FR to 2 km.
- Scale-up switches and links count only when a scale-up domain (``pod``) spans several servers;
  inside one server they are part of the chassis (an HGX baseboard's NVSwitches).
- Per server: chassis (priced per GPU slot), GPUs (optional), PCIe switch boards and SSDs from
  the node layout (:mod:`podsim.scenarios.cost.node`).

Each of these is a builder in the :data:`COST_ITEMS` registry (``ctx -> list[BomLine]``), so a new
category plugs in with ``@COST_ITEMS.register("name", "description")``.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import pandas as pd
from podsim.fabric.registry import Registry
from podsim.fabric.topology import SWITCH_ROLES
from podsim.fabric.units import fmt_length, fmt_rate
from podsim.scenarios.cost.catalog import Catalog, CatalogError, load_catalog
from podsim.scenarios.cost.node import NodeHardware, node_hardware
from podsim.scenarios.cost.spec import CostSpec, parse_cost_spec

__all__ = [
    "BOM_COLUMNS",
    "CATEGORIES",
    "COST_ITEMS",
    "INTERCONNECT_CATEGORIES",
    "BomContext",
    "BomError",
    "BomLine",
    "LinkChoice",
    "accelerator_item",
    "bom_frame",
    "build_bom",
    "choose_link",
    "choose_switch",
]

#: BOM categories, in the order tables and stacked bars show them.
CATEGORIES = ("gpu", "server", "nic", "pcie", "ssd", "switch", "optics", "cable", "scaleup")
#: The scale-out interconnect (what the 19 % rule of thumb is about).
INTERCONNECT_CATEGORIES = ("nic", "switch", "optics", "cable")

BOM_COLUMNS = [
    "category",
    "item",
    "detail",
    "count",
    "unit_price_usd",
    "unit_power_w",
    "capex_usd",
    "power_w",
    "estimate",
    "confidence",
    "ports_used",
    "ports_bought",
]


class BomError(ValueError):
    """A cluster the catalog cannot furnish (no switch big enough, no optic long enough...)."""


@dataclass(frozen=True)
class BomLine:
    """``count`` units of catalog ``item`` (unit price and power as priced for this line)."""

    category: str
    item: str
    count: int
    unit_price_usd: float
    unit_power_w: float
    detail: str = ""
    estimate: bool = False
    #: the price's confidence (high | medium | low | none | user), from the catalog item
    confidence: str = "none"
    #: switch lines: ports the graph uses and ports the boxes of this line have (else 0)
    ports_used: int = 0
    ports_bought: int = 0

    @property
    def capex_usd(self) -> float:
        return self.count * self.unit_price_usd

    @property
    def power_w(self) -> float:
        return self.count * self.unit_power_w


@dataclass
class BomContext:
    """Everything a cost item builder reads: the graph, the catalog, the options and the
    per-server facts derived once from the graph."""

    graph: nx.Graph
    catalog: Catalog
    spec: CostSpec
    nic_item: str | None = None
    nic_note: str = ""
    layout: str | None = None
    layout_params: str = "{}"  # cluster.layout_params as JSON (_frozen)
    server_gpus: dict[int, int] = field(default_factory=dict)
    server_nics: dict[int, int] = field(default_factory=dict)
    scaleup_in_chassis: bool = True
    network: str = "ethernet"
    network_note: str = ""

    @classmethod
    def build(
        cls,
        graph: nx.Graph,
        spec: CostSpec | dict[str, Any] | None = None,
        *,
        catalog: Catalog | None = None,
        nic_model: str | None = None,
        layout: str | None = None,
        link_layer: str | None = None,
        layout_params: Mapping[str, Any] | None = None,
    ) -> BomContext:
        spec = parse_cost_spec(spec)
        if catalog is None:
            catalog = load_catalog(spec.catalog, spec.prices)
        gpu_server, gpu_pod = _gpu_table(graph)
        server_gpus = Counter(gpu_server.values())
        cards: dict[int, int] = {}
        for _, d in graph.nodes(data=True):
            if d.get("role") == "nic":
                cards[int(d["nic"])] = int(d["server"])
        server_nics = Counter(cards.values())
        servers = sorted(set(server_gpus) | set(server_nics))
        pods: dict[int, set[int]] = defaultdict(set)
        for gid, pod in gpu_pod.items():
            pods[pod].add(gpu_server[gid])
        ctx = cls(
            graph=graph,
            catalog=catalog,
            spec=spec,
            layout=layout,
            layout_params=_frozen(layout_params),
            server_gpus={s: server_gpus.get(s, 0) for s in servers},
            server_nics={s: server_nics.get(s, 0) for s in servers},
            scaleup_in_chassis=all(len(s) <= 1 for s in pods.values()),
        )
        ctx.network, ctx.network_note = _network(graph, spec, link_layer)
        if cards:
            ctx.nic_item, ctx.nic_note = _nic_item(
                catalog, spec, nic_model, layout, ctx.network, _nic_link_rate(graph)
            )
        return ctx

    def line(
        self,
        category: str,
        item: str,
        count: int,
        detail: str = "",
        scale: float = 1.0,
        ports: tuple[int, int] = (0, 0),
    ) -> BomLine:
        """A BOM line of ``count`` catalog ``item`` (price and power times ``scale``);
        ``ports``: (used, bought) over the line's switch boxes."""
        it = self.catalog.get(item)
        return BomLine(
            category,
            item,
            int(count),
            float(it.price_usd) * scale,
            float(it.power_w) * scale,
            detail,
            bool(it.estimate),
            str(it.price_confidence),
            *ports,
        )

    def node(self, server: int) -> NodeHardware:
        return node_hardware(
            self.layout,
            self.server_gpus.get(server, 0),
            self.server_nics.get(server, 0),
            pcie_boards=self.spec.pcie_boards_per_server,
            ssds=self.spec.ssds_per_server,
            params=self.layout_params,
        )


def _frozen(params: Mapping[str, Any] | None) -> str:
    """Layout parameters as canonical JSON (hashable, for the node-hardware memo)."""
    return json.dumps(dict(params or {}), sort_keys=True, default=str)


def _network(graph: nx.Graph, spec: CostSpec, link_layer: str | None = None) -> tuple[str, str]:
    """(network, note): ``cost.network`` when given, else the simulated fabric's: the NIC's
    link layer (``cluster.nic.link_layer``: ethernet for the RoCE/UEC/SmartNIC models,
    infiniband for ``cx7-ib``), else the graph's ``network`` attribute, else Ethernet (the PHY
    profiles, ``fabric.phy.PHYS``, are IEEE 802.3 200GBASE-R to 1.6TBASE-R). The note says when
    the price and the simulation differ."""
    simulated = str(link_layer or graph.graph.get("network", "ethernet"))
    if spec.network is None or spec.network == simulated:
        return simulated, ""
    return spec.network, f"priced as {spec.network} (cost.network); simulated as {simulated}"


def _gpu_table(g: nx.Graph) -> tuple[dict[int, int], dict[int, int]]:
    """gpu id -> server and gpu id -> pod; from GPU nodes, else from the GPUs NIC ports serve."""
    server: dict[int, int] = {}
    pod: dict[int, int] = {}
    gpu_nodes = [d for _, d in g.nodes(data=True) if d.get("role") == "gpu"]
    if gpu_nodes:
        for d in gpu_nodes:
            server[int(d["gpu"])] = int(d["server"])
            pod[int(d["gpu"])] = int(d["pod"])
        return server, pod
    for _, d in g.nodes(data=True):
        if d.get("role") == "nic" and int(d.get("gpu", -1)) >= 0:
            for gid in range(int(d["gpu"]), int(d["gpu"]) + int(d.get("gpu_count", 1))):
                server[gid] = int(d["server"])
                pod[gid] = int(d.get("pod", d["server"]))
    return server, pod


def _nic_link_rate(graph: nx.Graph) -> float:
    """The fastest link of any NIC port in the graph (bits/s), 0 without NICs."""
    nodes = graph.nodes
    return max(
        (float(r) for u, v, r in graph.edges(data="rate_bps")
         if nodes[u].get("role") == "nic" or nodes[v].get("role") == "nic"),
        default=0.0,
    )  # fmt: skip


def _nic_item(
    catalog: Catalog,
    spec: CostSpec,
    nic_model: str | None,
    layout: str | None,
    network: str = "ethernet",
    link_rate: float = 0.0,
) -> tuple[str, str]:
    """(catalog NIC, note). ``cost.nic`` if given (it must suit the layout), else
    ``nic-<model>``; a model whose card does not match the layout (a SmartNIC with an on-card
    switch under ``external-switch``, or a plain NIC under ``on-card-switch``) is priced as the
    layout's default card instead, and the note says so: a sweep over ``cluster.layout`` then
    compares like with like. Defaults: ``nic-panmai-920`` for ``on-card-switch``, else
    ``nic-cx7-400g``. A card whose ports are slower than the graph's NIC links
    (``link_rate``: an 800GbE NIC) gives way to the cheapest catalog card that is fast enough,
    serves ``network`` and suits the layout, with a note; when there is none the BOM refuses
    the NIC (:func:`_nics`)."""
    name, note = _nic_by_model(catalog, spec, nic_model, layout)
    item = catalog.get(name, "nic")
    if spec.nic is not None or item.port_rate >= link_rate * (1 - 1e-9):
        return name, note
    wants_switch = layout == "on-card-switch"
    strict = layout in ("on-card-switch", "external-switch", "root-complex")
    fast = sorted(
        (it.price_usd, n)
        for n, it in catalog.of_kind("nic").items()
        if it.port_rate >= link_rate * (1 - 1e-9)
        and network in it.networks
        and (not strict or it.pcie_switch_on_card == wants_switch)
    )
    if not fast:
        return name, note
    faster = fast[0][1]
    why = (
        f"{name} has {fmt_rate(item.port_rate)} ports, the NIC links run at "
        f"{fmt_rate(link_rate)}: priced as {faster}, the cheapest card that fast"
    )
    return faster, f"{note}; {why}" if note else why


def _nic_by_model(
    catalog: Catalog, spec: CostSpec, nic_model: str | None, layout: str | None
) -> tuple[str, str]:
    """(catalog NIC, note) by ``cost.nic`` or the NIC model and the layout (:func:`_nic_item`)."""
    default = "nic-panmai-920" if layout == "on-card-switch" else "nic-cx7-400g"
    wants_switch = layout == "on-card-switch"
    strict = layout in ("on-card-switch", "external-switch", "root-complex")
    if spec.nic is not None:
        item = catalog.get(spec.nic, "nic")
        if strict and item.pcie_switch_on_card != wants_switch:
            need = "carries" if wants_switch else "does not carry"
            raise BomError(
                f"cost.nic {spec.nic!r} does not suit cluster.layout {layout!r}, which needs a "
                f"NIC card that {need} the PCIe switch (e.g. {default})"
            )
        return spec.nic, ""
    name = None
    if nic_model is not None:
        for cand in (f"nic-{nic_model}", nic_model):
            if cand in catalog.items and catalog.items[cand].kind == "nic":
                name = cand
                break
        else:
            name = next((n for n, it in catalog.of_kind("nic").items() if nic_model in it.models),
                        None)  # fmt: skip
    if name is None:
        return default, f"no catalog card is NIC model {nic_model!r}: priced as {default}"
    item = catalog.get(name, "nic")
    if strict and item.pcie_switch_on_card != wants_switch:
        why = (
            "carries a PCIe switch the layout does not use"
            if item.pcie_switch_on_card
            else "has no PCIe switch for the layout"
        )
        return default, f"NIC model {nic_model!r} is {name}, which {why}: priced as {default}"
    return name, ""


# --------------------------------------------------------------------------- choosers


@dataclass(frozen=True)
class LinkChoice:
    """How one graph link is built: ``lanes`` physical links (a graph link faster than any
    cable is a bundle, e.g. a GPU's 1.28 Tb/s of scale-up), each a copper cable alone or two
    optics plus a fibre. ``price_usd``/``power_w`` are for the whole graph link."""

    cable: str
    optic: str | None
    lanes: int
    price_usd: float
    power_w: float

    @property
    def optical(self) -> bool:
        return self.optic is not None


def _bundle(rate_bps: float, item_rate: float) -> int:
    return max(1, math.ceil(rate_bps / item_rate - 1e-9))


def choose_link(
    length_m: float,
    rate_bps: float,
    catalog: Catalog,
    allowed: list[str] | None = None,
    network: str | None = None,
) -> LinkChoice:
    """The cheapest way to build a link of ``length_m`` at ``rate_bps`` from the catalog: the
    reach must cover the length; a link faster than a part is a bundle of
    ``ceil(rate / part rate)`` parts (a GPU's 1.28 Tb/s scale-up link as two 800G DACs; an
    800G twin-port 2xDR4 module is priced against two 400G DR4 modules).
    ``network`` (ethernet | infiniband): only parts that serve it.
    Ties: copper first, fewer lanes, then by name."""
    choices: list[tuple[float, int, int, str, LinkChoice]] = []

    def ok(n: str, it: Any) -> bool:
        return (allowed is None or n in allowed) and (network is None or network in it.networks)

    cables = {n: c for n, c in catalog.of_kind("cable").items() if ok(n, c)}
    optics = {n: o for n, o in catalog.of_kind("optic").items() if ok(n, o)}

    def reaches(it: Any) -> bool:
        return it.reach >= length_m * (1 - 1e-9)

    for n, c in cables.items():
        if c.media == "copper" and reaches(c):
            k = _bundle(rate_bps, c.rate)
            choice = LinkChoice(n, None, k, k * c.price_usd, k * c.power_w)
            choices.append((choice.price_usd, 0, k, n, choice))
    for on, o in optics.items():
        if not reaches(o):
            continue
        for cn, c in cables.items():
            if c.media == o.media and reaches(c):
                k = _bundle(rate_bps, min(o.rate, c.rate))
                price = k * (2 * o.price_usd + c.price_usd)
                power = k * (2 * o.power_w + c.power_w)
                choice = LinkChoice(cn, on, k, price, power)
                choices.append((price, 1, k, f"{on}+{cn}", choice))
    if not choices:
        of = f"{network} " if network else ""
        raise BomError(
            f"no {of}catalog cable or optic reaches {fmt_length(length_m)}; add one under "
            f"cost.prices (kind cable or optic with reach, rate and networks)"
        )
    return min(choices, key=lambda t: t[:4])[4]


def choose_switch(
    radix: int,
    rate_bps: float,
    fabric: str,
    catalog: Catalog,
    allowed: list[str] | None = None,
    network: str | None = None,
) -> tuple[str, float, int, int]:
    """(item, port speed, ports at that speed, boxes) of the cheapest way to give one logical
    switch ``radix`` links of ``rate_bps`` from the ``fabric`` switches.

    Each port mode at or above the link rate is tried (breakout modes: a 64x800G box is a
    128x400G box); only a link faster than every port of every box (a scale-up bundle) takes
    ``ceil(rate / speed)`` ports of a box's fastest mode. A logical switch with more ports than
    one box (a 384-GPU scale-up plane, a huge star) is priced as ``ceil(ports / box ports)``
    boxes; the links that would join those boxes are not priced, so that is a lower bound,
    flagged in the BOM detail.
    ``network`` (ethernet | infiniband): only scale-out boxes of that network.
    Ties: fewer ports per link, slower mode, then by name.
    """
    boxes_of = {
        name: sw
        for name, sw in catalog.of_kind("switch").items()
        if sw.fabric == fabric
        and (allowed is None or name in allowed)
        and (network is None or fabric != "scaleout" or sw.network == network)
    }
    if not boxes_of:
        of = f"{network} " if network and fabric == "scaleout" else ""
        raise BomError(
            f"no {of}{fabric} switch in the cost catalog; add one under cost.prices"
            + (" (kind switch with network: " + network + ")" if of else "")
        )
    tol = 1 - 1e-9
    native = any(sp >= rate_bps * tol for sw in boxes_of.values() for sp in sw.ports)
    best: tuple[float, int, float, str, int, int] | None = None
    for name, sw in boxes_of.items():
        speeds = [sp for sp in sw.ports if sp >= rate_bps * tol] if native else [max(sw.ports)]
        for speed in speeds:
            count = sw.ports[speed]
            per_link = _bundle(rate_bps, speed)
            boxes = math.ceil(radix * per_link / count)
            cand = (boxes * sw.price_usd, per_link, speed, name, count, boxes)
            if best is None or cand[:4] < best[:4]:
                best = cand
    assert best is not None
    return best[3], best[2], best[4], best[5]


# --------------------------------------------------------------------------- cost items

CostItemBuilder = Callable[[BomContext], list[BomLine]]
COST_ITEMS: Registry[CostItemBuilder] = Registry("cost item")


DEFAULT_ACCELERATOR = "h100"


def accelerator_item(
    catalog: Catalog, spec: CostSpec, graph: nx.Graph | None = None
) -> tuple[str, str]:
    """(catalog gpu item, where the choice came from) for ``cost.accelerator`` (a short name or
    an item name), ``cost.gpu`` (an item name), the graph's preset ``accelerator`` attribute, or
    :data:`DEFAULT_ACCELERATOR`. An unknown name raises a :class:`BomError` that names the key,
    suggests close names and lists the choices."""
    gpus = catalog.of_kind("gpu")
    by_name = {str(it.accelerator).lower(): n for n, it in gpus.items() if it.accelerator}

    def resolve(value: str, key: str) -> str:
        v = value.strip().lower()
        if v in by_name:
            return by_name[v]
        if value in gpus:
            return value
        import difflib

        pool = sorted(by_name) + sorted(gpus)
        close = difflib.get_close_matches(v, pool, n=3, cutoff=0.5)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise BomError(
            f"{key}: unknown accelerator {value!r}.{hint} Choices: {', '.join(sorted(by_name))} "
            f"(or a catalog gpu item: {', '.join(sorted(gpus))})"
        )

    chosen = None
    if spec.accelerator is not None:
        chosen = resolve(spec.accelerator, "cost.accelerator"), "cost.accelerator"
    if spec.gpu is not None:
        item = resolve(spec.gpu, "cost.gpu")
        if chosen is not None and chosen[0] != item:
            raise BomError(
                f"cost.accelerator {spec.accelerator!r} ({chosen[0]}) and cost.gpu "
                f"{spec.gpu!r} name different accelerators; give one"
            )
        chosen = chosen or (item, "cost.gpu")
    if chosen is not None:
        return chosen
    preset = graph.graph.get("accelerator") if graph is not None else None
    if preset:
        where = f"preset {graph.graph.get('builder', '?')}"
        return resolve(str(preset), f"{where} accelerator"), where
    return resolve(DEFAULT_ACCELERATOR, "default accelerator"), "default"


@COST_ITEMS.register("gpus", "accelerators, one per GPU id in the graph (optional)")
def _gpus(ctx: BomContext) -> list[BomLine]:
    n = sum(ctx.server_gpus.values())
    if not ctx.spec.include_gpus or n == 0:
        return []
    item, where = accelerator_item(ctx.catalog, ctx.spec, ctx.graph)
    return [ctx.line("gpu", item, n, f"{n} accelerators ({where})")]


@COST_ITEMS.register("servers", "server chassis without GPUs and NICs, priced per GPU slot")
def _servers(ctx: BomContext) -> list[BomLine]:
    if not ctx.spec.include_servers or not ctx.server_gpus:
        return []
    item = ctx.catalog.get(ctx.spec.server, "server")
    by_size = Counter(ctx.server_gpus.values())
    out = []
    for gpus, count in sorted(by_size.items()):
        # A server without GPUs in the graph (a bare fabric) is priced as a full chassis.
        slots = gpus if gpus > 0 else item.gpus
        out.append(
            ctx.line(
                "server",
                ctx.spec.server,
                count,
                f"{slots}-GPU-slot chassis",
                scale=slots / item.gpus,
            )
        )
    return out


@COST_ITEMS.register("nics", "NIC cards by model (multi-plane cards count once)")
def _nics(ctx: BomContext) -> list[BomLine]:
    n = sum(ctx.server_nics.values())
    if n == 0 or ctx.nic_item is None:
        return []
    item = ctx.catalog.get(ctx.nic_item, "nic")
    fastest = _nic_link_rate(ctx.graph)
    if fastest > item.port_rate * (1 + 1e-9):
        fits = [f"{n} ({'with' if it.pcie_switch_on_card else 'without'} an on-card switch, "
                f"{' and '.join(it.networks)})" for n, it in ctx.catalog.of_kind("nic").items()
                if it.port_rate >= fastest * (1 - 1e-9)]  # fmt: skip
        raise BomError(
            f"NIC {ctx.nic_item!r} has {fmt_rate(item.port_rate)} ports, but the graph's NIC "
            f"links run at {fmt_rate(fastest)} and no catalog card that fast suits "
            f"cluster.layout {ctx.layout!r} and the {ctx.network} fabric; choose a faster "
            f"cost.nic (cards that fast: {', '.join(fits) or 'none'})"
        )
    if ctx.network not in item.networks:
        fits = [n for n, it in ctx.catalog.of_kind("nic").items() if ctx.network in it.networks]
        raise BomError(
            f"NIC {ctx.nic_item!r} serves {' and '.join(item.networks)}, not the {ctx.network} "
            f"fabric being priced; choose cost.nic (NICs for {ctx.network}: {', '.join(fits)})"
        )
    planes = {d.get("plane", 0) for _, d in ctx.graph.nodes(data=True) if d.get("role") == "nic"}
    detail = f"{n} cards, {len(planes)} port(s) each, {ctx.network}"
    if ctx.nic_note:
        detail += f" ({ctx.nic_note})"
    if ctx.network_note:
        detail += f" ({ctx.network_note})"
    return [ctx.line("nic", ctx.nic_item, n, detail)]


@COST_ITEMS.register("switches", "switch boxes by radix and speed, counted from the graph")
def _switches(ctx: BomContext) -> list[BomLine]:
    g = ctx.graph
    groups: Counter[tuple[str, str, str, int, float, int, int]] = Counter()
    packed: dict[tuple[str, int, int, str], tuple[int, float, int]] = {}
    # a two-tier Clos (no core tier) has as many spines as a leaf has uplinks, each with one
    # port per leaf: small spines are how the graph draws bundles of parallel links. A
    # three-tier fat-tree's switches are as the user sized them (k ports each): not packed.
    pack_spines = ctx.spec.switch_pricing == "packed" and not any(
        r == "core" for _, r in g.nodes(data="role")
    )
    for n, d in g.nodes(data=True):
        role = d.get("role")
        if role not in SWITCH_ROLES:
            continue
        if role == "scaleup" and ctx.scaleup_in_chassis:
            continue
        radix = int(g.degree[n])
        if radix == 0:
            continue
        rate = max(float(r) for _, _, r in g.edges(n, data="rate_bps"))
        fabric = "scaleup" if role == "scaleup" else "scaleout"
        try:
            item, speed, ports, boxes = choose_switch(
                radix, rate, fabric, ctx.catalog, ctx.spec.switches, ctx.network
            )
        except BomError as exc:
            raise BomError(f"switch {n!r} ({role}): {exc}") from None
        category = "scaleup" if role == "scaleup" else "switch"
        if pack_spines and role == "spine":
            key = (role, d.get("plane", 0), d.get("pod", -1), fabric)
            nodes_radix, nodes_rate, count = packed.get(key, (0, 0.0, 0))
            packed[key] = (nodes_radix + radix, max(nodes_rate, rate), count + 1)
            continue
        used = radix * _bundle(rate, speed)
        groups[(category, item, role, used, speed, ports, boxes)] += 1
    out = _packed_lines(ctx, packed)
    for (category, item, role, used, speed, ports, boxes), count in sorted(groups.items()):
        detail = f"{role}: {used} of {ports} x {fmt_rate(speed)} ports used"
        if boxes > 1:
            detail = (
                f"{role}: {used} ports on {boxes} boxes of {ports} x {fmt_rate(speed)} "
                f"(box-to-box links not priced: a lower bound)"
            )
        bought = (count * used, count * boxes * ports)
        if ctx.spec.switch_pricing == "port":
            share = used / (boxes * ports)
            detail += f"; priced per used port ({share:.0%} of {boxes} box(es))"
            out.append(ctx.line(category, item, count * boxes, detail, share, bought))
        else:
            out.append(ctx.line(category, item, count * boxes, detail, ports=bought))
    return out


def _packed_lines(
    ctx: BomContext, packed: dict[tuple[str, int, int, str], tuple[int, float, int]]
) -> list[BomLine]:
    """Whole boxes for the ports of all spine nodes of one plane and pod."""
    out = []
    for (role, plane, pod, fabric), (radix, rate, nodes) in sorted(packed.items()):
        try:
            item, speed, ports, boxes = choose_switch(
                radix, rate, fabric, ctx.catalog, ctx.spec.switches, ctx.network
            )
        except BomError as exc:
            raise BomError(f"{role} tier, plane {plane}: {exc}") from None
        used = radix * _bundle(rate, speed)
        where = f"plane {plane}" + (f", pod {pod}" if pod >= 0 else "")
        detail = (
            f"{role} ({where}): {nodes} graph nodes packed, {used} ports on {boxes} box(es) of "
            f"{ports} x {fmt_rate(speed)}"
        )
        out.append(ctx.line("switch", item, boxes, detail, ports=(used, boxes * ports)))
    return out


@COST_ITEMS.register("links", "cables, and optics (two per optical link) by reach class")
def _links(ctx: BomContext) -> list[BomLine]:
    cache: dict[tuple[str | None, float, float], LinkChoice] = {}
    groups: Counter[tuple[str, str, float, float]] = Counter()
    for u, v, d in ctx.graph.edges(data=True):
        kind = d.get("kind", "scaleout")
        if kind == "scaleup" and ctx.scaleup_in_chassis:
            continue
        tier = str(d.get("tier", ""))
        length = d.get("length_m")
        if length is None:
            if tier not in ctx.spec.lengths:
                raise BomError(
                    f"link {u!r}-{v!r} has no length_m and tier {tier!r} has no default in "
                    f"cost.lengths ({', '.join(sorted(ctx.spec.lengths))})"
                )
            length = ctx.spec.lengths[tier]
        key = (float(length), float(d["rate_bps"]))
        # scale-up links are the scale-up fabric's own (NVLink/UB-style); the scale-out
        # network's kind does not apply to them
        net = None if kind == "scaleup" else ctx.network
        if (net, *key) not in cache:
            try:
                cache[(net, *key)] = choose_link(*key, ctx.catalog, ctx.spec.links, net)
            except BomError as exc:
                raise BomError(f"link {u!r}-{v!r} ({tier}): {exc}") from None
        groups[(kind, tier, *key)] += 1
    out = []
    for (kind, tier, length, rate), links in sorted(groups.items()):
        choice = cache[(None if kind == "scaleup" else ctx.network, length, rate)]
        where = f"{tier} {fmt_length(length)} @ {fmt_rate(rate)}"
        up = kind == "scaleup"
        n = links * choice.lanes
        lanes = f" x {choice.lanes} lanes" if choice.lanes > 1 else ""
        if choice.optic is not None:
            cat = "scaleup" if up else "optics"
            out.append(
                ctx.line(cat, choice.optic, 2 * n, f"{where}: {links} links{lanes} x 2 ends")
            )
        cat = "scaleup" if up else "cable"
        out.append(ctx.line(cat, choice.cable, n, f"{where}: {links} links{lanes}"))
    return out


@COST_ITEMS.register("pcie", "PCIe switch boards (external) or chips on the NIC card")
def _pcie(ctx: BomContext) -> list[BomLine]:
    boards = on_nic = 0
    layouts = set()
    for s in ctx.server_gpus:
        hw = ctx.node(s)
        boards += hw.pcie_boards
        on_nic += hw.pcie_on_nic
        layouts.add(f"{hw.layout or 'no layout'} ({hw.source})")
    where = ", ".join(sorted(layouts))
    out = []
    if boards:
        out.append(ctx.line("pcie", ctx.spec.pcie_chip, boards, f"on external boards; {where}"))
        out.append(ctx.line("pcie", ctx.spec.pcie_board, boards, f"external boards; {where}"))
    if on_nic:
        out.append(
            ctx.line(
                "pcie",
                ctx.spec.pcie_chip,
                on_nic,
                f"on the NIC card, priced in the NIC; {where}",
                scale=0.0,
            )
        )
    return out


@COST_ITEMS.register("ssds", "NVMe SSDs per server (node layout or cost.ssds_per_server)")
def _ssds(ctx: BomContext) -> list[BomLine]:
    n = sum(ctx.node(s).ssds for s in ctx.server_gpus)
    return [ctx.line("ssd", ctx.spec.ssd, n, f"{n} SSDs")] if n else []


# --------------------------------------------------------------------------- the BOM


def build_bom(
    graph: nx.Graph,
    spec: CostSpec | dict[str, Any] | None = None,
    *,
    catalog: Catalog | None = None,
    nic_model: str | None = None,
    layout: str | None = None,
    link_layer: str | None = None,
    layout_params: Mapping[str, Any] | None = None,
) -> list[BomLine]:
    """Every BOM line of the cluster ``graph`` (cost items in registry order, or
    ``spec.items``). ``nic_model`` is the scenario's NIC model name, ``layout`` its node layout
    and ``layout_params`` the layout's parameters (``cluster.layout_params``: SSDs, switches),
    ``link_layer`` its NIC link layer (the network priced unless ``cost.network`` says)."""
    ctx = BomContext.build(graph, spec, catalog=catalog, nic_model=nic_model, layout=layout,
                           link_layer=link_layer, layout_params=layout_params)  # fmt: skip
    names = ctx.spec.items if ctx.spec.items is not None else _registered_order()
    lines: list[BomLine] = []
    for name in names:
        try:
            builder = COST_ITEMS.get(name)
        except ValueError as exc:
            raise BomError(f"cost.items: {exc}") from None
        try:
            lines.extend(builder(ctx))
        except CatalogError as exc:
            raise BomError(f"cost item {name!r}: {exc}") from None
    return lines


# Registry order is alphabetical; the BOM reads better GPU-first. New items go at the end.
_ORDER = ("gpus", "servers", "nics", "pcie", "ssds", "switches", "links")


def _registered_order() -> list[str]:
    return [*_ORDER, *(n for n in COST_ITEMS.names() if n not in _ORDER)]


def bom_frame(lines: list[BomLine]) -> pd.DataFrame:
    """The BOM as a DataFrame with :data:`BOM_COLUMNS`."""
    rows = [
        {
            "category": ln.category,
            "item": ln.item,
            "detail": ln.detail,
            "count": ln.count,
            "unit_price_usd": ln.unit_price_usd,
            "unit_power_w": ln.unit_power_w,
            "capex_usd": ln.capex_usd,
            "power_w": ln.power_w,
            "estimate": ln.estimate,
            "confidence": ln.confidence,
            "ports_used": ln.ports_used,
            "ports_bought": ln.ports_bought,
        }
        for ln in lines
    ]
    return pd.DataFrame(rows, columns=BOM_COLUMNS)
