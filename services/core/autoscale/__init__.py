"""The autoscaler's pure part: its configuration, the demand of pending work, and the planner of launches."""

from services.core.autoscale.config import (
    NodeType,
    ProviderConfig,
    ScalingConfig,
    parse_config,
)
from services.core.autoscale.nodes import launched_node
from services.core.autoscale.plan_types import DemandGroup, Fleet, Launch, ScalePlan, TypeStatus
from services.core.autoscale.planner import plan, round_budget

__all__ = [
    "DemandGroup",
    "Fleet",
    "Launch",
    "NodeType",
    "ProviderConfig",
    "ScalePlan",
    "ScalingConfig",
    "TypeStatus",
    "launched_node",
    "parse_config",
    "plan",
    "round_budget",
]
