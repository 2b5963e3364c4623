"""cluster.traffic_classes: bad input is exit 2 naming the key; engines that do not model
classes refuse them; a packet-engine run posts each message in its class and reports per
class; without classes the packet engine runs the plain fabric."""

from __future__ import annotations

import podsim
import pytest
from podsim.scenarios.cli.app import app
from podsim.scenarios.errors import ScenarioError
from typer.testing import CliRunner

TWO = "cluster.traffic_classes={classes: [{name: ll, priority: 1}, {name: bulk}]"
SMALL = ["workload.moe.tokens_per_rank=16", "outputs.plots=false"]


def _validate(value: str):
    return CliRunner().invoke(app, ["validate", "quickstart", "--set", value])


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (TWO + ", assign: {ll: [moe-normal], bulk: [moe-normal]}}", "assigned twice"),
        (TWO + ", assign: {lll: [moe-normal]}}", "Did you mean 'll'"),
        (TWO + ", assign: {ll: [moe-nrmal]}}", "Did you mean 'moe-normal'"),
        (TWO + ", assign: {ll: [storage]}}", "never enter the fabric"),
        (TWO + ", default: bluk}", "Did you mean 'bulk'"),
        ("cluster.traffic_classes={classes: [{name: a, weight: 0}]}", "greater than 0"),
        ("cluster.traffic_classes={classes: [{name: a, weight: -2}]}", "greater than 0"),
        ("cluster.traffic_classes={classes: [{name: a, priority: 8}]}", "less than or equal to 7"),
        ("cluster.traffic_classes={classes: [{name: a}, {name: a}]}", "given twice"),
        (
            "cluster.traffic_classes={classes: ["
            + ", ".join(f"{{name: c{i}}}" for i in range(9))
            + "]}",
            "give 1 to 8",
        ),
    ],
)
def test_bad_traffic_classes_are_exit_2_naming_the_key(value: str, says: str) -> None:
    r = _validate(value)
    assert r.exit_code == 2, r.output
    assert "cluster.traffic_classes" in r.output and says in r.output
    assert "Traceback" not in r.output


def test_engines_without_classes_refuse_them() -> None:
    for engine in ("flow", "bound"):
        with pytest.raises(ScenarioError) as e:
            podsim.run("quickstart", overrides=[TWO + "}", f"engine={engine}", *SMALL])
        assert e.value.path == "cluster.traffic_classes"
        assert "does not model traffic classes" in str(e.value) and "engine: packet" in str(e.value)


def test_host_endpoint_refuses_classes() -> None:
    with pytest.raises(ScenarioError, match="SmartNIC endpoint"):
        podsim.run("quickstart", overrides=[TWO + "}", "sim.endpoint=host", *SMALL])


def test_one_class_is_accepted_everywhere() -> None:
    r = podsim.run(
        "quickstart",
        overrides=["cluster.traffic_classes={classes: [{name: only}]}", "engine=flow", *SMALL],
    )
    assert r.summary["status"] == "complete"


def test_packet_run_reports_per_class() -> None:
    r = podsim.run("quickstart", overrides=[TWO + ", assign: {ll: [moe-normal]}}", *SMALL])
    s = r.summary
    assert s["status"] == "complete"
    per = s["engine_info"]["traffic_classes"]
    assert list(per) == ["ll", "bulk"]
    ll, bulk = per["ll"], per["bulk"]
    assert ll["messages"] == s["messages"]["count"] and bulk["messages"] == 0
    assert ll["bytes"] == s["messages"]["bytes"]
    assert ll["rdma_messages"] > 0 and ll["tx_bytes"] > 0 and bulk["tx_bytes"] == 0
    assert ll["fct_p50_s"] <= ll["fct_p99_s"] <= ll["fct_max_s"]
    assert ll["priority"] == 1 and bulk["priority"] == 0
    # every queue pair is counted in its class: the classes' retransmissions are the run's
    assert bulk["retx_packets"] == bulk["timeouts"] == bulk["duplicate_packets"] == 0
    assert ll["retx_packets"] == s["counters"]["retransmitted_packets"]
    assert ll["timeouts"] == s["counters"]["timeouts"]
    titles = [str(t.title) for t in r.summary_tables()]
    assert "traffic classes" in titles


def test_unassigned_kinds_go_to_the_lowest_priority_class() -> None:
    from podsim.scenarios.input.loader import load_scenario

    sc, _ = load_scenario("quickstart", [TWO + ", assign: {ll: [kv-transfer]}}"])
    of = sc.cluster.traffic_classes.class_of_kind()
    assert of["kv-transfer"] == 0 and of["moe-normal"] == 1 == of["collective"]
    sc, _ = load_scenario("quickstart", [TWO + ", default: ll}"])
    assert set(sc.cluster.traffic_classes.class_of_kind().values()) == {0}


def test_no_classes_table_without_classes() -> None:
    r = podsim.run("quickstart", overrides=SMALL)
    assert "traffic_classes" not in r.summary["engine_info"]
    assert "traffic classes" not in [str(t.title) for t in r.summary_tables()]


def test_pfc_headroom_counts_every_lossless_class() -> None:
    """Each lossless class of an ingress may hold xoff: an xoff that fits the buffer with one
    class is refused with two lossless classes, and the suggestion halves (about)."""
    import re

    sets = ["cluster.switch.pfc.enabled=true", "cluster.switch.buffer=4MiB"]

    def validate(*extra: str):
        args = ["validate", "incast-cc"]
        for s in [*sets, *extra]:
            args += ["--set", s]
        return CliRunner().invoke(app, args)

    r = validate()
    m = re.search(r"pfc\.xoff to at most (\d+)KiB", " ".join(r.output.split()))
    assert r.exit_code == 2 and m, r.output
    one = int(m.group(1))
    fits = [f"cluster.switch.pfc.xoff={one}KiB", f"cluster.switch.pfc.xon={one // 2}KiB"]
    assert validate(*fits).exit_code == 0
    r = validate(*fits, TWO + "}")
    flat = " ".join(r.output.split())
    assert r.exit_code == 2 and "2 lossless traffic classes" in flat, r.output
    two = int(re.search(r"pfc\.xoff to at most (\d+)KiB", flat).group(1))
    assert one // 2 - 1 <= two <= one // 2
    # a class without PFC is lossy and needs no room
    lossy = "cluster.traffic_classes={classes: [{name: ll, priority: 1}, {name: bulk, pfc: false}]}"
    assert validate(*fits, lossy).exit_code == 0


def test_spurious_retransmissions_are_counted_per_class_as_duplicates() -> None:
    """An RTO far below the queueing delay makes senders resend packets that were queued, not
    lost: with no drop anywhere, every resent packet reaches its receiver twice, and the
    class's counters add up to the run's."""
    r = podsim.run(
        "quickstart",
        overrides=[
            TWO + ", assign: {ll: [moe-normal]}}",
            "workload.moe.tokens_per_rank=128",
            "outputs.plots=false",
            "cluster.nic.rto=1us",
            "cluster.nic.rto_max=2us",
        ],
    )
    s = r.summary
    ll = s["engine_info"]["traffic_classes"]["ll"]
    assert s["counters"]["drops"] == 0
    assert ll["retx_packets"] == s["counters"]["retransmitted_packets"] > 0
    assert ll["timeouts"] == s["counters"]["timeouts"] > 0
    assert ll["duplicate_packets"] == ll["retx_packets"]
