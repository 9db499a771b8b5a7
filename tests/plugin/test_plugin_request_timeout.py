"""``--request-timeout``, as kubectl has it: parsed like client-go's ``clientcmd.ParseTimeout``, sent to the API
server as ``?timeout=``, and bounding every request of the plugin (API server and ``--webhook-url``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from conftest import EXAMPLES, Kubectl
from kubectl_plugin.sources.http import SECOND, RequestTimeout, go_duration

POD = str(EXAMPLES / "pods/08-small-fits.yaml")


@pytest.mark.parametrize("text, seconds", [
    ("0", None), ("30", 30), ("+5", 5), ("1m", 60), ("1h2m", 3720), ("1.5s", 1.5), ("500ms", 0.5), (".5s", 0.5),
    ("2h45m30.25s", 9930.25), ("", 60),
])
def test_valid_timeouts(text: str, seconds: float | None) -> None:
    assert RequestTimeout.parse(text).seconds == seconds


# What kubectl 1.32 refuses ("1.5": whole seconds only without a unit), and negative durations, which it would
# send on to the API server as ?timeout=-5s.
@pytest.mark.parametrize("text", ["abc", "-5", "1.5", "5x", "1 s", "-5s", ".s", "s", "1m5", "-", "5mx"])
def test_invalid_timeouts(text: str) -> None:
    with pytest.raises(ValueError, match=r"^invalid timeout value\. Timeout must be a single integer in seconds"):
        RequestTimeout.parse(text)


@pytest.mark.parametrize("seconds, text", [(30, "30s"), (60, "1m0s"), (3720, "1h2m0s"), (1.5, "1.5s"),
                                           (0.5, "500ms"), (90, "1m30s"), (0, "0s")])
def test_durations_are_written_as_go_writes_them(seconds: float, text: str) -> None:
    assert go_duration(int(seconds * SECOND)) == text


def test_a_bad_value_is_one_line_and_exit_status_2(kubectl: Kubectl) -> None:
    run = kubectl.run("preempt-preview", "--snapshot", "examples/cluster.yaml", "-f", POD, "--request-timeout", "5x")
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == ("error: --request-timeout 5x: invalid timeout value. Timeout must be a single integer in "
                          "seconds, or an integer followed by a corresponding time unit (e.g. 1s | 2m | 3h)\n")


class SlowServer:
    """Answers every request after ``delay`` seconds, recording what it was asked."""

    def __init__(self, delay: float, body: dict[str, Any], status: int = 200) -> None:
        self.delay, self.body, self.status = delay, body, status
        self.seen: list[tuple[str, dict[str, str]]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.path, dict(request.query)))
        await asyncio.sleep(self.delay)
        return web.json_response(self.body, status=self.status)


async def serve(aiohttp_server: Any, slow: SlowServer) -> str:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", slow.handle)
    server = await aiohttp_server(app)
    return f"http://127.0.0.1:{server.port}"


async def test_a_slow_api_server_is_given_up_after_the_timeout(kubectl: Kubectl, aiohttp_server: Any,
                                                               tmp_path: Path) -> None:
    slow = SlowServer(3, {"kind": "Pod"}, status=201)
    url = await serve(aiohttp_server, slow)
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "slow",
              "clusters": [{"name": "slow", "cluster": {"server": url}}],
              "users": [{"name": "u", "user": {"token": "t"}}],
              "contexts": [{"name": "slow", "context": {"cluster": "slow", "user": "u"}}]}
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config), encoding="utf-8")
    run = await kubectl.arun("preempt-preview", "-f", POD, "--request-timeout", "1s",
                             env={"KUBECONFIG": str(tmp_path / "kubeconfig")})
    assert (run.returncode, run.stdout) == (3, "")
    assert run.stderr == f"error: cannot reach the API server {url}: no answer within 1s (--request-timeout)\n"
    # client-go's rule: the API server is told the timeout too, so that it gives up as well.
    assert slow.seen == [("/api/v1/namespaces/team-b/pods", {"dryRun": "All", "timeout": "1s"})]


async def test_a_slow_webhook_is_given_up_after_the_timeout_and_0_waits(kubectl: Kubectl, aiohttp_server: Any,
                                                                        snapshot_preview: dict[str, Any]) -> None:
    slow = SlowServer(2, snapshot_preview)
    url = await serve(aiohttp_server, slow)
    timed_out, waited = await asyncio.gather(
        kubectl.arun("preempt-preview", "--webhook-url", url, "-f", POD, "--request-timeout", "500ms"),
        kubectl.arun("preempt-preview", "--webhook-url", url, "-f", POD, "--request-timeout", "0", "-o", "json"))
    assert (timed_out.returncode, timed_out.stdout) == (3, "")
    assert timed_out.stderr == (f"error: cannot reach PreemptGuard at {url}/preview: no answer within 500ms "
                                "(--request-timeout)\n")
    assert waited.returncode == 0, waited.stderr
    assert '"outcome": "Fits"' in waited.stdout


@pytest.fixture
def snapshot_preview(snapshot_state: Any) -> dict[str, Any]:
    from webhook.preemption.preview import preview_objects

    pod = yaml.safe_load(Path(POD).read_text(encoding="utf-8"))
    preview: dict[str, Any] = preview_objects(snapshot_state, [pod])
    return preview
