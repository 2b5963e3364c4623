"""The ``cost:`` section of a scenario or a study: which catalog, price overrides, TCO inputs.

Every field has a default, so ``cost:`` may be absent. The TCO inputs are assumptions, not
sourced figures (physics.md gives none): 5 years of service (a common depreciation period),
$0.10 per kWh and a PUE of 1.3 [E]; override them per study.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fabric.units import parse_length

__all__ = ["CostSpec", "CostSpecError", "parse_cost_spec"]


class CostSpecError(ValueError):
    """A ``cost:`` section that does not validate; names the key and the bad value."""


class CostSpec(BaseModel):
    """Options of the cost model (all optional).

    - ``catalog``: path of another catalog YAML (default: the built-in one);
      ``prices``: per-item field overrides or new items,
      e.g. ``{nic-panmai-920: {price_usd: 2000}}``.
    - ``nic``: catalog item of the NIC cards (default: ``nic-<cluster.nic.model>``, or by layout).
    - ``gpu`` / ``include_gpus``, ``server`` / ``include_servers``: per-node parts.
    - ``ssd`` / ``ssds_per_server``: SSDs per server (default: what the node layout holds, else 0).
    - ``pcie_chip`` / ``pcie_board`` / ``pcie_boards_per_server``: external PCIe switch boards
      (default count: from the node layout).
    - ``switches``: candidate switch items (default: every switch of the catalog; the cheapest box
      that fits each switch's radix and rate wins); ``links``: candidate optic/cable items.
    - ``switch_pricing``: ``box`` (default) pays a whole box per switch node; ``port`` pays the
      used ports' share of a box, as if lightly used switches (small spines the builders make,
      since the graph has no parallel links) were consolidated onto shared boxes.
    - ``lengths``: link length per tier label for edges without ``length_m``.
    - ``years``, ``usd_per_kwh``, ``pue``: TCO inputs (assumptions, see module docstring).
    - ``items``: which cost item builders (``COST_ITEMS`` registry) to run (default: all).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    catalog: str | None = None
    prices: dict[str, dict[str, Any]] = Field(default_factory=dict)
    nic: str | None = None
    gpu: str = "gpu-h100-sxm"
    include_gpus: bool = True
    server: str = "server-8gpu-chassis"
    include_servers: bool = True
    ssd: str = "ssd-gen5-7t68"
    ssds_per_server: int | None = Field(None, ge=0)
    pcie_chip: str = "pcie-gen5-switch-chip"
    pcie_board: str = "pcie-switch-board"
    pcie_boards_per_server: int | None = Field(None, ge=0)
    switches: list[str] | None = None
    switch_pricing: Literal["box", "port"] = "box"
    links: list[str] | None = None
    lengths: dict[str, float] = Field(
        default_factory=lambda: {
            "nic-leaf": 2.0,
            "leaf-spine": 30.0,
            "spine-core": 500.0,
            "gpu-scaleup": 2.0,
        }
    )
    years: float = Field(5.0, gt=0)
    usd_per_kwh: float = Field(0.10, ge=0)
    pue: float = Field(1.3, ge=1.0)
    items: list[str] | None = None

    @field_validator("lengths", mode="before")
    @classmethod
    def _parse_lengths(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            return v
        # defaults for tiers the user did not name stay in place
        base = {"nic-leaf": 2.0, "leaf-spine": 30.0, "spine-core": 500.0, "gpu-scaleup": 2.0}
        return {**base, **{str(k): parse_length(x) for k, x in v.items()}}


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
