"""Savings of one variant over another, at several scopes of "system cost".

A vendor claim such as "an on-card PCIe switch cuts system cost by about 30 %" (the brief's
SmartNIC, docs/physics.md) depends on what "system" means. :data:`SCOPES` names the usual readings,
each a set of BOM categories; :func:`scope_savings` gives the saving at every scope so a
reader sees where a figure like 30 % can hold and where it cannot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd
from podsim.scenarios.cost.bom import CATEGORIES

__all__ = ["SCOPES", "scope_savings"]

#: scope -> BOM categories it adds up.
SCOPES: dict[str, tuple[str, ...]] = {
    "cluster (all capex)": CATEGORIES,
    "cluster without GPUs": tuple(c for c in CATEGORIES if c != "gpu"),
    "servers without GPUs (chassis, NICs, PCIe, SSDs)": ("server", "nic", "pcie", "ssd"),
    "node I/O (NICs + PCIe switching)": ("nic", "pcie"),
}


def scope_savings(
    baseline: Mapping[str, float],
    variant: Mapping[str, float],
    scopes: Mapping[str, tuple[str, ...]] = SCOPES,
) -> pd.DataFrame:
    """Per scope: baseline and variant capex (sums of ``capex_by_category`` entries), the
    saving in USD and as a fraction of the baseline (positive = the variant is cheaper)."""
    rows = []
    for scope, cats in scopes.items():
        a = math.fsum(float(baseline.get(c, 0.0)) for c in cats)
        b = math.fsum(float(variant.get(c, 0.0)) for c in cats)
        rows.append(
            {
                "scope": scope,
                "baseline_usd": a,
                "variant_usd": b,
                "saving_usd": a - b,
                "saving_fraction": (a - b) / a if a > 0 else float("nan"),
            }
        )
    return pd.DataFrame(rows)
