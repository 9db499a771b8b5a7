"""The plugins of the default scheduler profile that the predictor models, in the profile's order
(pkg/scheduler/apis/config/v1/default_plugins.go; pkg/scheduler/framework/plugins/registry.go), and its PostFilter,
DefaultPreemption, with the profile's ``DefaultPreemptionArgs``.

Adding a plugin is writing its module and listing it here. The profile's volume plugins (VolumeRestrictions,
NodeVolumeLimits, VolumeBinding, VolumeZone) sit between NodeResourcesFit and PodTopologySpread upstream and are not
modelled yet; VolumeBinding already has its Score weight in ``ScoringArgs.weights`` (a plugin named VolumeBinding with
``pre_score``/``score`` listed here is scored with it).
"""

from __future__ import annotations

import functools

from webhook.preemption.framework.runtime import Framework
from webhook.preemption.plugins.defaultpreemption.default_preemption import DefaultPreemption
from webhook.preemption.plugins.imagelocality import ImageLocality
from webhook.preemption.plugins.interpodaffinity import InterPodAffinity
from webhook.preemption.plugins.nodeaffinity import NodeAffinity
from webhook.preemption.plugins.nodename import NodeName
from webhook.preemption.plugins.nodeports import NodePorts
from webhook.preemption.plugins.noderesources import Fit
from webhook.preemption.plugins.noderesources.balanced_allocation import BalancedAllocation
from webhook.preemption.plugins.nodeunschedulable import NodeUnschedulable
from webhook.preemption.plugins.podtopologyspread import PodTopologySpread
from webhook.preemption.plugins.tainttoleration import TaintToleration
from webhook.preemption.results import PreemptionArgs, ScoringArgs

DEFAULT_SCORING = ScoringArgs()


@functools.lru_cache(maxsize=16)
def default_framework(scoring: ScoringArgs = DEFAULT_SCORING) -> Framework:
    """The default profile's plugins, with the Score plugins, weights and arguments of ``scoring`` (one instance per
    configuration: the plugins keep no state of their own)."""
    return Framework([NodeName(), NodeUnschedulable(), TaintToleration(), NodeAffinity(), NodePorts(),
                      Fit(scoring.fit_strategy),
                      PodTopologySpread(scoring.spread_defaulting, scoring.spread_default_constraints),
                      InterPodAffinity(scoring.hard_pod_affinity_weight,
                                       scoring.ignore_preferred_terms_of_existing_pods),
                      BalancedAllocation(scoring.balanced_resources), ImageLocality()],
                     dict(scoring.weights))


@functools.lru_cache(maxsize=16)
def default_preemption(args: PreemptionArgs) -> DefaultPreemption:
    """The PostFilter plugin for ``args`` (a few distinct ones per process: one per configuration)."""
    return DefaultPreemption(args)
