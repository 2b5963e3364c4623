"""The ``cost:`` section of a scenario or a study: which catalog, price overrides, TCO inputs.

Every field has a default, so ``cost:`` may be absent. The TCO inputs are assumptions, not
sourced figures (docs/physics.md gives none): 5 years of service (a common depreciation period),
$0.10 per kWh and a PUE of 1.3 [E]; override them per study.
"""

from __future__ import annotations

from typing import Any, Literal

from podsim.fabric.units import parse_length
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = ["CostSpec", "CostSpecError", "parse_cost_spec"]


#: link length per tier label when an edge has no ``length_m`` (metres; DAC in the rack,
#: a row for leaf-spine, across the hall for spine-core) [E]
DEFAULT_LENGTHS_M = {"nic-leaf": 2.0, "leaf-spine": 30.0, "spine-core": 500.0, "gpu-scaleup": 2.0}


class CostSpecError(ValueError):
    """A ``cost:`` section that does not validate; names the key and the bad value."""


class CostSpec(BaseModel):
    """Options of the cost model (all optional).

    - ``catalog``: path of another catalog YAML (default: the built-in one);
      ``prices``: per-item field overrides or new items,
      e.g. ``{nic-panmai-920: {price_usd: 2000}}``.
    - ``nic``: catalog item of the NIC cards (default: ``nic-<cluster.nic.model>``, or by layout).
    - ``network``: ``ethernet`` or ``infiniband``, the kind of scale-out fabric to price (switch
      boxes, optics, cables and NICs must serve it); default: the simulated fabric's, Ethernet
      for every PHY profile podsim has (``fabric.phy.PHYS``: 200GbE ... 1.6TbE). ``infiniband``
      prices the same graph as an InfiniBand fabric (e.g. the DeepEP paper's H800 cluster).
    - ``accelerator``: the accelerator to price by its short name (``h100``, ``h800``, ``h200``,
      ``b200``, ``gb200``, ``ascend-910c``: the ``accelerator`` of the catalog's gpu items) or
      item name; default: the cluster preset's (graph attribute ``accelerator``,
      ``fabric.superpod.PRESET_ACCELERATORS``), else ``h100``. ``gpu`` names the catalog item
      directly (both given must agree).
    - ``include_gpus``, ``server`` / ``include_servers``: per-node parts.
    - ``ssd`` / ``ssds_per_server``: SSDs per server (default: what the node layout holds, else 0).
    - ``pcie_chip`` / ``pcie_board`` / ``pcie_boards_per_server``: external PCIe switch boards
      (default count: from the node layout).
    - ``switches``: candidate switch items (default: every switch of the catalog; the cheapest box
      that fits each switch's radix and rate wins); ``links``: candidate optic/cable items.
    - ``switch_pricing``: ``packed`` (default) pays a whole box per switch node, except the
      spines of a two-tier Clos (no core tier), which get as many boxes as the ports of all
      spines of one plane and pod need together: there a spine has one port per leaf and as
      many spines as a leaf has uplinks, which is how the graph (no parallel links) draws
      bundles, and nobody buys a 128-port box to use 4 of its ports. A three-tier fat-tree is
      priced as drawn (its switches have the k ports the user chose). ``box`` pays a whole
      box per switch node (the spines as drawn, an upper bound); ``port`` pays the used
      ports' share of a box (a lower bound).
    - ``lengths``: link length per tier label for edges without ``length_m``.
    - ``years``, ``usd_per_kwh``, ``pue``: TCO inputs (assumptions, see module docstring).
    - ``items``: which cost item builders (``COST_ITEMS`` registry) to run (default: all).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    catalog: str | None = Field(
        None, description="catalog YAML of unit prices and power (default: the built-in one)"
    )
    prices: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="per-item field overrides or new items, e.g. {nic-cx7-400g: {price_usd: 2000}}",
    )
    nic: str | None = Field(
        None, description="catalog item of the NIC cards (default: nic-<cluster.nic.model>)"
    )
    network: Literal["ethernet", "infiniband"] | None = Field(
        None,
        description="scale-out network to price: ethernet or infiniband (default: the "
        "simulated fabric's, Ethernet for every podsim PHY)",
    )
    accelerator: str | None = Field(
        None,
        description="accelerator to price, by short name (h100, h800, h200, b200, gb200, "
        "ascend-910c; catalog gpu items) or item name; default: the cluster preset's, else h100",
    )
    gpu: str | None = Field(
        None, description="catalog item of the GPUs (same as accelerator, by item name)"
    )
    include_gpus: bool = Field(True, description="count the GPUs in the cost")
    server: str = Field("server-8gpu-chassis", description="catalog item of a server chassis")
    include_servers: bool = Field(True, description="count the server chassis in the cost")
    ssd: str = Field("ssd-gen5-7t68", description="catalog item of the SSDs")
    ssds_per_server: int | None = Field(
        None, ge=0, description="SSDs per server (default: what the node layout holds, else 0)"
    )
    pcie_chip: str = Field("pcie-gen5-switch-chip", description="catalog item of a PCIe switch")
    pcie_board: str = Field(
        "pcie-switch-board", description="catalog item of an external PCIe switch board"
    )
    pcie_boards_per_server: int | None = Field(
        None, ge=0, description="external PCIe switch boards per server (default: the layout's)"
    )
    switches: list[str] | None = Field(
        None, description="candidate switch items (default: every switch of the catalog)"
    )
    switch_pricing: Literal["packed", "box", "port"] = Field(
        "packed",
        description=(
            "packed: a whole box per switch node, but the spines of a two-tier Clos packed per "
            "plane and pod onto as few boxes as their ports need (small spines are how the "
            "graph draws parallel-link bundles); box: a whole box per switch node (upper "
            "bound); port: the used ports' share of a box (lower bound)"
        ),
    )
    links: list[str] | None = Field(
        None, description="candidate optic and cable items (default: all of the catalog)"
    )
    lengths: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_LENGTHS_M),
        description="link length in metres per tier, for links without length_m",
    )
    years: float = Field(5.0, gt=0, description="service life for the TCO (years)")
    usd_per_kwh: float = Field(0.10, ge=0, description="electricity price for the TCO (USD/kWh)")
    pue: float = Field(1.3, ge=1.0, description="power usage effectiveness of the datacentre")
    items: list[str] | None = Field(
        None, description="cost item builders to run (COST_ITEMS registry; default: all)"
    )

    @field_validator("lengths", mode="before")
    @classmethod
    def _parse_lengths(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            return v
        # defaults for tiers the user did not name stay in place
        return {**DEFAULT_LENGTHS_M, **{str(k): parse_length(x) for k, x in v.items()}}


def parse_cost_spec(raw: dict[str, Any] | CostSpec | None, where: str = "cost") -> CostSpec:
    """Validate a ``cost:`` mapping; errors name the key path (``cost.years``) and the value."""
    if isinstance(raw, CostSpec):
        return raw
    try:
        return CostSpec.model_validate(raw or {})
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join([where, *(str(p) for p in err["loc"])])
            lines.append(f"{loc}: {err['msg']} (got {err.get('input')!r})")
        raise CostSpecError("invalid cost section:\n  " + "\n  ".join(lines)) from None
