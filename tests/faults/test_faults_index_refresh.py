"""A live server catches the predictor's index up with the watch between admissions (webhook/prediction/service.py
``keep_index_fresh``): the next admission does not pay for every event since the last one."""

from __future__ import annotations

from fake_apiserver import FakeApiServer, pod
from faults_support import eventually

from webhook.preemption.framework.index import state_index
from webhook.server.testing import LoopbackWebhook


async def test_the_predictors_index_follows_the_watch_without_an_admission(
        fake_api: FakeApiServer, hook: LoopbackWebhook) -> None:
    state = hook.source.state
    index = state_index(state)
    assert await eventually(lambda: index.version >= 0)  # built by the warm-up once the informers synced
    fake_api.create(pod("late-0", "team-b", node_name="node-2", priority_class_name="low", priority=10, cpu="3"))
    assert await eventually(lambda: "team-b/late-0" in state.pods)
    assert await eventually(lambda: index.version == state.settled_version, timeout=5)
    assert "late-0" in {p.name for p in index.summaries["node-2"].pods}


async def test_each_watch_event_s_node_is_refreshed_in_the_turn_that_applied_it(
        fake_api: FakeApiServer, hook: LoopbackWebhook) -> None:
    """Not left to the refresh task's next wake-up: an admission in the next turn of the loop finds it current."""
    state = hook.source.state
    index = state_index(state)
    assert await eventually(lambda: index.version >= 0)
    current_after_event: list[bool] = []
    hook.source.after_watch_event.append(lambda: current_after_event.append(index.version == state.settled_version))
    for i in range(5):
        fake_api.create(pod(f"turn-{i}", "team-b", node_name="node-2", priority_class_name="low", priority=10))
    assert await eventually(lambda: len(current_after_event) >= 5)
    assert all(current_after_event)
    assert {f"turn-{i}" for i in range(5)} <= {p.name for p in index.summaries["node-2"].pods}
