"""The cost catalog: validated unit prices and power of cluster parts.

The default catalog is ``scenarios/cost/catalog.yaml``; its figures come from
``docs/cost_catalog_sources.csv`` and docs/physics.md ("Cost"), each item with its source, date,
confidence and an ``estimate`` flag (most prices are estimates: no vendor lists them). A scenario
or a study overrides any field of any item (``cost.prices``) or adds items; the result is
validated again.

Quantities in the YAML are human strings (``"400Gbps"``, ``"500m"``) parsed at load time into SI
(bits/s, metres).
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from podsim.fabric.units import parse_length, parse_rate
from podsim.scenarios.input.yamltext import read_yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

__all__ = [
    "CONFIDENCE_LEVELS",
    "DEFAULT_CATALOG_PATH",
    "NETWORKS",
    "Catalog",
    "CatalogError",
    "CatalogItem",
    "load_catalog",
]

DEFAULT_CATALOG_PATH = Path(__file__).with_name("catalog.yaml")

#: Scale-out network kinds a catalog item can serve.
NETWORKS = ("ethernet", "infiniband")
Network = Literal["ethernet", "infiniband"]
#: Confidence of a price, best first; "user" is a price a scenario or study set.
CONFIDENCE_LEVELS = ("high", "medium", "low", "none", "user")
_RANK = {"high": 0, "medium": 1, "low": 2, "none": 3}


def price_level(confidence: str) -> str:
    """The price's level (high | medium | low | none) from a catalog ``confidence`` text.

    ``"medium(power)/low(price)"`` -> ``low`` (the ``(price)`` part wins); a text that qualifies
    only other figures (``"medium(power)"``) says nothing of the price -> ``none``; otherwise
    the weakest level named (``"medium-low"`` -> ``low``)."""
    text = confidence.lower()
    parts = [p.strip() for p in text.replace(",", "/").split("/") if p.strip()]
    priced = [p.split("(")[0] for p in parts if "(price)" in p]
    if priced:
        words = priced
    elif any("(" in p for p in parts):
        words = [p.split("(")[0] for p in parts if "(" not in p] or ["none"]
    else:
        words = parts
    found = [w for p in words for w in p.replace("-", " ").split() if w in _RANK]
    return max(found, key=_RANK.__getitem__) if found else "none"


class CatalogError(ValueError):
    """A catalog file or override that does not validate; names the item and the field."""


class _Item(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = ""
    estimate: bool
    source: str = Field(min_length=1)
    date: str
    confidence: str
    #: high | medium | low | none (read from ``confidence`` when not given) | user (overridden)
    price_confidence: Literal["high", "medium", "low", "none", "user"] | None = None
    overridden: bool = False

    @model_validator(mode="after")
    def _level(self) -> _Item:
        if self.price_confidence is None:
            object.__setattr__(self, "price_confidence", price_level(self.confidence))
        return self

    @field_validator("date", mode="before")
    @classmethod
    def _date_as_text(cls, v: Any) -> Any:
        # YAML reads 2025 as an int and 2024-08-01 as a date; a catalog date is free text.
        return v if isinstance(v, str) else str(v)


class _Priced(_Item):
    price_usd: float = Field(ge=0)
    power_w: float = Field(ge=0)


def _rate(v: Any) -> float:
    return parse_rate(v)


def _length(v: Any) -> float:
    return parse_length(v)


class NicItem(_Priced):
    """A NIC card. ``pcie_switch_on_card`` marks SmartNICs that carry the node's PCIe switch."""

    kind: Literal["nic"]
    port_rate: float
    ports: int = Field(1, ge=1)
    pcie_switch_on_card: bool = False
    networks: tuple[Network, ...] = NETWORKS
    #: ``cluster.nic.model`` names (``nic.NIC_MODELS``) this card is priced for
    models: tuple[str, ...] = ()

    _v_rate = field_validator("port_rate", mode="before")(lambda cls, v: _rate(v))


class SwitchItem(_Priced):
    """A switch box. ``ports`` maps a port speed (bits/s) to the port count at that speed."""

    kind: Literal["switch"]
    fabric: Literal["scaleout", "scaleup"]
    #: the network a scale-out box switches; a scale-up box has none
    network: Network | None = None
    ports: dict[float, int]

    @model_validator(mode="after")
    def _network_of_scaleout(self) -> SwitchItem:
        if self.fabric == "scaleout" and self.network is None:
            raise ValueError(
                f"a scale-out switch needs 'network' ({' or '.join(NETWORKS)}): the BOM buys "
                "only boxes of the cluster's network"
            )
        return self

    @field_validator("ports", mode="before")
    @classmethod
    def _parse_ports(cls, v: Any) -> Any:
        if not isinstance(v, dict) or not v:
            raise ValueError("ports must be a non-empty mapping speed -> count, e.g. {400Gbps: 64}")
        return {_rate(k): int(n) for k, n in v.items()}

    def ports_at(self, rate_bps: float) -> tuple[float, int] | None:
        """(port speed, count) of the slowest mode whose ports carry ``rate_bps``, or None."""
        modes = sorted(s for s in self.ports if s >= rate_bps * (1 - 1e-9))
        return (modes[0], self.ports[modes[0]]) if modes else None


class OpticItem(_Priced):
    """A pluggable transceiver; an optical link needs one at each end."""

    kind: Literal["optic"]
    rate: float
    reach: float
    media: Literal["mmf", "smf"]
    networks: tuple[Network, ...] = NETWORKS

    _v_rate = field_validator("rate", mode="before")(lambda cls, v: _rate(v))
    _v_reach = field_validator("reach", mode="before")(lambda cls, v: _length(v))


class CableItem(_Priced):
    """A cable: copper (DAC/AEC, the whole link) or fibre (between two optics)."""

    kind: Literal["cable"]
    rate: float
    reach: float
    media: Literal["copper", "mmf", "smf"]
    networks: tuple[Network, ...] = NETWORKS

    _v_rate = field_validator("rate", mode="before")(lambda cls, v: _rate(v))
    _v_reach = field_validator("reach", mode="before")(lambda cls, v: _length(v))


class PcieItem(_Priced):
    kind: Literal["pcie"]


class SsdItem(_Priced):
    kind: Literal["ssd"]


class GpuItem(_Priced):
    """An accelerator; ``accelerator`` is the short name ``cost.accelerator`` and the cluster
    presets use (``h100``, ``b200``, ``ascend-910c``...)."""

    kind: Literal["gpu"]
    accelerator: str | None = None


class ServerItem(_Priced):
    """A server chassis without GPUs and NICs; ``gpus`` slots (the price scales per slot)."""

    kind: Literal["server"]
    gpus: int = Field(8, ge=1)


class ReferenceItem(_Item):
    """An anchor or a rule of thumb for cross-checks; never part of a BOM."""

    kind: Literal["reference"]
    price_usd: float | None = Field(None, ge=0)
    power_w: float | None = Field(None, ge=0)
    value: float | None = None


CatalogItem = Annotated[
    NicItem
    | SwitchItem
    | OpticItem
    | CableItem
    | PcieItem
    | SsdItem
    | GpuItem
    | ServerItem
    | ReferenceItem,
    Field(discriminator="kind"),
]


class Catalog(BaseModel):
    """All items by name. Build with :func:`load_catalog`; derive variants with
    :meth:`with_overrides`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str = "custom"
    currency: Literal["USD"] = "USD"
    items: dict[str, CatalogItem]

    def get(self, name: str, kind: str | None = None) -> Any:
        """The item called ``name`` (optionally checking its kind); unknown names suggest."""
        try:
            item = self.items[name]
        except KeyError:
            pool = [n for n, it in self.items.items() if kind is None or it.kind == kind]
            close = difflib.get_close_matches(name, pool, n=3, cutoff=0.4)
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise CatalogError(
                f"unknown cost catalog item {name!r}.{hint} Choices"
                f"{f' of kind {kind}' if kind else ''}: {', '.join(sorted(pool))}."
            ) from None
        if kind is not None and item.kind != kind:
            raise CatalogError(f"cost catalog item {name!r} is a {item.kind}, expected a {kind}")
        return item

    def of_kind(self, kind: str) -> dict[str, Any]:
        """Items of one kind, sorted by name."""
        return {n: it for n, it in sorted(self.items.items()) if it.kind == kind}

    def with_overrides(self, overrides: dict[str, dict[str, Any]] | None) -> Catalog:
        """A new catalog with fields of items replaced (or whole new items added).

        ``{"nic-panmai-920": {"price_usd": 2000}}`` changes one field and marks the item
        ``overridden``; a new name needs a full item with ``kind``, ``source`` and so on.
        """
        if not overrides:
            return self
        raw = self.model_dump()
        for name, fields in overrides.items():
            if not isinstance(fields, dict):
                raise CatalogError(
                    f"cost.prices.{name}: expected a mapping of item fields such as "
                    f"{{price_usd: 1000, power_w: 20}}, got {fields!r}"
                )
            if name in raw["items"]:
                merged = {**_as_yaml(self.items[name]), **fields, "overridden": True}
                if "price_confidence" not in fields:
                    if "price_usd" in fields:
                        merged["price_confidence"] = "user"
                    elif "confidence" in fields:
                        merged["price_confidence"] = None  # read again from the new text
                if "source" not in fields:
                    merged["source"] = f"overridden by scenario (catalog: {merged['source']})"
                raw["items"][name] = merged
            else:
                kind = fields.get("kind")
                if kind not in _KINDS:
                    close = difflib.get_close_matches(str(name), list(raw["items"]), n=3,
                                                      cutoff=0.5)  # fmt: skip
                    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
                    given = "has no kind" if kind is None else f"has kind {kind!r}"
                    raise CatalogError(
                        f"cost.prices.{name}: no catalog item is called {name!r}.{hint} To "
                        "change a price, name an existing item: "
                        f"{', '.join(sorted(raw['items']))}. To add an item, give its kind "
                        f"and every field of that kind (this one {given}; kinds: "
                        f"{', '.join(sorted(_KINDS))})."
                    )
                raw["items"][name] = {**fields, "overridden": True}
        return _validate(raw, "cost.prices")


def _as_yaml(item: Any) -> dict[str, Any]:
    """An item back as plain fields that validate again (SI numbers re-parse as themselves)."""
    d = item.model_dump()
    if "ports" in d and isinstance(d["ports"], dict):
        d["ports"] = {float(k): v for k, v in d["ports"].items()}
    return d


_KINDS = {"nic", "switch", "optic", "cable", "pcie", "ssd", "gpu", "server", "reference"}


def _validate(raw: dict[str, Any], where: str) -> Catalog:
    try:
        return Catalog.model_validate(raw)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = [str(p) for p in err["loc"]]
            if len(loc) > 3 and loc[0] == "items" and loc[2] in _KINDS:
                del loc[2]  # the discriminator tag pydantic inserts
            loc = ".".join(loc)
            msg = err["msg"]
            if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
                msg = f"'kind' must be one of {', '.join(sorted(_KINDS))}"
            lines.append(f"{where}: {loc}: {msg} (got {err.get('input')!r})")
        raise CatalogError("invalid cost catalog:\n  " + "\n  ".join(lines)) from None


def load_catalog(
    path: str | Path | None = None, overrides: dict[str, dict[str, Any]] | None = None
) -> Catalog:
    """Load and validate a catalog YAML (default: the built-in one), then apply overrides."""
    cat = _load_default() if path is None else _load_file(Path(path))
    return cat.with_overrides(overrides)


@lru_cache(maxsize=1)
def _load_default() -> Catalog:
    return _load_file(DEFAULT_CATALOG_PATH)


def _load_file(path: Path) -> Catalog:
    try:
        raw = read_yaml(path)  # libyaml when built in: ~0.1 s less per run than pure Python
    except OSError as exc:
        raise CatalogError(f"cannot read cost catalog {str(path)!r}: {exc.strerror}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise CatalogError(f"cost catalog {str(path)!r} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise CatalogError(f"cost catalog {str(path)!r} must be a mapping with an 'items' key")
    return _validate(raw, str(path))
