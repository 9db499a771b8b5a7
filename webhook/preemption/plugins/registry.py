"""The plugins of the default scheduler profile that the predictor models, in the profile's order
(pkg/scheduler/apis/config/v1/default_plugins.go; pkg/scheduler/framework/plugins/registry.go), and its PostFilter,
DefaultPreemption, with the profile's ``DefaultPreemptionArgs``.

Adding a plugin is writing its module and listing it here. VolumeBinding has its Score weight in
``ScoringArgs.weights`` but no Score of its own (upstream scores only with the StorageCapacityScoring gate): a
``pre_score``/``score`` written on it is scored with that weight.
"""

from __future__ import annotations

import functools

from webhook.preemption.framework.runtime import Framework
from webhook.preemption.plugins.defaultpreemption.default_preemption import DefaultPreemption
from webhook.preemption.plugins.dynamicresources.plugin import DynamicResources
from webhook.preemption.plugins.imagelocality import ImageLocality
from webhook.preemption.plugins.interpodaffinity import InterPodAffinity
from webhook.preemption.plugins.nodeaffinity import NodeAffinity
from webhook.preemption.plugins.nodename import NodeName
from webhook.preemption.plugins.nodeports import NodePorts
from webhook.preemption.plugins.noderesources import Fit
from webhook.preemption.plugins.noderesources.balanced_allocation import BalancedAllocation
from webhook.preemption.plugins.nodeunschedulable import NodeUnschedulable
from webhook.preemption.plugins.nodevolumelimits import NodeVolumeLimits
from webhook.preemption.plugins.podtopologyspread import PodTopologySpread
from webhook.preemption.plugins.tainttoleration import TaintToleration
from webhook.preemption.plugins.volumebinding import VolumeBinding
from webhook.preemption.plugins.volumerestrictions import VolumeRestrictions
from webhook.preemption.plugins.volumezone import VolumeZone
from webhook.preemption.results import PreemptionArgs, ScoringArgs

DEFAULT_SCORING = ScoringArgs()


@functools.lru_cache(maxsize=16)
def default_framework(scoring: ScoringArgs = DEFAULT_SCORING) -> Framework:
    """The default profile's plugins, with the Score plugins, weights and arguments of ``scoring`` (one instance per
    configuration: the plugins keep no state of their own). DynamicResources is the last Filter plugin: the
    DynamicResourceAllocation gate (GA, on) places it just before DefaultPreemption (default_plugins.go,
    ``applyDynamicResources``); BalancedAllocation and ImageLocality only score."""
    return Framework([NodeName(), NodeUnschedulable(), TaintToleration(), NodeAffinity(), NodePorts(),
                      Fit(scoring.fit_strategy),
                      VolumeRestrictions(), NodeVolumeLimits(), VolumeBinding(), VolumeZone(),
                      PodTopologySpread(scoring.spread_defaulting, scoring.spread_default_constraints),
                      InterPodAffinity(scoring.hard_pod_affinity_weight,
                                       scoring.ignore_preferred_terms_of_existing_pods),
                      DynamicResources(), BalancedAllocation(scoring.balanced_resources), ImageLocality()],
                     dict(scoring.weights))


@functools.lru_cache(maxsize=16)
def default_preemption(args: PreemptionArgs) -> DefaultPreemption:
    """The PostFilter plugin for ``args`` (a few distinct ones per process: one per configuration)."""
    return DefaultPreemption(args)
