"""The plugins of upstream's pkg/scheduler/framework/plugins/noderesources folder: NodeResourcesFit (``fit``: its
Filter and, through the scoring strategies of ``resource_allocation``, its Score) and
NodeResourcesBalancedAllocation (``balanced_allocation``). Fit's names are re-exported here, where the Filter's
callers have always found them."""

from webhook.preemption.plugins.noderesources.fit import (
    ERR_TOO_MANY_PODS,
    NAME,
    OVER_ALLOCATABLE_BIT,
    RESOURCE_REASONS,
    SHORT_BIT,
    Fit,
    Want,
    fit_on_summary,
    fits,
    fits_after_freeing,
    insufficient,
    mask_status,
    nodes_with_room,
    resource_fit_status,
    resource_partition,
    wanted_resources,
)

__all__ = [
    "ERR_TOO_MANY_PODS",
    "NAME",
    "OVER_ALLOCATABLE_BIT",
    "RESOURCE_REASONS",
    "SHORT_BIT",
    "Fit",
    "Want",
    "fit_on_summary",
    "fits",
    "fits_after_freeing",
    "insufficient",
    "mask_status",
    "nodes_with_room",
    "resource_fit_status",
    "resource_partition",
    "wanted_resources",
]
