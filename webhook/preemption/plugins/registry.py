"""The plugins of the default scheduler profile that the predictor models, in the profile's order
(pkg/scheduler/apis/config/v1/default_plugins.go; pkg/scheduler/framework/plugins/registry.go), and its PostFilter,
DefaultPreemption, with the profile's ``DefaultPreemptionArgs``.

Adding a plugin is writing its module and listing it here.
"""

from __future__ import annotations

import functools

from webhook.preemption.framework.runtime import Framework
from webhook.preemption.plugins.defaultpreemption.default_preemption import DefaultPreemption
from webhook.preemption.plugins.dynamicresources.plugin import DynamicResources
from webhook.preemption.plugins.interpodaffinity import InterPodAffinity
from webhook.preemption.plugins.nodeaffinity import NodeAffinity
from webhook.preemption.plugins.nodename import NodeName
from webhook.preemption.plugins.nodeports import NodePorts
from webhook.preemption.plugins.noderesources import Fit
from webhook.preemption.plugins.nodeunschedulable import NodeUnschedulable
from webhook.preemption.plugins.nodevolumelimits import NodeVolumeLimits
from webhook.preemption.plugins.podtopologyspread import PodTopologySpread
from webhook.preemption.plugins.tainttoleration import TaintToleration
from webhook.preemption.plugins.volumebinding import VolumeBinding
from webhook.preemption.plugins.volumerestrictions import VolumeRestrictions
from webhook.preemption.plugins.volumezone import VolumeZone
from webhook.preemption.results import PreemptionArgs


@functools.cache
def default_framework() -> Framework:
    """The default profile's PreFilter and Filter plugins (one instance: the plugins keep no state of their own).
    DynamicResources is last: the DynamicResourceAllocation gate (GA, on) places it just before DefaultPreemption
    (default_plugins.go, ``applyDynamicResources``)."""
    return Framework([NodeName(), NodeUnschedulable(), TaintToleration(), NodeAffinity(), NodePorts(), Fit(),
                      VolumeRestrictions(), NodeVolumeLimits(), VolumeBinding(), VolumeZone(),
                      PodTopologySpread(), InterPodAffinity(), DynamicResources()])


@functools.lru_cache(maxsize=16)
def default_preemption(args: PreemptionArgs) -> DefaultPreemption:
    """The PostFilter plugin for ``args`` (a few distinct ones per process: one per configuration)."""
    return DefaultPreemption(args)
