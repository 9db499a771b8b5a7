"""DefaultPreemption (pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go): the PostFilter
plugin, and the upstream policy the ``Evaluator`` runs (``preemption.Interface``, docs/preemption.md §3, §5, §7,
§9): eligibility here, the victims on one node in ``victims``, the bounded dry run for resource-only pods in
``bounded_dry_run``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from webhook.cluster.model import PREEMPT_NEVER
from webhook.preemption.framework.context import PredictionContext
from webhook.preemption.framework.preemption import (
    Candidate,
    CandidateScore,
    DryRun,
    Evaluator,
    PostFilterResult,
    VictimSelection,
    default_candidate_score,
)
from webhook.preemption.framework.status import UNSCHEDULABLE_AND_UNRESOLVABLE, Status
from webhook.preemption.plugins.defaultpreemption.bounded_dry_run import bounded_dry_run
from webhook.preemption.plugins.defaultpreemption.victims import select_victims_by_resources, select_victims_on_node
from webhook.preemption.results import PreemptionArgs

NAME = "DefaultPreemption"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."


class DefaultPreemption:
    """The PostFilter plugin: the ``Evaluator`` running this policy with ``args`` (``DefaultPreemptionArgs``)."""

    name = NAME

    def __init__(self, args: PreemptionArgs) -> None:
        self.args = args
        self.evaluator = Evaluator(self)

    def post_filter(self, ctx: PredictionContext, statuses: Mapping[str, Status], *,
                    potential: Collection[str] | None = None) -> PostFilterResult:
        return self.evaluator.preempt(ctx, statuses, potential=potential)

    def pod_eligible_to_preempt_others(self, ctx: PredictionContext, nominated_node_status: Status) -> tuple[bool, str]:
        """``PodEligibleToPreemptOthers`` (docs/preemption.md §3)."""
        pod = ctx.pod
        if pod.preemption_policy == PREEMPT_NEVER:
            return False, NOT_ELIGIBLE_NEVER
        nominated = pod.nominated_node_name
        if nominated:
            if nominated_node_status.code == UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            if nominated in ctx.view.state.nodes:
                for other in ctx.view.pods_on(nominated):
                    if other.effective_priority < ctx.priority and other.deleting and other.preempted_by_scheduler:
                        return False, NOT_ELIGIBLE_TERMINATING
        return True, ""

    def select_victims_on_node(self, ctx: PredictionContext, name: str) -> VictimSelection:
        nominated = ctx.nominated_pods(name)
        if ctx.resource_only and not ctx.takes_general_path(name):
            selection = select_victims_by_resources(ctx.pod, ctx.view.summary(name), nominated, ctx.pdbs)
            # A volume pod: once room is made, a node-only volume Filter may still rule the node out.
            blocked = None if ctx.volumes is None or selection.candidate is None else ctx.volumes.status_of(name)
            return selection if blocked is None else VictimSelection(None, blocked)
        return select_victims_on_node(ctx.framework, ctx.cycle, ctx.pod, ctx.view.node_info(name), nominated,
                                      ctx.pdbs)

    def num_candidates(self, potential_nodes: int) -> int:
        return self.args.num_candidates(potential_nodes)

    def candidate_score(self, candidate: Candidate) -> CandidateScore:
        return default_candidate_score(candidate)  # OrderedScoreFuncs returns nil: the default criteria

    def bounded_dry_run(self, ctx: PredictionContext, potential: Collection[str]) -> DryRun | None:
        return bounded_dry_run(ctx, potential) if ctx.resource_only else None
