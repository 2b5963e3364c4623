"""The scenario file, as typed pydantic v2 models.

One YAML file describes one run: the cluster, the workload, the engine, the seed, the outputs and
(optionally) injected faults. Every model forbids unknown keys, so a typo is an error with a
did-you-mean (see :mod:`podsim.scenarios.errors`), never a silently ignored setting.

Quantities are written as strings with units (``"400Gbps"``, ``"4KiB"``, ``"2us"``, ``"5m"``) or
as bare SI numbers (a bare time of 1 s or more is refused as a missing unit: every time podsim
models is far below a second), parsed at this edge with :mod:`fabric.units` and stored in SI:
rates in bit/s (float), sizes in bytes (int), times in seconds (float), lengths in metres
(float). When a model
is dumped (``podsim show``, ``resolved.yaml``) quantities are printed human again, in a form that
parses back to exactly the same SI value.

Names of built-ins (topology builders, cluster presets, PHY profiles, congestion control, path
selectors, node layouts, model presets, dispatch modes, engines) are checked against the
registries of the owning packages through :mod:`podsim.scenarios.input.registries`.

Defaults and their sources (docs/physics.md):
- MTU 4096 B, 400 Mpps packet-rate ceiling: the brief's SmartNIC (T-Head Panmai 920) [S].
- ECN RED min 150 KB / max 1500 KB: NVIDIA Onyx/Cumulus RoCE defaults [S]; pmax 0.2 [E].
- Switch port-to-port latency 600 ns: 51.2T ASICs, 0.6-1 us [E].
- Shared buffer 64 MiB per switch: secondary sources give 100-160 MB for a 51.2T ASIC, a
  smaller radix switch is scaled down [E].
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union, get_args

from podsim.fabric.params import ParamSpec
from podsim.fabric.phy import PhyProfile
from podsim.fabric.plugins import is_plugin_spec
from podsim.fabric.switch import SwitchConfig as DeviceSwitchConfig
from podsim.fabric.units import (
    fmt_length,
    fmt_rate,
    fmt_time,
    parse_length,
    parse_packet_rate,
    parse_rate,
    parse_size,
    parse_time,
)
from podsim.nic.nic import NicConfig as DeviceNicConfig
from podsim.scenarios.cost.spec import CostSpec
from podsim.scenarios.errors import LATE_TAGGED, check_run_name
from podsim.scenarios.input.devices import kind_literal, section_model, section_values
from podsim.scenarios.input.registries import check_name
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

__all__ = [
    "CCConfig",
    "ClusterConfig",
    "EcnConfig",
    "FastForwardConfig",
    "Fault",
    "MoeWorkload",
    "MultipathConfig",
    "NameOf",
    "NicConfig",
    "OutputsConfig",
    "PfcConfig",
    "Quantity",
    "Scenario",
    "SimConfig",
    "SkewConfig",
    "StorageReads",
    "SwitchConfig",
    "SyntheticWorkload",
    "TopologyConfig",
    "TraceWorkload",
    "WorkloadConfig",
]


# --------------------------------------------------------------------------- quantities


def _exact(fmt: Any, parse: Any, value: float, unit: str = "") -> str | float:
    """The shortest human string that parses back to exactly ``value`` (else the number):
    prefixed (``100us``) when that is exact, else the plain SI number with its unit
    (``0.0001s``), else more digits."""
    candidates = [fmt(value, 4), fmt(value, 6)]
    if unit:
        candidates.append(f"{value!r}{unit}")
    candidates += [fmt(value, d) for d in (9, 12, 15, 17)]
    for text in candidates:
        try:
            if parse(text) == value:
                return text
        except ValueError:
            continue
    return value


def _fmt_size_exact(nbytes: int) -> str | int:
    for scale, prefix in ((2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{prefix}B"
    for scale, prefix in ((10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "K")):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{prefix}B"
    return nbytes


def _no_bool(parser: Any) -> Any:
    def parse(value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is a boolean, not a quantity")
        return parser(value)

    return parse


#: a bare number (no unit) is read as seconds; every time podsim models is far below a
#: second, so a bare number this large is a missing unit ("latency: 600" meant 600 ns)
BARE_TIME_LIMIT_S = 1.0


def _parse_time_checked(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is a boolean, not a quantity")
    bare = isinstance(value, int | float) or (
        isinstance(value, str) and _BARE_NUMBER.fullmatch(value.strip()) is not None
    )
    seconds = parse_time(value)
    if bare and seconds >= BARE_TIME_LIMIT_S:
        raise ValueError(
            f"{value!r} has no unit, so it reads as {seconds:g} seconds; write the unit "
            f"(e.g. '{value}ns', '{value}us' or '{value}s')"
        )
    return seconds


_BARE_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def _positive(value: float) -> float:
    if value <= 0:
        raise ValueError(f"{value!r} must be greater than zero")
    return value


@dataclass(frozen=True)
class Quantity:
    """Marks a quantity type for the key reference (``podsim docs``, :mod:`scenarios.input.docs`):
    what it measures, the SI unit it is stored in, and how it is written in a file."""

    kind: str
    unit: str
    example: str


@dataclass(frozen=True)
class NameOf:
    """Marks a name checked against a registry (``kind`` of :mod:`scenarios.input.registries`) for
    the key reference; ``plugin``: a ``module:Class`` plug-in is accepted too."""

    kind: str
    plugin: bool = False


#: a number with an optional unit, as scenario files write quantities ("400Gbps", "1.5us")
_QUANTITY_PATTERN = r"^\s*[-+]?[0-9.]+([eE][-+]?[0-9]+)?\s*[A-Za-z/]*\s*$"


def _quantity_json(kind: str, unit: str, example: str) -> WithJsonSchema:
    """The JSON Schema of a quantity (``podsim schema``, for YAML editors): a number in SI units
    or a string with a unit, as files write it."""
    return WithJsonSchema(
        {
            "anyOf": [{"type": "number"}, {"type": "string", "pattern": _QUANTITY_PATTERN}],
            "description": f"a {kind}: a number in {unit}, or a string with a unit "
            f"(e.g. {example!r})",
            "examples": [example],
        },
        mode="validation",
    )


Rate = Annotated[
    float,
    BeforeValidator(_no_bool(parse_rate)),
    PlainSerializer(lambda v: _exact(fmt_rate, parse_rate, v, "bps"), when_used="json"),
    Quantity("rate", "bit/s", "400Gbps"),
    _quantity_json("rate", "bit/s", "400Gbps"),
]
PacketRate = Annotated[
    float,
    BeforeValidator(_no_bool(parse_packet_rate)),
    PlainSerializer(
        lambda v: _exact(lambda x, d: f"{x / 1e6:.{d}g}Mpps", parse_packet_rate, v),
        when_used="json",
    ),
    Quantity("packet rate", "packets/s", "400Mpps"),
    _quantity_json("packet rate", "packets/s", "400Mpps"),
]
#: the largest size a scenario may give: 32 TiB, above any message, buffer or SSD read of a
#: GPU node (an accelerator has at most a few hundred GB of memory) and far enough below
#: 2**63 that sums over many messages stay exact in 64-bit counters [E]
MAX_SIZE_BYTES = 2**45


def _size_bound(value: int) -> int:
    if value > MAX_SIZE_BYTES:
        raise ValueError(
            f"{value:,} bytes is above 32 TiB, the largest size podsim accepts (check the unit)"
        )
    return value


Size = Annotated[
    int,
    BeforeValidator(_no_bool(parse_size)),
    AfterValidator(_size_bound),
    PlainSerializer(_fmt_size_exact, when_used="json"),
    Quantity("size", "bytes", "4KiB"),
    _quantity_json("size", "bytes", "4KiB"),
]
#: the shortest non-zero time a scenario may give: 1 ps, below any physical time podsim models
#: (one byte at 800 Gb/s takes 10 ps); a smaller one is a unit slip (``1e-30s``) [E]
MIN_TIME_S = 1e-12


def _resolvable(value: float) -> float:
    if 0 < value < MIN_TIME_S:
        raise ValueError(
            f"{value!r} s is below 1 ps, the shortest time podsim resolves (check the unit)"
        )
    return value


Time = Annotated[
    float,
    BeforeValidator(_parse_time_checked),
    AfterValidator(_resolvable),
    PlainSerializer(lambda v: _exact(fmt_time, parse_time, v, "s"), when_used="json"),
    Quantity("time", "s", "2us"),
    _quantity_json("time", "s", "2us"),
]
Length = Annotated[
    float,
    BeforeValidator(_no_bool(parse_length)),
    PlainSerializer(lambda v: _exact(fmt_length, parse_length, v, "m"), when_used="json"),
    Quantity("length", "m", "5m"),
    _quantity_json("length", "m", "5m"),
]
PositiveRate = Annotated[Rate, AfterValidator(lambda v: _positive(v))]
PositiveInt = Annotated[int, Field(gt=0, strict=True)]
#: free parameters handed to a builder; ``null`` (e.g. to drop inherited ones) means none
Params = Annotated[dict[str, Any], BeforeValidator(lambda v: {} if v is None else v)]
NonNegInt = Annotated[int, Field(ge=0, strict=True)]
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]

#: RoCEv2 path MTUs (the IB/RoCE MTU enumeration); larger frames are not RDMA MTUs.
ROCE_MTUS = (256, 512, 1024, 2048, 4096)


class Strict(BaseModel):
    """Base of every scenario model: unknown keys are errors; assignments are validated."""

    # allow_inf_nan: no quantity of a network is infinite or NaN (a YAML .inf is a typo)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


def _registry_name(kind: str, value: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a {kind} name (a non-empty string)")
    return check_name(kind, value)


def _plugin_or_name(kind: str, value: str) -> str:
    """A registered name, or ``module:Class`` / ``module.Class`` dotted path of a plug-in.

    A dotted path is accepted here; the runner loads it only with ``--allow-plugins``
    (a YAML file alone never runs code).
    """
    if isinstance(value, str) and ":" in value:
        module, _, attr = value.partition(":")
        if not module or not attr or not all(p.isidentifier() for p in module.split(".")):
            raise ValueError(f"plug-in {value!r} must have the form 'package.module:ClassName'")
        return value
    return _registry_name(kind, value)


def _name_type(kind: str, plugin: bool = False) -> Any:
    check = _plugin_or_name if plugin else _registry_name
    return Annotated[str, AfterValidator(lambda v: check(kind, v)), NameOf(kind, plugin)]


TopologyName = _name_type("topology")
ClusterPresetName = _name_type("cluster preset")
PhyName = _name_type("PHY profile")
NicModelName = _name_type("NIC model")
LayoutName = _name_type("node layout")
CCName = _name_type("congestion control", plugin=True)
SelectorName = _name_type("path selector", plugin=True)
PopularityName = _name_type("expert popularity")
ModelPresetName = _name_type("model preset")
DispatchModeName = _name_type("dispatch mode")
PlacementName = _name_type("expert placement")
PatternName = _name_type("synthetic pattern")
EngineName = _name_type("engine")
RankMapName = _name_type("rank mapping")
ScheduleName = _name_type("pipeline schedule")
GpuName = _name_type("GPU")
ServingModelName = _name_type("serving model")


is_plugin = is_plugin_spec


# --------------------------------------------------------------------------- cluster


class TopologyConfig(Strict):
    """An explicit topology: a ``podsim.fabric.topology.TOPOLOGIES`` builder and its arguments.

    ``params`` go to the builder; quantity strings are parsed by parameter name suffix
    (``*_bps``/``rate`` -> rate, ``*_m``/``length`` -> metres, ``*_s``/``latency`` -> seconds,
    ``*_bytes``/``buffer`` -> bytes), see :func:`podsim.scenarios.build.cluster.convert_params`.
    """

    name: TopologyName = Field(
        description="topology builder (podsim list topologies): fat-tree, rail, star, ..."
    )
    params: Params = Field(
        default_factory=dict,
        description="arguments of the builder; quantity strings are parsed by name suffix",
    )


#: registries whose names may also be a ``module:Class`` plug-in
_PLUGIN_REGISTRIES = ("congestion control", "path selector")


def _at_least(minimum: float, exclusive: bool) -> AfterValidator:
    def check(v: Any) -> Any:
        if v is not None and (v <= minimum if exclusive else v < minimum):
            raise ValueError(f"{v!r} must be {'above' if exclusive else 'at least'} {minimum:g}")
        return v

    return AfterValidator(check)


def _param_type(p: ParamSpec) -> Any:
    """The annotated value type of a device parameter (:mod:`podsim.fabric.params` kinds)."""
    quantity = {"size": Size, "time": Time, "rate": Rate, "packet_rate": PacketRate,
                "length": Length}  # fmt: skip
    if p.kind in quantity:
        t: Any = quantity[p.kind]
        if p.minimum is not None:
            t = Annotated[t, _at_least(p.minimum, p.exclusive)]
    elif p.kind in ("int", "count"):
        bound = {} if p.minimum is None else {"gt" if p.exclusive else "ge": int(p.minimum)}
        t = Annotated[int, Field(strict=True, **bound)]
    elif p.kind == "float":
        bound = {} if p.minimum is None else {"gt" if p.exclusive else "ge": p.minimum}
        t = Annotated[float, Field(**bound)]
    elif p.kind == "fraction":
        t = Fraction
    elif p.kind == "bool":
        t = bool
    elif p.kind == "choice":
        t = kind_literal(p.choices or {})
    elif p.kind == "name":
        t = _name_type(str(p.registry), plugin=p.registry in _PLUGIN_REGISTRIES)
    elif p.kind == "params":
        t = Params
    else:  # pragma: no cover - params.KINDS and this function are kept in step
        raise ValueError(f"no scenario type for parameter kind {p.kind!r}")
    return t | None if p.optional else t


def _nic_from_model(cls: Any, data: Any) -> Any:
    """Fill every key the file does not write from the NIC preset ``model``. A ``cc`` or
    ``multipath`` section that names its algorithm keeps that algorithm's own parameters
    (only the other keys, e.g. ``multipath.paths``, come from the preset)."""
    if not isinstance(data, dict):
        return data
    preset = _nic_preset(data.get("model", "smartnic-400g"))
    if preset is None:
        return data
    out = dict(data)
    for key, value in preset.items():
        if not isinstance(value, dict) or key.endswith("params"):
            out.setdefault(key, value)
            continue
        given = out.get(key)
        if given is None:
            out[key] = dict(value)
        elif isinstance(given, dict):
            name_key = next(iter(value))  # the group's first key names its algorithm
            named = name_key in given
            out[key] = {
                **{
                    k: v
                    for k, v in value.items()
                    if not (named and (k == name_key or k == "params"))
                },
                **given,
            }
    return out


def _roce_mtu(cls: Any, v: int) -> int:
    if v not in ROCE_MTUS:
        raise ValueError(f"MTU {v} B is not a RoCE path MTU; use one of {list(ROCE_MTUS)}")
    return v


NicConfig = section_model(
    DeviceNicConfig,
    "NicConfig",
    """The RDMA NIC on every scale-out port (``podsim.nic.nic.NicConfig``: every key here is
    generated from that device config, with its unit, default and source).

    ``model`` names a transport preset of ``nic.NIC_MODELS`` (``smartnic-400g``: the design's
    SmartNIC, spraying + selective repeat + DCQCN; ``roce``: ECMP + go-back-N + DCQCN; ``uec``:
    REPS + selective repeat + NSCC); every key not written in the file comes from the preset, so
    ``model: roce`` alone gives a classic RoCE NIC and any key written overrides it (``show``
    prints the result). The port's PHY and rate come from the topology (its ``nic_phy`` /
    ``host_phy`` / ``phy`` parameter); ``phy`` and ``rate`` here are checks: when given they
    must match every NIC port's link, so a scenario cannot claim a NIC speed the fabric does not
    have.""",
    types=_param_type,
    base=Strict,
    groups={
        "cc": (
            "CCConfig",
            "congestion control: a built-in algorithm (nic CC registry) or a "
            "module:Class plug-in, with parameters that override its published defaults",
        ),
        "multipath": (
            "MultipathConfig",
            "path selection of the transport: a selector from the "
            "NIC's registry (ecmp, spray, bitmap, reps, adaptive) over entropy values",
        ),
    },
    extra={
        "model": (
            NicModelName,
            Field(
                "smartnic-400g",
                description="transport preset (podsim list nic): fills every NIC key not written",
            ),
        ),
        "phy": (
            PhyName | None,
            Field(None, description="check: the PHY profile every NIC port's link must have"),
        ),
        "rate": (
            PositiveRate | None,
            Field(None, description="check: the MAC rate every NIC port's link must have"),
        ),
    },
    validators={
        "_from_model": model_validator(mode="before")(classmethod(_nic_from_model)),
        "_roce_mtu": field_validator("mtu")(classmethod(_roce_mtu)),
    },
)


def _nic_preset(name: Any) -> dict[str, Any] | None:
    """The scenario-shaped defaults of NIC model ``name`` (None: an unknown name, which the
    field validator then reports)."""
    from podsim.scenarios.input.registries import get_registry

    reg = get_registry("NIC model")
    if not isinstance(name, str) or name not in reg:
        return None
    return section_values(DeviceNicConfig, reg.get(name)())


def _ecn_order(self: Any) -> Any:
    if self.kmin > self.kmax:
        raise ValueError(f"kmin ({self.kmin} B) must not exceed kmax ({self.kmax} B)")
    return self


def _pfc_order(self: Any) -> Any:
    if self.xon >= self.xoff:
        raise ValueError(f"xon ({self.xon} B) must be below xoff ({self.xoff} B)")
    return self


def _switch_fits(self: Any) -> Any:
    if self.pfc.enabled and self.buffer is not None and self.pfc.xoff > self.buffer:
        raise ValueError(
            f"pfc.xoff ({self.pfc.xoff} B) is larger than the buffer ({self.buffer} B)"
        )
    return self


SwitchConfig = section_model(
    DeviceSwitchConfig,
    "SwitchConfig",
    """Every switch: shared buffer with dynamic thresholds, ECN, PFC, forwarding latency
    (``podsim.fabric.switch.SwitchConfig``: every key here is generated from that device config,
    with its unit, default and source).

    PFC is off by default (lossy RoCE with ECN is the modern default); when on, ECN must fire
    first (docs/physics.md, switches) so ``pfc.xoff`` should sit above ``ecn.kmax``. A
    packet-engine run is refused (``--force`` overrides) when a switch's ingress links together
    could hold ``xoff`` plus their in-flight headroom (one link round trip plus two frames each)
    beyond its buffer: such a switch can drop despite PFC.""",
    types=_param_type,
    base=Strict,
    groups={
        "ecn": ("EcnConfig", "ECN marking (RED) by queue bytes"),
        "pfc": (
            "PfcConfig",
            "priority flow control: pause upstream at xoff bytes queued, resume at xon",
        ),
    },
    validators={"_fits": model_validator(mode="after")(_switch_fits)},
    group_validators={
        "ecn": {"_order": model_validator(mode="after")(_ecn_order)},
        "pfc": {"_order": model_validator(mode="after")(_pfc_order)},
    },
)
CCConfig = NicConfig.model_fields["cc"].annotation
MultipathConfig = NicConfig.model_fields["multipath"].annotation
EcnConfig = SwitchConfig.model_fields["ecn"].annotation
PfcConfig = SwitchConfig.model_fields["pfc"].annotation


PhyOverride = section_model(
    PhyProfile,
    "PhyOverride",
    """Overrides of one PHY profile (``podsim.fabric.phy.PhyProfile``): what the profile's name
    fixes (rates, lanes, modulation, FEC code) comes with the choice of profile; the keys here
    change the rest for every link of that profile in this scenario.""",
    types=_param_type,
    base=Strict,
    partial=True,
)


def _layout_params_model(name: str, description: str) -> type[BaseModel]:
    """The model of node layout ``name``'s ``cluster.layout_params``: generated from the
    dataclass that declares the layout's parameters (``podsim.nic.pcie.layouts.NodeLayout``),
    tagged with the layout's name (``union_tag``, the label of an error's location)."""
    from podsim.nic.pcie.layouts import NODE_LAYOUTS

    camel = "".join(w.title() for w in name.split("-"))
    base = type(f"{camel}Tagged", (Strict,),
                {"__annotations__": {"union_tag": ClassVar[str]}, "union_tag": name,
                 "__module__": __name__})  # fmt: skip
    return section_model(
        NODE_LAYOUTS.get(name).params,
        f"{camel}LayoutParams",
        f"Parameters of node layout {name} ({description}).",
        types=_param_type,
        base=base,
    )


def _layout_params_models() -> dict[str, type[BaseModel]]:
    """Per node layout registered when the schema is built, the model of its parameters."""
    from podsim.nic.pcie.layouts import NODE_LAYOUTS

    return {name: _layout_params_model(name, d) for name, d in NODE_LAYOUTS.describe()}


#: node layout name -> the model of its parameters (``cluster.layout_params``)
LAYOUT_PARAMS: dict[str, type[BaseModel]] = _layout_params_models()


def _tagged(exc: ValidationError, tag: str) -> ValidationError:
    """``exc`` with ``tag`` in front of every error's location (what pydantic does for a
    tagged union), so that :mod:`podsim.scenarios.errors` finds the model the tag names."""
    lines = []
    for e in exc.errors(include_url=False):
        line: dict[str, Any] = {"type": e["type"], "loc": (tag, *e["loc"]), "input": e["input"]}
        if e.get("ctx"):
            line["ctx"] = e["ctx"]
        lines.append(line)
    return ValidationError.from_exception_data(exc.title, lines)  # type: ignore[arg-type]


def _check_layout_params(v: Any, info: ValidationInfo) -> dict[str, Any]:
    """``cluster.layout_params`` checked against the parameters ``cluster.layout`` declares;
    kept as the keys the file gives (dumped in the file's form), so that the build knows which
    of gpus/nics the file repeats (the topology sets them)."""
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ValueError(f"layout_params must be a mapping of the layout's parameters, got {v!r}")
    if not v:
        return {}
    layout = info.data.get("layout")
    if layout is None:
        if "layout" in info.data:
            raise ValueError(
                "layout parameters need a node layout: set cluster.layout (podsim list layouts)"
            )
        return dict(v)  # the layout itself is invalid; its own error says why
    model = LAYOUT_PARAMS.get(layout)
    if model is None:
        from podsim.nic.pcie.layouts import NODE_LAYOUTS

        if layout not in NODE_LAYOUTS:
            return dict(v)  # the layout itself is invalid; its own error says why
        # a layout registered after the schema was built (a plug-in): checked the same way
        description = dict(NODE_LAYOUTS.describe())[layout]
        model = _layout_params_model(layout, description)
        LAYOUT_PARAMS[layout] = LATE_TAGGED[layout] = model
    try:
        parsed = model.model_validate(v)
    except ValidationError as exc:
        raise _tagged(exc, layout) from None
    return parsed.model_dump(mode="json", exclude_unset=True)


#: ``cluster.layout_params``: one generated model per layout, the layout picking which
LayoutParams = Annotated[
    Union[tuple(LAYOUT_PARAMS.values())],  # type: ignore[valid-type]  # noqa: UP007
    PlainValidator(_check_layout_params),
    PlainSerializer(lambda v: v),
]


class RoutingConfig(Strict):
    """How the fabric routes: how long static routes take to reconverge after a failure
    (50 ms is a typical BGP/BFD datacentre figure [E]). Switches always hash the 5-tuple, whose
    UDP source port carries the packet's entropy value (RoCEv2/UEC), so a QP with one EV stays on
    one path and per-packet EVs spray (``podsim.fabric.switch.Switch.select``)."""

    reconvergence: Time = Field(
        parse_time("50ms"), description="how long routes take to avoid a failed link or switch"
    )


#: what a message of the workload is, for traffic classes (``cluster.traffic_classes.assign``)
TRAFFIC_KINDS: dict[str, str] = {
    "moe-low-latency": "MoE dispatch/combine in deepep-low-latency mode",
    "moe-normal": "MoE dispatch/combine in the other modes, training's EP all-to-all, trace rows "
    "of the dispatch and combine phases",
    "kv-transfer": "serving's KV-cache transfers from prefill to decode",
    "collective": "every other message of an operation graph (collectives; training's TP, PP "
    "and DP; Chakra and Kineto traces)",
    "other": "synthetic patterns and trace rows of the phase 'other'",
}
#: a kind the schema knows but refuses, with why
UNCLASSABLE_KINDS = {
    "storage": "GPUDirect Storage reads (workload.storage) run on the node's PCIe tree from the "
    "SSD beside the GPU and never enter the fabric, so no traffic class schedules them; "
    "assign the network kinds only"
}


class TrafficClassEcn(Strict):
    """ECN thresholds of one class's queues (default: ``cluster.switch.ecn``)."""

    kmin: Size | None = Field(None, description="queue depth where marking starts")
    kmax: Size | None = Field(None, description="queue depth where marking reaches pmax")

    @model_validator(mode="after")
    def _order(self) -> TrafficClassEcn:
        if self.kmin is not None and self.kmax is not None and self.kmin > self.kmax:
            raise ValueError(f"kmin ({self.kmin} B) must not exceed kmax ({self.kmax} B)")
        return self


class TrafficClassConfig(Strict):
    """One traffic class: strict ``priority`` level (higher first; IEEE 802.1Q-2018 8.6.8.1),
    DWRR ``weight`` among classes of the same priority (802.1Q clause 37, ETS), lossless ``pfc``
    (802.1Qbb per-priority pause) and its ECN thresholds."""

    name: Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_.-]+$")] = Field(
        description="class name (letters, digits, _ . -)"
    )
    priority: Annotated[int, Field(ge=0, le=7, strict=True)] = Field(
        0, description="strict-priority level, 0 .. 7 (higher is served first)"
    )
    weight: Annotated[float, Field(gt=0)] = Field(
        1.0, description="DWRR share among the classes of the same priority (> 0)"
    )
    pfc: bool | None = Field(
        None, description="lossless with per-class PFC (default: cluster.switch.pfc.enabled)"
    )
    ecn: TrafficClassEcn = Field(
        default_factory=TrafficClassEcn, description="this class's ECN thresholds"
    )


class TrafficClassesConfig(Strict):
    """Traffic classes (packet engine): switch and NIC egress ports keep one queue per class,
    served by strict priority across ``priority`` levels and deficit weighted round robin by
    ``weight`` within a level (IEEE 802.1Q-2018 clauses 8.6.8 and 37, from 802.1Qaz ETS), with
    PFC per class (802.1Qbb) and ECN on each class queue. ``assign`` maps each class to the
    message kinds it carries (podsim docs lists the kinds); kinds not assigned go to
    ``default`` (unless named: the first class of the lowest priority, best effort). Omitted:
    one class, as a fabric without classes."""

    classes: Annotated[list[TrafficClassConfig], Field(min_length=1)] = Field(
        description="the classes, at most 8 (802.1Q priorities)"
    )
    assign: dict[str, list[str]] = Field(
        default_factory=dict,
        description="class name -> message kinds: "
        + "; ".join(f"{k} ({v})" for k, v in TRAFFIC_KINDS.items()),
    )
    default: str | None = Field(
        None,
        description="class of the kinds not assigned (default: the first class of the lowest "
        "priority)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> TrafficClassesConfig:
        import difflib

        from podsim.fabric.classes import check_class_names

        names = [c.name for c in self.classes]
        check_class_names(names)

        def hint(x: str, among: list[str]) -> str:
            close = difflib.get_close_matches(x, among, n=2, cutoff=0.5)
            return f" Did you mean {' or '.join(map(repr, close))}?" if close else ""

        if self.default is not None and self.default not in names:
            raise ValueError(
                f"default: unknown class {self.default!r}.{hint(self.default, names)} "
                f"Classes: {', '.join(names)}"
            )
        owner: dict[str, str] = {}
        kinds = list(TRAFFIC_KINDS)
        for cls, ks in self.assign.items():
            if cls not in names:
                raise ValueError(
                    f"assign: unknown class {cls!r}.{hint(cls, names)} Classes: {', '.join(names)}"
                )
            for k in ks:
                if k in UNCLASSABLE_KINDS:
                    raise ValueError(f"assign.{cls}: kind {k!r}: {UNCLASSABLE_KINDS[k]}")
                if k not in TRAFFIC_KINDS:
                    raise ValueError(
                        f"assign.{cls}: unknown kind {k!r}.{hint(k, kinds)} Kinds: "
                        f"{', '.join(kinds)}"
                    )
                if k in owner:
                    raise ValueError(
                        f"assign: kind {k!r} is assigned twice, to {owner[k]!r} and {cls!r}; "
                        "a kind belongs to one class"
                    )
                owner[k] = cls
        return self

    def class_of_kind(self) -> dict[str, int]:
        """Every message kind -> the index of its class."""
        names = [c.name for c in self.classes]
        if self.default is not None:
            default = names.index(self.default)
        else:  # best effort: the first class of the lowest priority
            least = min(c.priority for c in self.classes)
            default = next(i for i, c in enumerate(self.classes) if c.priority == least)
        out = dict.fromkeys(TRAFFIC_KINDS, default)
        for cls, ks in self.assign.items():
            for k in ks:
                out[k] = names.index(cls)
        return out


class ClusterConfig(Strict):
    """The cluster: a named preset (``params`` override its arguments) or an explicit
    ``topology`` (builder + params), both from ``fabric.topology.TOPOLOGIES``; the node's PCIe
    layout (``podsim.nic.pcie.NODE_LAYOUTS``; ``layout_params`` beyond the GPUs and NICs per server
    that the topology fixes), the rank placement, the NICs, the switches and the routing."""

    preset: ClusterPresetName | None = Field(
        None, description="named cluster (podsim list topologies); or give topology"
    )
    params: Params = Field(
        default_factory=dict, description="arguments that override the preset's (e.g. nodes)"
    )
    topology: TopologyConfig | None = Field(
        None, description="explicit topology (builder and params); or give preset"
    )
    layout: LayoutName | None = Field(
        None, description="PCIe node layout (podsim list layouts); none: no PCIe model"
    )
    layout_params: LayoutParams = Field(
        default_factory=dict,
        description="parameters of the node layout (cluster.layout picks which; GPUs and NICs "
        "per server come from the topology)",
    )
    rank_map: RankMapName | list[NonNegInt] = Field(
        "contiguous",
        description="rank placement on GPUs: a rank mapping name or one GPU index per rank",
    )
    nic: NicConfig = Field(default_factory=NicConfig, description="the RDMA NIC of every port")
    switch: SwitchConfig = Field(default_factory=SwitchConfig, description="every switch")
    phys: dict[PhyName, PhyOverride] = Field(  # type: ignore[valid-type]
        default_factory=dict,
        description="per PHY profile (e.g. 400GbE), overrides of its parameters for every link "
        "of that profile",
    )
    routing: RoutingConfig = Field(
        default_factory=RoutingConfig, description="ECMP hashing and failure reconvergence"
    )
    traffic_classes: TrafficClassesConfig | None = Field(
        None,
        description="traffic classes with strict priority, DWRR, per-class PFC and ECN "
        "(packet engine); omitted: one class",
    )

    def topology_source(self) -> tuple[str, dict[str, Any], str]:
        """(builder name, its parameters, the scenario key that holds them): the preset or
        the explicit topology, whichever the cluster names."""
        if self.preset is not None:
            return self.preset, dict(self.params), "cluster.params"
        assert self.topology is not None  # _one_source guarantees one of them
        return self.topology.name, dict(self.topology.params), "cluster.topology.params"

    @model_validator(mode="after")
    def _one_source(self) -> ClusterConfig:
        if (self.preset is None) == (self.topology is None):
            raise ValueError(
                "give exactly one of 'preset' (a named cluster) or 'topology' "
                "(a builder name and params)"
            )
        if self.params and self.preset is None:
            raise ValueError("'params' override a preset; with 'topology' use topology.params")
        return self


# --------------------------------------------------------------------------- workload


def _existing_file(v: Path, info: ValidationInfo, what: str) -> Path:
    """A file path relative to the scenario file's folder (validation context ``base_dir``)."""
    base = (info.context or {}).get("base_dir")
    p = v if v.is_absolute() or base is None else Path(base) / v
    if not p.is_file():
        raise ValueError(f"{what} {str(p)!r} does not exist")
    return p.resolve()


class SkewConfig(Strict):
    """Expert popularity: ``uniform``, ``zipf`` (exponent), ``lognormal`` (target per-rank
    max/mean; TensorRT-LLM measured 2.56 on DeepSeek-R1 EP32 [S]) or ``replay``."""

    kind: PopularityName = Field(
        "uniform", description="expert popularity model (podsim list popularity)"
    )
    max_mean: Annotated[float, Field(ge=1.0)] | None = Field(
        None,
        description="zipf or lognormal: target max/mean tokens per rank (or give exponent)",
    )
    exponent: Annotated[float, Field(gt=0.0)] | None = Field(
        None,
        description="zipf or lognormal: the shape, zipf's exponent s or lognormal's sigma "
        "(or give max_mean)",
    )
    params: Params = Field(
        default_factory=dict, description="more arguments of the popularity model"
    )

    @model_validator(mode="after")
    def _skew_of_kind(self) -> SkewConfig:
        # uniform popularity has no skew to set: a max_mean or exponent would be ignored
        if self.kind == "uniform":
            given = [k for k in ("max_mean", "exponent") if getattr(self, k) is not None]
            if given:
                verb = "sets" if len(given) == 1 else "set"
                raise ValueError(
                    f"{' and '.join(given)} {verb} the skew of 'zipf' or 'lognormal' "
                    f"popularity; kind 'uniform' has none: set kind, or remove "
                    f"{' and '.join(given)}"
                )
        elif (self.max_mean is None) == (self.exponent is None) and not {
            "target_max_mean",
            "skew_shape",
        } & set(self.params or {}):
            # the kernels' own message names their arguments (target_max_mean, shape), not
            # these keys
            what = "both" if self.max_mean is not None else "neither"
            raise ValueError(
                f"kind {self.kind!r} needs exactly one of max_mean (target max/mean tokens "
                f"per rank, e.g. 2.56) or exponent (the shape of the popularity); {what} given"
            )
        return self


class TrainingSkewConfig(SkewConfig):
    """The training step's expert popularity (``workload.training.routing: sampled``): a
    :class:`SkewConfig` without ``params`` (those are arguments of the moe workload's trace)."""

    @field_validator("params")
    @classmethod
    def _no_params(cls, v: dict[str, Any]) -> dict[str, Any]:
        if v:
            raise ValueError(
                f"{sorted(v)}: the training step's skew takes kind and max_mean or exponent "
                "only (params are arguments of the moe workload's trace)"
            )
        return v


class DeepEPKernelConfig(Strict):
    """DeepEP's internode normal kernels (``deepep-normal`` over several nodes), as
    podsim.workloads.deepep_kernels models them: channels of two SMs each, RDMA chunks per
    (channel, node), the NVLink forward of each chunk as it arrives (github:deepseek-ai/DeepEP
    dd758ca, csrc/kernels/legacy/internode.cu); ``copy_rate`` also applies within one node
    (csrc/kernels/legacy/intranode.cu). The ``ll_*`` keys: the low-latency kernels' GPU-side
    time beyond their messages (podsim.workloads.deepep_ll, csrc/kernels/legacy/internode_ll.cu)."""

    pipelined: bool = Field(
        True,
        description="cut the messages into DeepEP's chunk rounds, forwarding each chunk over "
        "NVLink as it arrives; false: the whole RDMA stage arrives before the forward starts",
    )
    sms: PositiveInt = Field(
        24,
        description="SMs of the kernel, even (channels = sms / 2); DeepEP's internode test "
        "uses 24 (tests/legacy/test_internode.py)",
    )
    dispatch_rdma_chunk: PositiveInt | None = Field(
        None,
        description="dispatch tokens per RDMA write of one channel to one node "
        "(num_max_rdma_chunked_send_tokens); default: DeepEP's get_dispatch_config for ep_size",
    )
    combine_rdma_chunk: PositiveInt | None = Field(
        None,
        description="combine tokens per RDMA write of one channel to one node; default: "
        "DeepEP's get_combine_config for ep_size",
    )

    copy_rate: PositiveRate | None = Field(
        None,
        description="deepep-normal: the rate at which the kernel's SMs copy rows into one GPU, "
        "every row it receives over the scale-up domain and its rows to itself alike (DeepEP's "
        "kernels copy each received row out of their buffers with the SMs, their own included; "
        "the NVLink links limit only the rows from peers). A GPU's copies share it max-min "
        "fairly; null: not limited. DeepEP publishes no figure [E]: calibrate it (e.g. "
        "on its EP8 intranode figure, benchmarks/validate_hardware.py). Modelled by the flow "
        "and packet engines and the bound",
    )

    ll_dispatch_fixed: Time = Field(
        0.0,
        description="deepep-low-latency: fixed GPU-side time of a rank's dispatch kernel after "
        "its last message arrived (count signalling after the data and its polling, grid sync, "
        "FP8 cast and WQE posting, the barrier's start skew between ranks; "
        "podsim.workloads.deepep_ll). No published figure [E]: calibrate it (DeepEP's H800 "
        "testbed: benchmarks/validate_hardware.py fits it on half its low-latency points)",
    )
    ll_combine_fixed: Time = Field(
        0.0,
        description="deepep-low-latency: fixed GPU-side time of a rank's combine kernel after "
        "its last message arrived, beyond the reduction (flag signalling and polling, grid "
        "sync, send-buffer copies, start skew) [E]: calibrate it as ll_dispatch_fixed",
    )
    ll_reduce_rate: PositiveRate | None = Field(
        None,
        description="deepep-low-latency: rate of the combine receiver's reduction, which "
        "starts when every copy has arrived and reads the rank's top-k copies and writes its "
        "tokens (an HBM pass: H800 3.35TB/s, NVIDIA H100/H800 datasheet); null: not modelled",
    )

    @field_validator("sms")
    @classmethod
    def _even(cls, v: int) -> int:
        if v % 2:
            raise ValueError(f"DeepEP runs its channels on pairs of SMs: sms must be even, not {v}")
        return v


class MoeWorkload(Strict):
    """One MoE model's expert-parallel all-to-all, generated by ``workloads.moe_layer_trace``.

    ``model`` a preset; ``ep_size`` ranks with ``tokens_per_rank`` tokens each; ``mode`` the
    dispatch mode (deepep-normal, deepep-low-latency, megatron-alltoall); ``skew`` the expert
    popularity; ``placement`` of experts on ranks (``redundant_experts`` EPLB replicas with
    ``redundant``); ``routing_limit`` ``model`` (the preset's group limit), ``none`` or ``node``
    (at most ``max_nodes`` nodes per token); ``routing`` replays recorded expert ids (.npy).
    Compute between dispatch and combine: ``compute_time`` if given, else the workloads model
    at ``tflops`` achieved (default: its estimate) plus ``compute_overhead`` per layer."""

    model: ModelPresetName = Field(
        "deepseek-v3", description="MoE model preset (podsim list models)"
    )
    ep_size: PositiveInt = Field(16, description="expert-parallel ranks (GPUs)")
    tokens_per_rank: PositiveInt = Field(4096, description="tokens each rank routes per layer")
    skew: SkewConfig = Field(default_factory=SkewConfig, description="expert popularity")
    mode: DispatchModeName = Field(
        "deepep-normal", description="dispatch mode (podsim list dispatch)"
    )
    nvlink_for_low_latency: bool = Field(
        True,
        description="deepep-low-latency: send same-node messages over the scale-up fabric, as "
        "DeepEP's Buffer does by default (allow_nvlink_for_low_latency_mode=True); false sends "
        "every message by RDMA (DeepEP's pure-RDMA setting, test_low_latency.py --disable-nvlink)",
    )
    placement: PlacementName = Field(
        "contiguous", description="placement of experts on ranks (podsim list placements)"
    )
    redundant_experts: NonNegInt = Field(
        0, description="EPLB replicas of the hottest experts (placement: redundant)"
    )
    routing_limit: Literal["model", "none", "node"] = Field(
        "model",
        description="node limit of a token: the preset's group limit, none, or max_nodes",
    )
    max_nodes: PositiveInt | None = Field(
        None, description="routing_limit node: at most this many nodes per token"
    )
    routing: Path | None = Field(
        None, description="recorded expert ids to replay (.npy), relative to the scenario file"
    )
    layers: PositiveInt = Field(1, description="MoE layers per step")
    steps: PositiveInt = Field(1, description="steps (forward passes) to simulate")
    dispatch_dtype: Literal["fp8", "bf16"] = Field(
        "fp8", description="data type of dispatched tokens"
    )
    combine_dtype: Literal["fp8", "bf16"] = Field(
        "bf16", description="data type of combined tokens"
    )
    traffic_source: Literal["auto", "kernels", "counts"] = Field(
        "auto",
        description="where the messages come from (podsim.workloads.kernel_traffic): kernels "
        "runs the mode's dispatch and combine kernels on real NumPy tensors of every rank and "
        "reads each message from their buffers; counts derives the same messages from the "
        "routing counts, moving no tensor (fast); auto is kernels when their buffers fit "
        "kernel_memory, else counts checked against the kernels on kernel_sample_ranks ranks "
        "of every layer (a disagreement is an error)",
    )
    kernel_memory: Size = Field(
        1 << 30,
        description="most bytes of kernel buffers per layer for traffic_source kernels or auto "
        "[E] (1 GiB; quickstart needs about 0.2 GB)",
    )
    kernel_sample_ranks: PositiveInt = Field(
        4,
        description="traffic_source auto, when every rank does not fit kernel_memory: source "
        "ranks (spread evenly) whose messages the kernels check in every layer [E]",
    )
    tflops: Annotated[float, Field(gt=0)] | None = Field(
        None, description="achieved TFLOP/s of expert compute (default: the workloads estimate)"
    )
    compute_overhead: Time = Field(0.0, description="fixed compute time added per layer")
    compute_time: Time | None = Field(
        None, description="expert compute per layer and rank (overrides the compute model)"
    )
    deepep: DeepEPKernelConfig = Field(
        default_factory=DeepEPKernelConfig,
        description="DeepEP's kernels: deepep-normal's channels and chunks (over several "
        "nodes) and SM copy rate; deepep-low-latency's GPU-side time beyond the messages",
    )

    @model_validator(mode="after")
    def _max_nodes_needs_node_limit(self) -> MoeWorkload:
        if self.max_nodes is not None and self.routing_limit != "node":
            raise ValueError(
                f"max_nodes applies with routing_limit 'node', not {self.routing_limit!r}: set "
                "routing_limit: node, or remove max_nodes"
            )
        return self

    @field_validator("routing")
    @classmethod
    def _routing_exists(cls, v: Path | None, info: ValidationInfo) -> Path | None:
        return None if v is None else _existing_file(v, info, "routing file")


class TraceWorkload(Strict):
    """A recorded trace file (Parquet or CSV, schema of ``workloads.trace``); a relative path is
    taken relative to the scenario file that names it. ``ranks`` is needed only when the file
    does not record ``num_ranks`` (default then: highest rank + 1). Compute time between
    dispatch and combine: ``compute_time`` if given, else the trace's own compute table, else
    zero."""

    path: Path = Field(description="trace file (.parquet or .csv), relative to the scenario file")
    format: Literal["auto", "parquet", "csv", "splits"] = Field(
        "auto",
        description="file format; auto: by extension (.npy: a split matrix); splits: an "
        "all-to-all split matrix (.npy or CSV, row = source rank, podsim.workloads.splits)",
    )
    unit: Literal["bytes", "tokens"] = Field("bytes", description="splits: what the matrix counts")
    bytes_per_token: PositiveInt | None = Field(
        None, description="splits with unit tokens: bytes of one token"
    )
    ranks: PositiveInt | None = Field(
        None, description="ranks, when the file does not record num_ranks"
    )
    compute_time: Time | None = Field(
        None, description="compute between dispatch and combine (else the trace's table)"
    )

    @field_validator("path")
    @classmethod
    def _exists(cls, v: Path, info: ValidationInfo) -> Path:
        return _existing_file(v, info, "trace file")


class SyntheticWorkload(Strict):
    """A synthetic pattern from ``workloads`` (uniform all-to-all, permutation, incast, ring)."""

    pattern: PatternName = Field("uniform", description="traffic pattern (podsim list patterns)")
    ranks: PositiveInt | None = Field(
        None, description="ranks taking part (default: every GPU of the cluster)"
    )
    size: Size = Field(1 << 20, description="bytes of each message")
    steps: PositiveInt = Field(1, description="repetitions of the pattern")
    compute_time: Time = Field(0.0, description="compute between steps")
    params: Params = Field(default_factory=dict, description="more arguments of the pattern")

    @field_validator("size")
    @classmethod
    def _size_pos(cls, v: int) -> int:
        if v <= 0:
            raise ValueError("message size must be greater than zero bytes")
        return v


class CollectiveWorkload(Strict):
    """One collective, repeated ``steps`` times, as NCCL runs it (podsim.workloads.collectives):
    ``op`` over ``ranks`` (default: every GPU, in rank order) of ``size`` bytes (NCCL's
    convention: the per-rank buffer of all-reduce, the input of reduce-scatter, the output of
    all-gather, the per-rank send buffer of all-to-all) with ``algorithm`` (podsim list
    collectives), ``channels`` parallel rings, chunks of ``chunk`` bytes (0: whole slices) and,
    for ``hierarchical``, scale-up groups of ``local_size`` consecutive ranks (default: the
    GPUs of one scale-up domain). ``compute_time`` runs on every rank before each repetition.
    ``broadcast`` and ``reduce`` start (end) at rank ``root``; ``send-recv`` sends ``size``
    bytes over each of ``peers`` ((src, dst) pairs) or, without them, from every rank to the
    one ``shift`` places on (nccl-tests sendrecv). Without ``algorithm`` an op runs NCCL's
    ring, or ``direct`` for all-to-all and send-recv."""

    op: Literal[
        "all-reduce",
        "reduce-scatter",
        "all-gather",
        "all-to-all",
        "broadcast",
        "reduce",
        "send-recv",
    ] = Field("all-reduce", description="the collective")
    algorithm: str = Field(
        "ring", description="algorithm (podsim list collectives; default ring, or direct)"
    )
    root: NonNegInt = Field(0, description="broadcast / reduce: the root rank")
    peers: list[tuple[NonNegInt, NonNegInt]] | None = Field(
        None, description="send-recv: (src, dst) rank pairs (default: the shift pattern)"
    )
    shift: PositiveInt = Field(1, description="send-recv without peers: rank i sends to i + shift")
    size: Size = Field(1 << 26, description="bytes, NCCL's count x type size")
    ranks: PositiveInt | None = Field(
        None, description="ranks taking part (default: every GPU of the cluster)"
    )
    channels: PositiveInt = Field(1, description="parallel rings (NCCL channels)")
    chunk: Size = Field(0, description="pipeline chunk in bytes (0: one chunk per ring step)")
    local_size: PositiveInt | None = Field(
        None, description="hierarchical: ranks per scale-up group (default: per domain)"
    )
    steps: PositiveInt = Field(1, description="repetitions")
    compute_time: Time = Field(0.0, description="compute on every rank before each repetition")

    @model_validator(mode="before")
    @classmethod
    def _default_algorithm(cls, data: Any) -> Any:
        from podsim.workloads.collectives import DEFAULT_ALGORITHMS

        if isinstance(data, dict) and data.get("algorithm") is None:
            op = data.get("op", "all-reduce")
            if isinstance(op, str) and op in DEFAULT_ALGORITHMS:
                data = {**data, "algorithm": DEFAULT_ALGORITHMS[op]}
        return data

    @model_validator(mode="after")
    def _known(self) -> CollectiveWorkload:
        from podsim.workloads.collectives import COLLECTIVES

        for key, ops in (("root", ("broadcast", "reduce")), ("peers", ("send-recv",)),
                         ("shift", ("send-recv",))):  # fmt: skip
            if key in self.model_fields_set and self.op not in ops:
                raise ValueError(f"{key} applies to {' and '.join(ops)} only, not {self.op}")

        have = [n.split("/")[1] for n in COLLECTIVES.names() if n.startswith(f"{self.op}/")]
        if self.algorithm not in have:
            raise ValueError(
                f"algorithm {self.algorithm!r} does not run {self.op}; choose one of "
                f"{', '.join(map(repr, have))}"
            )
        return self


def _trace_path(v: Path, info: ValidationInfo) -> Path:
    """A trace path relative to the scenario file's folder (validation context ``base_dir``)."""
    base = (info.context or {}).get("base_dir")
    return (v if v.is_absolute() or base is None else Path(base) / v).resolve()


class ChakraWorkload(Strict):
    """An MLCommons Chakra execution trace (podsim.workloads.chakra), one ``.et`` file per rank
    named ``<prefix>.<rank>.et``: ``path`` is their directory or ``dir/<prefix>``, relative to
    the scenario file. Rank r runs on GPU r of the cluster (the trace may use fewer GPUs than the
    cluster has). Compute keeps its recorded durations x ``compute_scale``; collectives and
    sends are replayed on the fabric."""

    path: Path = Field(description="directory or prefix of the <prefix>.<rank>.et files")
    compute_scale: Annotated[float, Field(gt=0.0)] = Field(
        1.0, description="multiplies recorded compute time (0.5: a GPU twice as fast)"
    )
    comm_groups: dict[str, list[NonNegInt]] | None = Field(
        None, description="process group (pg_name) -> its ranks (default: every rank)"
    )
    serialize_compute: bool = Field(
        True, description="a rank runs one compute node at a time (as ASTRA-sim)"
    )

    @field_validator("path")
    @classmethod
    def _files(cls, v: Path, info: ValidationInfo) -> Path:
        from podsim.workloads.trace_import import rank_files

        p = _trace_path(v, info)
        rank_files(p, ".et")  # a missing rank or no file at all is an error naming the path
        return p


class KinetoWorkload(Strict):
    """PyTorch profiler (Kineto) JSON traces, one file per rank (podsim.workloads.kineto):
    ``path`` is their directory, or a list of the files; relative to the scenario file. Rank r
    (its ``distributedInfo.rank``) runs on GPU r. Kernels keep their recorded durations x
    ``compute_scale``; NCCL collectives are replayed on the fabric; ``gaps`` keeps the idle
    time recorded before each kernel on its stream."""

    path: Path | list[Path] = Field(description="directory of per-rank JSON files, or the files")
    compute_scale: Annotated[float, Field(gt=0.0)] = Field(
        1.0, description="multiplies recorded kernel time (0.5: a GPU twice as fast)"
    )
    gaps: bool = Field(True, description="keep the recorded idle time before each kernel")

    @field_validator("path")
    @classmethod
    def _files(cls, v: Path | list[Path], info: ValidationInfo) -> Path | list[Path]:
        if isinstance(v, list):
            if not v:
                raise ValueError("give the trace directory or at least one file")
            out = [_trace_path(f, info) for f in v]
            for f in out:
                if not f.is_file():
                    raise ValueError(f"Kineto trace file {str(f)!r} does not exist")
            return out
        p = _trace_path(v, info)
        if not p.is_dir():
            raise ValueError(
                f"Kineto trace directory {str(p)!r} does not exist (give a directory of "
                "per-rank JSON files, or a list of files)"
            )
        return p


class TrainingWorkload(Strict):
    """One training step of an MoE transformer (podsim.workloads.training.step): ``tp`` x ``pp``
    x data-parallel ranks over ``gpus`` (default: every GPU), expert parallelism ``ep`` inside
    the data-parallel ranks, ``microbatches`` of ``micro_batch_size`` sequences of ``seq_len``
    tokens through the pipeline ``schedule``; compute from the model's FLOPs at ``achieved`` x
    the ``gpu``'s peak (``precision``); ``ep_overlap`` overlaps one micro-batch's all-to-all
    with another's compute, ``dp_overlap`` the gradient reduction with the backward pass."""

    model: ModelPresetName = Field(
        "deepseek-v3", description="MoE model preset (podsim list models)"
    )
    gpus: PositiveInt | None = Field(None, description="GPUs in the job (default: all)")
    tp: PositiveInt = Field(1, description="tensor-parallel ranks")
    pp: PositiveInt = Field(1, description="pipeline stages")
    ep: PositiveInt = Field(1, description="expert-parallel ranks (divides the DP size)")
    microbatches: PositiveInt = Field(8, description="micro-batches per step")
    micro_batch_size: PositiveInt = Field(1, description="sequences per micro-batch")
    seq_len: PositiveInt = Field(4096, description="tokens per sequence")
    schedule: ScheduleName = Field("1f1b", description="pipeline schedule (podsim list schedules)")
    virtual_stages: PositiveInt | None = Field(
        None,
        description=(
            "model chunks per pipeline stage for interleaved-1f1b (Megatron's virtual pipeline; "
            "default 2; pp x virtual_stages must divide the layers); the other schedules run 1"
        ),
    )
    layers: PositiveInt | None = Field(
        None,
        description="layers to simulate (default: the model's; a multiple of pp unless "
        "first_stage_layers / last_stage_layers are set)",
    )
    gpu: GpuName = Field("h800", description="accelerator for the compute model (podsim list gpus)")
    precision: Literal["fp8", "bf16"] = Field("fp8", description="GEMM precision (peak used)")
    achieved: Annotated[float, Field(gt=0, le=1)] = Field(
        0.6, description="fraction of the peak kernels sustain [estimate]"
    )
    dispatch_dtype: Literal["fp8", "bf16"] = Field("fp8", description="dispatched token dtype")
    dispatch_mode: DispatchModeName = Field(
        "deepep-normal",
        description="how the EP all-to-all moves tokens (podsim list dispatch): deepep-normal "
        "sends a token once per rank holding its experts, scale-out traffic over the scale-up "
        "domain then one rail; megatron-alltoall one copy per (token, expert), direct",
    )
    grad_bytes: Literal[2, 4] = Field(4, description="bytes per gradient value in DP reduction")
    ep_overlap: bool = Field(False, description="two-micro-batch overlap of all-to-all")
    dp_overlap: bool = Field(False, description="gradient reduction overlapped with backward")
    first_stage_layers: PositiveInt | None = Field(
        None,
        description="layers of the first pipeline stage when it differs from the others "
        "(Megatron's --decoder-first-pipeline-num-layers; the middle stages split the rest "
        "evenly; one model chunk per stage), e.g. 61 layers over pp 16: 3 first, 2 last",
    )
    last_stage_layers: PositiveInt | None = Field(
        None,
        description="layers of the last pipeline stage when it differs from the others "
        "(Megatron's --decoder-last-pipeline-num-layers)",
    )
    dp_algorithm: Literal["ring", "hierarchical"] = Field(
        "ring",
        description=(
            "how the data-parallel reduce-scatter and all-gather run: ring (one flat ring over "
            "the DP group, DP - 1 steps) or hierarchical (reduce-scatter inside each scale-up "
            "domain, then a ring over one rank per domain on its rail, all-gather the reverse: "
            "the intra-server then inter-server split of Huawei HCCL, CANN HCCL user guide "
            "'Algorithm Overview', and of the hierarchical collectives of "
            "podsim.workloads.collectives; NCCL's own reduce-scatter/all-gather is the flat "
            "ring); the local size is the group's GPUs per scale-up domain (the cluster's GPUs "
            "per pod / tp)"
        ),
    )
    routing: Literal["uniform", "sampled"] = Field(
        "uniform",
        description=(
            "token counts of the EP all-to-all: uniform sends every EP pair the expected count "
            "under uniform routing [E]; sampled draws each EP group's routing of each MoE layer "
            "with the skew popularity model, seeded by the scenario seed, lays it out as "
            "DeepEP's get_dispatch_layout (per-rank dedup for deepep-normal, one copy per "
            "(token, expert) otherwise) and sends every pair its own count "
            "(podsim.workloads.training.routing). One draw per layer and EP group, shared by "
            "the micro-batches and both passes. CPU of the draws: about 0.04 s per EP group "
            "and layer at EP 16 x 4,096 tokens for a model without a group limit (Kimi K2: "
            "0.6 s for train-1t-moe's 16 layers, about 23 s for the 10,240-GPU step's 640 "
            "groups and layers); a group-limited model (DeepSeek-V3) routes through router "
            "logits, about 1 s per group and layer (about 11 min at 10,240 GPUs). The flow "
            "engine then takes longer too, its messages no longer ending together "
            "(train-1t-moe: 54-60 s of CPU against 17 s)"
        ),
    )
    skew: TrainingSkewConfig = Field(
        default_factory=TrainingSkewConfig,
        description=(
            "routing sampled: expert popularity (kind uniform, zipf or lognormal with max_mean "
            "or exponent; production per-rank max/mean 2.56, TensorRT-LLM on DeepSeek-R1 EP32, "
            "docs/physics.md), calibrated over each EP group's ranks"
        ),
    )

    @model_validator(mode="after")
    def _skew_needs_sampled(self) -> TrainingWorkload:
        if self.skew.kind != "uniform" and self.routing != "sampled":
            raise ValueError(
                f"skew kind {self.skew.kind!r} applies with routing 'sampled' (uniform routing "
                "sends the expected counts): set routing: sampled, or remove skew"
            )
        return self


#: a token count, or [low, high] drawn log-uniformly
TokenSpec = PositiveInt | Annotated[list[PositiveInt], Field(min_length=2, max_length=2)]


class ServingMix(Strict):
    """One class of requests of a ``workload.serving`` mix."""

    prompt_tokens: TokenSpec = Field(8192, description="prompt tokens: a count or [low, high]")
    output_tokens: TokenSpec = Field(512, description="generated tokens: a count or [low, high]")
    weight: Annotated[float, Field(gt=0.0)] = Field(1.0, description="relative frequency")

    @field_validator("prompt_tokens", "output_tokens")
    @classmethod
    def _ordered(cls, v: int | list[int]) -> int | list[int]:
        if isinstance(v, list) and v[0] > v[1]:
            raise ValueError(f"[low, high] needs low <= high; got {v}")
        return v


class ServingInstances(Strict):
    """``instances`` instances of ``nodes`` nodes each (every GPU of those nodes is a rank of
    the instance; TP/EP inside)."""

    instances: PositiveInt = Field(1, description="how many instances")
    nodes: PositiveInt = Field(1, description="nodes per instance")
    tp: PositiveInt = Field(
        1,
        description="attention tensor-parallel group size (consecutive GPUs; must divide the "
        "instance's GPUs): two all-reduces per layer on the fabric; the MoE experts are spread "
        "over all the instance's GPUs (EP)",
    )
    microbatches: PositiveInt = Field(
        1,
        description="split each compute block into this many micro-batches whose exchanges "
        "overlap the others' compute (DeepSeek-V3 prefills with 2; podsim.workloads.serving."
        "exchange)",
    )


class ServingGpu(Strict):
    """The GPU (``name``: peaks and HBM capacity from podsim.workloads.training.gpu; any
    figure may be overridden) and the achieved
    fractions (mfu/mbu estimates, podsim.workloads.serving.perf)."""

    name: GpuName = Field("h800", description="accelerator (podsim list gpus)")
    flops_fp8: Annotated[float, Field(gt=0)] | None = Field(
        None, description="dense FP8 FLOP/s (default: the GPU's)"
    )
    flops_bf16: Annotated[float, Field(gt=0)] | None = Field(
        None, description="dense BF16 FLOP/s (default: the GPU's)"
    )
    hbm_bandwidth: Annotated[float, Field(gt=0)] | None = Field(
        None, description="HBM bytes/s (default: the GPU's)"
    )
    memory: Size | None = Field(None, description="HBM bytes per GPU (default: the GPU's)")
    mfu: Annotated[float, Field(gt=0.0, le=1.0)] = Field(
        0.4, description="achieved fraction of the FLOP peak in prefill [E]"
    )
    mbu: Annotated[float, Field(gt=0.0, le=1.0)] = Field(
        0.7, description="achieved fraction of HBM bandwidth in decode [E]"
    )


class ServingWorkload(Strict):
    """PD-disaggregated inference serving (podsim.workloads.serving): requests arrive (Poisson
    at ``rate`` per second, ``requests`` of them with lengths from ``mix``; or the rows of
    ``csv``: arrival_s, prompt_tokens, output_tokens), are prefilled on a ``prefill`` instance,
    their KV cache moves over the fabric to a ``decode`` instance (``kv_transfer``: layerwise
    streaming in groups of ``stream_layers`` layers, or the whole cache after the prefill) and
    they decode there with continuous batching (at most ``max_batch`` resident). The ranks are
    the GPUs of the prefill instances' nodes, then the decode instances'."""

    model: ServingModelName = Field(
        "kimi-k3.1-pro-class", description="serving model (podsim list serving)"
    )
    prefill: ServingInstances = Field(
        default_factory=ServingInstances, description="prefill instances"
    )
    decode: ServingInstances = Field(
        default_factory=ServingInstances, description="decode instances"
    )
    requests: PositiveInt = Field(32, description="Poisson arrivals: how many requests")
    rate: Annotated[float, Field(gt=0.0)] | None = Field(
        None, description="Poisson arrivals: requests per second (or give csv)"
    )
    csv: Path | None = Field(
        None, description="requests file (arrival_s, prompt_tokens, output_tokens), or give rate"
    )
    mix: list[ServingMix] = Field(
        default_factory=lambda: [ServingMix()],
        description="Poisson arrivals: request classes (lengths and weights)",
    )
    max_context: PositiveInt | None = Field(
        None, description="longest prompt + output in tokens (default: the model's context)"
    )
    kv_transfer: Literal["layerwise", "whole"] = Field(
        "layerwise", description="stream per layer group during prefill, or whole after it"
    )
    stream_layers: PositiveInt = Field(1, description="layerwise: layers per streamed chunk")
    kv_dtype: Literal["fp8", "bf16"] = Field("bf16", description="KV-cache value type")
    weights: Literal["bf16", "fp8", "w4a8", "w4a16"] = Field(
        "fp8", description="weight format (podsim.workloads.precision.WEIGHT_FORMATS)"
    )
    max_batch: PositiveInt = Field(256, description="most requests resident per decode instance")
    decode_overhead: Time = Field(
        0.0,
        description="fixed time added to every decode step for what is not modelled (kernel "
        "launches, scheduling, sampling; the EP and TP exchanges are on the fabric) [E]",
    )
    exchange_steps: PositiveInt = Field(
        8,
        description="most decode steps (with the same batch) whose EP/TP exchanges are merged "
        "into one message per rank pair and phase (1: one per step; podsim.workloads.serving."
        "exchange)",
    )
    exchange_latency: Time = Field(
        5e-6,
        description="latency put back for every exchange a merged message absorbed (the "
        "per-message latency of a layer's exchange) [E]",
    )
    gpu: ServingGpu = Field(default_factory=ServingGpu, description="GPU figures")

    @field_validator("csv")
    @classmethod
    def _csv_exists(cls, v: Path | None, info: ValidationInfo) -> Path | None:
        return None if v is None else _existing_file(v, info, "requests file")

    @model_validator(mode="after")
    def _one_source(self) -> ServingWorkload:
        if (self.rate is None) == (self.csv is None):
            raise ValueError(
                "give exactly one source of requests: rate (Poisson arrivals, with requests "
                "and mix) or csv (a requests file)"
            )
        return self

    @property
    def num_nodes(self) -> int:
        return (
            self.prefill.instances * self.prefill.nodes + self.decode.instances * self.decode.nodes
        )


class StorageReads(Strict):
    """GPUDirect Storage traffic during the run (checkpoint load, KV-cache offload): every
    rank in ``ranks`` (default: all) reads ``reads_per_gpu`` bytes from an SSD nearest its GPU
    into GPU memory, starting at ``start`` (simulated time), as a stream on the node's PCIe tree
    that competes with the network traffic (Gen5 NVMe 14 GB/s read, docs/physics.md [S]). Needs a
    ``cluster.layout`` with SSDs (``layout_params.ssds``). The reads run in the background: a
    run ends when the workload's phases end, whether or not they finished."""

    reads_per_gpu: Size = Field(
        description="bytes each rank reads from its SSD (one of the nearest; GPUs that share them "
        "spread over them)"
    )
    start: Time = Field(0.0, description="when the reads start (simulated time)")
    ranks: list[NonNegInt] | None = Field(None, description="ranks that read (default: all)")

    @field_validator("reads_per_gpu")
    @classmethod
    def _reads_pos(cls, v: int) -> int:
        if v <= 0:
            raise ValueError("reads_per_gpu must be greater than zero bytes")
        return v


#: the workload kinds, one key each under ``workload``
WORKLOAD_KINDS = (
    "moe",
    "trace",
    "synthetic",
    "collective",
    "training",
    "chakra",
    "kineto",
    "serving",
)
#: kinds that compile to an operation graph with dependencies beyond the layer timeline
GRAPH_WORKLOADS = ("collective", "training", "chakra", "kineto", "serving")


class WorkloadConfig(Strict):
    """Exactly one of ``moe``, ``trace``, ``synthetic``, ``collective``, ``training``,
    ``chakra``, ``kineto`` or ``serving``; optionally background ``storage`` reads alongside it."""

    moe: MoeWorkload | None = Field(None, description="an MoE layer's all-to-all")
    trace: TraceWorkload | None = Field(None, description="a recorded trace file")
    synthetic: SyntheticWorkload | None = Field(None, description="a synthetic pattern")
    collective: CollectiveWorkload | None = Field(
        None, description="a collective as NCCL runs it (an operation graph)"
    )
    training: TrainingWorkload | None = Field(
        None, description="one training step, TP x PP x EP x DP (an operation graph)"
    )
    chakra: ChakraWorkload | None = Field(
        None, description="a Chakra execution trace, one .et file per rank (an operation graph)"
    )
    kineto: KinetoWorkload | None = Field(
        None, description="PyTorch profiler traces, one JSON file per rank (an operation graph)"
    )
    serving: ServingWorkload | None = Field(
        None, description="PD-disaggregated inference serving (an operation graph)"
    )
    storage: StorageReads | None = Field(
        None, description="GPUDirect Storage reads in the background"
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> WorkloadConfig:
        given = [k for k in WORKLOAD_KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of {', '.join(map(repr, WORKLOAD_KINDS))}"
                + (f" (got {', '.join(given)})" if given else " (got none)")
            )
        return self

    @property
    def kind(self) -> str:
        return next(k for k in WORKLOAD_KINDS if getattr(self, k) is not None)

    @property
    def builds_graph(self) -> bool:
        """The workload is an operation graph (only engines with ``graphs`` run it)."""
        return self.kind in GRAPH_WORKLOADS


# --------------------------------------------------------------------------- faults


class _FaultBase(Strict):
    at: Time = Field(0.0, description="when the fault starts (simulated time)")
    until: Time | None = Field(None, description="when it ends (default: never)")

    @model_validator(mode="after")
    def _window(self) -> _FaultBase:
        if self.until is not None and self.until <= self.at:
            raise ValueError(
                f"until ({fmt_time(self.until)}) must be after at ({fmt_time(self.at)})"
            )
        return self


LinkRef = Annotated[list[str], Field(min_length=2, max_length=2)]


class LinkDown(_FaultBase):
    """A link fails at ``at`` (and comes back at ``until``)."""

    kind: Literal["link_down"] = Field(description="fault type")
    link: LinkRef = Field(description="the link: its two node names")


class LinkDegrade(_FaultBase):
    """A link runs at a lower ``rate`` (e.g. a PAM4 lane lost: 400G -> 300G)."""

    kind: Literal["link_degrade"] = Field(description="fault type")
    link: LinkRef = Field(description="the link: its two node names")
    rate: PositiveRate = Field(description="the lower MAC rate")


class LinkBer(_FaultBase):
    """A pre-FEC bit error rate on a link; RS(544,514) turns it into frame loss, LLR (when on)
    into link-level retries. ``burst_len`` > 1 groups symbol errors into bursts of that many
    10-bit symbols (DFE error propagation; the pessimistic model of podsim.fabric.phy)."""

    kind: Literal["ber"] = Field(description="fault type")
    link: LinkRef = Field(description="the link: its two node names")
    pre_fec_ber: Annotated[float, Field(gt=0.0, lt=0.5)] = Field(
        description="bit error rate before RS(544,514) FEC"
    )
    llr: bool = Field(False, description="link-level retry turns frame loss into retries")
    burst_len: Annotated[int, Field(ge=1, le=544, strict=True)] = Field(
        1, description="10-bit symbol errors per burst (DFE error propagation)"
    )
    llr_max_replays: Annotated[int, Field(ge=1, le=1_000_000, strict=True)] = Field(
        16,
        description="replays of one frame before link-level retry gives up and the frame is "
        "lost (then the transport retransmits, up to its retry limit) [E]",
    )


class NodeDown(_FaultBase):
    """A switch or a NIC port fails."""

    kind: Literal["switch_down", "nic_down"] = Field(description="fault type")
    node: str = Field(description="the switch or NIC port (graph node name)")


class Straggler(Strict):
    """A slow GPU: its expert compute takes ``factor`` times longer."""

    kind: Literal["straggler"] = Field(description="fault type")
    rank: NonNegInt = Field(description="the slow rank")
    factor: Annotated[float, Field(ge=1.0)] = Field(
        2.0, description="how many times longer its expert compute takes"
    )


Fault = Annotated[
    LinkDown | LinkDegrade | LinkBer | NodeDown | Straggler,
    Field(discriminator="kind"),
]

#: every fault kind a scenario can name (``faults[].kind``; engines declare which they model).
#: The fabric-level fault models are registered in :data:`podsim.fabric.faults.FAULT_KINDS`.
SCENARIO_FAULT_KINDS: frozenset[str] = frozenset(
    kind
    for model in (LinkDown, LinkDegrade, LinkBer, NodeDown, Straggler)
    for kind in get_args(model.model_fields["kind"].annotation)
)


# --------------------------------------------------------------------------- run


class FastForwardConfig(Strict):
    """Opt-in steady-state fast-forward of the packet engine's NIC transport
    (:mod:`podsim.nic.fastforward`; in the spirit of Wormhole, NSDI'26): once the set of active
    QPs and their sending rates have held for ``stable_rtts`` round trips (rates within
    ``tolerance``, queues within one MTU frame), the engine skips ahead to just before the next
    change (a message release, a fault, a congestion-control timer, a message's last packets),
    accounting the skipped bytes and counters at the measured rates. A fidelity knob for speed:
    off by default; results then stay bit-identical."""

    enabled: bool = Field(False, description="fast-forward steady states (a fidelity knob)")
    stable_rtts: int = Field(
        8,
        ge=2,
        le=100_000,
        description="round trips (base RTT of the slowest active QP) the flow set and rates "
        "must hold before a jump [E]",
    )
    tolerance: float = Field(
        0.02,
        gt=0.0,
        le=0.5,
        description="largest relative change of a QP's sending rate between the two halves of "
        "the stable window that still counts as steady [E] (issue 18's 2 % fidelity target)",
    )


class SimConfig(Strict):
    """Engine knobs. ``endpoint`` picks the packet engine's sender: ``nic`` the SmartNIC
    transport (CC, multipath, reliability), ``host`` the fabric's line-rate host (no CC; fast,
    for fabric-only studies). ``cell`` above the MTU is a documented fidelity knob for speed
    (the packet engine moves cells of that size; docs/design.md "Making SimPy fast").
    ``sample_interval`` is the
    queue-depth sampling period; ``time_limit`` stops the simulation at that simulated time."""

    endpoint: Literal["nic", "host"] = Field(
        "nic", description="packet engine sender: the SmartNIC transport or a line-rate host"
    )
    cell: Size | None = Field(
        None,
        description="endpoint host: move cells of this size, at least the MTU (a fidelity knob "
        "for speed)",
    )
    sample_interval: Time = Field(
        parse_time("1us"),
        description="queue-depth and tx-byte sampling period (also the resolution of a phase "
        "boundary in links_by_phase)",
    )
    time_limit: Time | None = Field(None, description="stop the simulation at this simulated time")
    checks: bool = Field(
        True, description="run the invariant checks (conservation, no loss when lossless)"
    )
    fast_forward: FastForwardConfig = Field(
        default_factory=FastForwardConfig,
        description="packet engine, endpoint nic: skip steady states (off by default)",
    )
    scaleup_resolution: Time = Field(
        parse_time("1ns"),
        description="packet engine: scale-up transfers that finish within this time of each "
        "other end in one re-solve of the scale-up fluid, each still delivered at its own "
        "finish time (0 = every finish on its own, exact; a numerical resolution for speed: "
        "podsim.fabric.scaleup)",
    )

    @model_validator(mode="after")
    def _cell_needs_host(self) -> SimConfig:
        if self.cell is not None and self.endpoint != "host":
            raise ValueError(
                "cell (bursts above the MTU) is a knob of the line-rate host endpoint; "
                "set endpoint: host to use it"
            )
        if self.fast_forward.enabled and self.endpoint != "nic":
            raise ValueError(
                "fast_forward.enabled skips steady states of the NIC transport; it needs "
                "endpoint: nic"
            )
        return self

    @field_validator("sample_interval")
    @classmethod
    def _pos(cls, v: float) -> float:
        return _positive(v)

    @field_validator("scaleup_resolution")
    @classmethod
    def _resolution(cls, v: float) -> float:
        if not 0.0 <= v <= 1e-6:
            raise ValueError(
                f"{v!r} s: expected 0 (exact) to 1 us (a transfer's rate share moves that early)"
            )
        return v


class OutputsConfig(Strict):
    """What a run writes under its output folder (``dir``; ``{name}`` expands to the scenario
    name; ``podsim run --out`` overrides)."""

    dir: str = Field(
        "results/{name}",
        description="output folder; {name} and {variant} expand. A new or empty folder, or an "
        "earlier result folder, whose previous results a run replaces (files of your own stay); "
        "another non-empty folder is refused",
    )
    formats: list[Literal["parquet", "csv"]] = Field(
        default_factory=lambda: ["parquet"],
        description="table file formats: Parquet (default), add csv for CSV copies",
    )
    plots: bool = Field(True, description="draw the figures")
    plot_formats: list[Literal["png", "svg"]] = Field(
        default_factory=lambda: ["png", "svg"], description="figure file formats"
    )
    report: bool = Field(False, description="also write report.html (podsim report)")
    timeline: bool = Field(
        True,
        description="write timeline.json: per-rank phases, messages and queue depths as "
        "Chrome/Perfetto trace events (open in ui.perfetto.dev or chrome://tracing)",
    )
    hottest_ports: PositiveInt = Field(8, description="ports in the queue-depth figure")
    queue_series: bool = Field(
        True,
        description="record queue-depth and transmitted-byte time series (the queues table and "
        "link utilisation per phase, links_by_phase; packet engine)",
    )

    @field_validator("dir")
    @classmethod
    def _dir_placeholders(cls, v: str) -> str:
        # checked here so that a typo is bad input (exit 2), not a KeyError when the run
        # formats the folder name after simulating
        import string

        try:
            parts = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(v)]
        except ValueError:
            parts = None
        fields = None if parts is None else [f for f, _, _ in parts if f is not None]
        if parts and any(spec or conv for f, spec, conv in parts if f is not None):
            # {name:>5000} would make a 5000-character folder name
            raise ValueError(
                "a placeholder takes no format spec or conversion: write {name} or {variant}"
            )
        bad = None if fields is None else [f for f in fields if f not in ("name", "variant")]
        if fields is None or bad:
            what = (
                "unbalanced braces"
                if bad is None
                else "unknown placeholder(s) " + ", ".join("{" + f + "}" for f in bad)
            )
            raise ValueError(
                f"{what}; outputs.dir expands only {{name}} and {{variant}} (write {{{{ and }}}} "
                "for literal braces)"
            )
        return v


class Scenario(Strict):
    """A whole run. See scenarios/library/*.yaml for documented examples."""

    name: str = Field("scenario", description="name of the run (no path separators)")
    description: str = Field("", description="what the scenario shows (podsim list)")
    variant: str | None = Field(None, description="a named variant of the file (variants:)")
    # the engines fold the seed into 64-bit hashes (seed x 1e6 + salt): keep it in 32 bits
    seed: NonNegInt = Field(
        0, le=2**32 - 1, description="random seed (0 .. 2**32-1); same seed, same results"
    )
    engine: EngineName = Field("packet", description="simulation engine (podsim list engines)")
    sim: SimConfig = Field(default_factory=SimConfig, description="engine knobs")
    cluster: ClusterConfig = Field(
        description="the cluster: topology, node layout, NICs, switches, routing"
    )
    workload: WorkloadConfig = Field(description="the traffic: MoE, trace or synthetic")
    outputs: OutputsConfig = Field(default_factory=OutputsConfig, description="what the run writes")
    faults: list[Fault] = Field(default_factory=list, description="injected faults")
    cost: CostSpec | None = Field(
        None, description="cost-model options (podsim cost); default: the built-in catalog"
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_run_name(v)

    def resolved(self) -> dict[str, Any]:
        """The scenario with every default filled in, quantities printed human (exact)."""
        return self.model_dump(mode="json")

    def plugins(self) -> list[str]:
        """Every ``module:Class`` plug-in the scenario names (needs ``--allow-plugins``)."""
        names = [self.cluster.nic.cc.name, self.cluster.nic.multipath.selector]
        return [n for n in names if is_plugin(n)]
