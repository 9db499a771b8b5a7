"""The plugin's pieces: inputs, warning headers, refusals, /preview errors, rendering, colour and progress."""

from __future__ import annotations

import asyncio
import builtins
import io
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from conftest import CLUSTER, POD_FILES
from kubectl_plugin.inputs import (
    flatten,
    parse_manifests,
    parse_workload_ref,
    pod_manifests,
    resource_type,
    with_priority_class,
)
from kubectl_plugin.render import Progress, colour_wanted, format_tables, render
from kubectl_plugin.sources import snapshot as snapshot_source
from kubectl_plugin.sources.dry_run import ClusterPreviewSource
from kubectl_plugin.sources.http import RequestTimeout
from kubectl_plugin.sources.kube_api import kubeconfig_paths
from kubectl_plugin.sources.snapshot import SnapshotPreviewSource
from kubectl_plugin.sources.webhook_url import WebhookPreviewSource
from webhook.cluster.snapshot import ClusterState
from webhook.errors import ApiError, ClusterUnavailable, ConfigError, Forbidden, InvalidInput, Unauthorized
from webhook.kubeapi import ApiAnswer, KubeClient, api_error, parse_warning_headers
from webhook.preemption.preview import preview_document, preview_objects, summarize
from webhook.preemption.workloads import expand_object
from webhook.server.auth import redact_preview
from webhook.sources import snapshot_cache
from webhook.sources.loader import ProgressFn, load_snapshot

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"},
       "spec": {"priority": 5, "preemptionPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}


# ---- warning headers ------------------------------------------------------------------------------------
def test_warning_headers_as_the_api_server_sends_them() -> None:
    assert parse_warning_headers(['299 - "would preempt 2 pods"']) == ["would preempt 2 pods"]
    assert parse_warning_headers(['299 - "say \\"hi\\" \\\\ there"']) == ['say "hi" \\ there']
    assert parse_warning_headers(['299 - "one", 299 - "two, with a comma"', '299 - "three"']) == [
        "one", "two, with a comma", "three"]
    assert parse_warning_headers(['199 agent "misc"', '299 - "kept" "Wed, 21 Oct 2015 07:28:00 GMT"']) == ["kept"]


# ---- inputs ---------------------------------------------------------------------------------------------
def test_yaml_errors_name_line_and_column() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_manifests("kind: Pod\nmetadata:\n  name: [x\n", "f.yaml")
    assert str(caught.value) == ("f.yaml:4:1: invalid YAML: did not find expected ',' or ']' "
                                 "(while parsing a flow sequence started at line 3, column 9)")


@pytest.mark.parametrize("text, message", [
    ("- a\n- b\n", "f.yaml: expected a Kubernetes object, got a list"),
    ("metadata: {name: x}\n", "f.yaml: the object has no kind"),
    ("kind: Pod\n", "f.yaml: Pod has no metadata.name"),
    ("kind: Deployment\nmetadata: {name: d}\nspec: {replicas: -1}\n",
     "f.yaml: spec.replicas: expected a non-negative integer"),
    ("kind: List\nitems:\n- kind: Pod\n", "f.yaml, items[0]: Pod has no metadata.name"),
])
def test_manifest_checks(text: str, message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_manifests(text, "f.yaml")
    assert str(caught.value).startswith(message)


def test_unquoted_timestamps_stay_strings() -> None:
    (obj,) = parse_manifests("kind: Pod\nmetadata: {name: p, annotations: {at: 2024-05-01T10:00:00Z}}\n", "f")
    assert obj["metadata"]["annotations"]["at"] == "2024-05-01T10:00:00Z"
    json.dumps(obj)


@pytest.mark.parametrize("text, plural", [("deploy", "deployments"), ("Deployment", "deployments"),
                                          ("deployments.apps", "deployments"), ("deployment.v1.apps", "deployments"),
                                          ("sts", "statefulsets"), ("rs", "replicasets"), ("cj", "cronjobs"),
                                          ("jobs.batch", "jobs"), ("po", "pods"), ("pods", "pods")])
def test_resource_types(text: str, plural: str) -> None:
    assert resource_type(text).plural == plural


def test_workload_refs() -> None:
    ref = parse_workload_ref(["deploy/web"])
    assert (ref.resource.plural, ref.name) == ("deployments", "web")
    assert ref.resource.path("team-a", "web") == "/apis/apps/v1/namespaces/team-a/deployments/web"
    assert parse_workload_ref(["pod", "x"]).resource.path("ns", "x") == "/api/v1/namespaces/ns/pods/x"
    for bad in (["svc/web"], ["deployment.batch/web"], ["web"], ["a/b/c"], ["deploy/"]):
        with pytest.raises(InvalidInput):
            parse_workload_ref(bad)


def test_priority_class_override_reaches_every_pod_spec_and_copies() -> None:
    cron = {"kind": "CronJob", "metadata": {"name": "c"},
            "spec": {"jobTemplate": {"spec": {"template": {"spec": {"priority": 1}}}}}}
    deployment = {"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": {}}}}
    listed = {"kind": "List", "items": [POD, cron, deployment]}
    changed = with_priority_class(listed, "high")
    specs = [changed["items"][0]["spec"], changed["items"][1]["spec"]["jobTemplate"]["spec"]["template"]["spec"],
             changed["items"][2]["spec"]["template"]["spec"]]
    assert all(s.get("priorityClassName") == "high" and "priority" not in s and "preemptionPolicy" not in s
               for s in specs)
    assert POD["spec"]["priority"] == 5 and "priorityClassName" not in POD["spec"]
    assert with_priority_class(POD, None) == POD


@pytest.mark.parametrize("path", POD_FILES, ids=[p.stem for p in POD_FILES])
@pytest.mark.parametrize("replicas", [None, 1, 3])
def test_dry_run_pods_are_named_like_the_predictors(path: Path, replicas: int | None) -> None:
    for obj in flatten(parse_manifests(path.read_text(encoding="utf-8"), str(path))):
        sent = pod_manifests(obj, namespace=None, replicas=replicas)
        predicted = expand_object(obj, replicas=replicas)
        assert len(sent) == len(predicted)
        for raw, pod in zip(sent, predicted, strict=True):
            meta = raw["metadata"]
            assert meta["namespace"] == pod.namespace
            assert meta.get("name", meta.get("generateName", "").rstrip("-")) == pod.name
            assert raw["spec"] == (obj["spec"] if obj["kind"] == "Pod" else obj["spec"]["template"]["spec"])


# ---- the PreemptionPreview document ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def deployment_preview() -> dict[str, Any]:
    objects = list(yaml.safe_load_all((CLUSTER.parent / "pods/14-deployment-high.yaml").read_text(encoding="utf-8")))
    return preview_objects(load_snapshot(CLUSTER), objects)


def test_combined_results_have_the_predictors_summary(deployment_preview: dict[str, Any]) -> None:
    assert preview_document(deployment_preview["results"]) == deployment_preview


def answer(status: int, body: Mapping[str, Any] | str) -> ApiAnswer:
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    return ApiAnswer(status, raw, ())


def status_body(code: int, message: str) -> dict[str, Any]:
    return {"kind": "Status", "code": code, "message": message}


def refused(code: int, message: str) -> ApiError:
    """The error the API door raises for a refused dry-run create answering this Status."""
    return api_error("POST", "/api/v1/namespaces/team-a/pods", code, status_body(code, message))


def test_refusals_are_rejections_or_errors() -> None:
    source = ClusterPreviewSource(KubeClient())
    for code, message in [(403, 'pods "p" is forbidden: no PriorityClass with name gold was found'),
                          (422, 'Pod "p" is invalid: spec.containers: Required value'),
                          (500, "insufficient quota to match these scopes: [{PriorityClass In [a]}]"),
                          (400, 'admission webhook "pods.preemptguard.io" denied the request: too many victims')]:
        result = source._refusal(POD, refused(code, message))
        assert (result["outcome"], result["message"], result["pod"]) == ("Rejected", message, "team-a/p")
    with pytest.raises(Forbidden, match="cannot create resource"):
        source._refusal(POD, refused(403, 'pods is forbidden: User "bob" cannot create resource '
                                          '"pods" in API group "" in the namespace "team-a"'))
    with pytest.raises(InvalidInput, match='namespaces "team-a" not found'):
        source._refusal(POD, refused(404, 'namespaces "team-a" not found'))
    with pytest.raises(ClusterUnavailable, match="HTTP 500: Internal error occurred: failed calling webhook"):
        source._refusal(POD, refused(500, "Internal error occurred: failed calling webhook"))


def test_short_annotation_of_an_old_webhook_is_an_error() -> None:
    source = ClusterPreviewSource(KubeClient())
    created = {**POD, "metadata": {**POD["metadata"], "annotations": {
        "preemptguard.io/prediction": json.dumps({"outcome": "Fits", "node": "n", "victims": 0})}}}
    with pytest.raises(Exception, match="older than this plugin"):
        source._prediction(answer(201, created))


# ---- --webhook-url errors ------------------------------------------------------------------------------------
async def test_webhook_source_sends_the_token_and_maps_errors(aiohttp_server: Any,
                                                              deployment_preview: dict[str, Any]) -> None:
    seen: list[tuple[str, Any]] = []
    replies = iter([(200, deployment_preview), (401, {"error": "bad token"}), (403, {"error": "not you"}),
                    (400, {"error": "replicas must be a non-negative integer"}), (503, {"error": "cache not ready"}),
                    (404, {"error": "?"})])

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.headers.get("Authorization", ""), await request.json()))
        code, body = next(replies)
        return web.json_response(body, status=code)

    app = web.Application()
    app.router.add_post("/preview", handler)
    server = await aiohttp_server(app)
    source = WebhookPreviewSource(f"http://127.0.0.1:{server.port}", token="s3cret")
    got = await source.preview([POD], namespace="team-b", replicas=2, progress=Progress())
    assert got.preview == deployment_preview
    assert seen[0] == ("Bearer s3cret", {"pod": POD, "namespace": "team-b", "replicas": 2})
    for error, text in [(Unauthorized, "bad token"), (Forbidden, "not you"), (InvalidInput, "replicas must be"),
                        (ClusterUnavailable, "cache not ready"), (InvalidInput, "no such endpoint")]:
        with pytest.raises(error, match=text):
            await source.preview([POD], namespace=None, replicas=None, progress=Progress())


async def test_webhook_answers_combined_keep_the_servers_summary_of_redacted_victims(
        aiohttp_server: Any, deployment_preview: dict[str, Any]) -> None:
    """/preview redacts the victims of namespaces the caller may not list; the plugin combines one answer per
    object, and the combined summary still counts them, as the server's did."""
    redacted = redact_preview(deployment_preview, {"batch"})
    assert redacted["summary"] == deployment_preview["summary"] and redacted["redactedNamespaces"] == ["batch"]

    async def handler(request: web.Request) -> web.Response:
        return web.json_response(redacted)

    app = web.Application()
    app.router.add_post("/preview", handler)
    server = await aiohttp_server(app)
    got = await WebhookPreviewSource(f"http://127.0.0.1:{server.port}").preview(
        [POD, POD], namespace=None, replicas=None, progress=Progress())
    assert got.preview["results"] == redacted["results"] * 2
    assert got.preview["summary"] == summarize(deployment_preview["results"] * 2)
    assert got.preview["summary"]["victims"] == 8 and got.preview["summary"]["namespacesAffected"] == ["batch"]
    assert got.preview["redactedNamespaces"] == ["batch"]


async def test_webhook_source_retries_as_retry_after_says_and_gives_up_in_one_line(aiohttp_server: Any,
                                                                                  deployment_preview: dict[str, Any],
                                                                                  monkeypatch: pytest.MonkeyPatch
                                                                                  ) -> None:
    """client-go's rule (k8s.io/client-go/rest checkWait, maxRetries 10): a 429 or 5xx with Retry-After in whole
    seconds is asked again after that long, at most 10 times; a 429 without one, or past the 10th retry, is
    ClusterUnavailable (exit 3). The waits themselves are recorded, not slept."""
    waits: list[float] = []

    async def no_sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr("kubectl_plugin.sources.webhook_url.asyncio.sleep", no_sleep)
    replies: list[tuple[int, dict[str, str]]] = []

    async def handler(request: web.Request) -> web.Response:
        code, headers = replies.pop(0) if replies else (200, {})
        if code == 200:
            return web.json_response(deployment_preview)
        refusal = "too many previews from alice: at most 60 per minute (prediction.previewsPerMinute); retry in 2 s"
        return web.json_response({"error": refusal}, status=code, headers=headers)

    app = web.Application()
    app.router.add_post("/preview", handler)
    server = await aiohttp_server(app)
    source = WebhookPreviewSource(f"http://127.0.0.1:{server.port}")

    async def ask() -> Any:
        return await source.preview([POD], namespace=None, replicas=None, progress=Progress())

    replies[:] = [(429, {"Retry-After": "2"}), (503, {"Retry-After": "1"}), (429, {"Retry-After": "0"})]
    assert (await ask()).preview == deployment_preview
    assert waits == [2, 1, 0] and not replies
    waits.clear()
    replies[:] = [(429, {"Retry-After": "1"})] * 11
    with pytest.raises(ClusterUnavailable) as gave_up:
        await ask()
    assert waits == [1] * 10 and not replies
    assert str(gave_up.value) == (
        f"http://127.0.0.1:{server.port}/preview: HTTP 429: too many previews from alice: at most 60 per minute "
        "(prediction.previewsPerMinute); retry in 2 s; still refused after 10 retries (Retry-After)")
    waits.clear()
    for headers in ({}, {"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}, {"Retry-After": "-1"}):
        replies[:] = [(429, headers)]
        with pytest.raises(ClusterUnavailable, match=r"/preview: HTTP 429: too many previews"):
            await ask()
    assert waits == []
    # The retries of one request stay within --request-timeout, counted from its first try.
    source.timeout = RequestTimeout.parse("5s")
    replies[:] = [(429, {"Retry-After": "30"})]
    with pytest.raises(ClusterUnavailable, match=r"not retried: Retry-After 30s is past --request-timeout 5s"):
        await ask()
    assert waits == []


def test_kubeconfig_paths(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("{}", encoding="utf-8")
    b.write_text("{}", encoding="utf-8")
    assert kubeconfig_paths(None, {"KUBECONFIG": f"{a}:{tmp_path / 'gone'}:{b}"}) == [str(a), str(b)]
    assert kubeconfig_paths(str(b), {"KUBECONFIG": str(a)}) == [str(b)]
    with pytest.raises(ConfigError, match="file not found"):
        kubeconfig_paths(str(tmp_path / "gone"), {})
    with pytest.raises(ConfigError, match="none of the KUBECONFIG files exist"):
        kubeconfig_paths(None, {"KUBECONFIG": str(tmp_path / "gone")})


# ---- rendering, colour, progress -----------------------------------------------------------------------------
class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_without_no_color() -> None:
    assert colour_wanted(Terminal(), {})
    assert not colour_wanted(Terminal(), {"NO_COLOR": "1"})
    assert not colour_wanted(io.StringIO(), {})
    assert colour_wanted(Terminal(), {"NO_COLOR": ""})  # no-color.org: only a non-empty value counts


def test_coloured_table_aligns_like_the_plain_one(deployment_preview: dict[str, Any]) -> None:
    plain = format_tables(deployment_preview, wide=False)
    coloured = format_tables(deployment_preview, wide=False, colour=True)
    assert "\033[33mPreempts\033[0m" in coloured
    assert "\033" not in plain
    stripped = coloured.replace("\033[33m", "").replace("\033[0m", "")
    assert stripped == plain


def test_redacted_victims_are_counted_and_shown(deployment_preview: dict[str, Any]) -> None:
    preview = json.loads(json.dumps(deployment_preview))
    preview["results"][0]["redactedVictims"] = [{"namespace": "team-z", "count": 2, "pdbViolations": 1}]
    lines = format_tables(preview, wide=False).splitlines()
    assert lines[1].split()[4] == "3"  # the named victim plus two hidden ones
    assert any(line.split()[:3] == ["team-z", "<2", "hidden>"] for line in lines)


def test_json_and_yaml_are_the_document(deployment_preview: dict[str, Any]) -> None:
    assert json.loads(render(deployment_preview, "json")) == deployment_preview
    assert yaml.safe_load(render(deployment_preview, "yaml")) == deployment_preview
    assert format_tables({"results": []}, wide=False) == "No pods to preview.\n"


def test_progress_only_on_a_terminal_and_only_for_long_runs() -> None:
    now = [0.0]
    stream = Terminal()
    progress = Progress(stream, enabled=True, delay=0.5, clock=lambda: now[0])
    progress.start(3, "dry-run create")
    progress.advance()
    assert stream.getvalue() == ""  # quick so far: nothing drawn
    now[0] = 1.25
    progress.advance()
    assert stream.getvalue() == "\rdry-run create 2/3 (1.2s)\033[K"
    progress.finish()
    assert stream.getvalue().endswith("\r\033[K")
    silent = io.StringIO()
    quiet = Progress.for_stream(silent)  # not a terminal
    quiet.start(1, "x")
    now[0] = 10
    quiet.advance()
    quiet.finish()
    assert silent.getvalue() == ""


async def test_progress_ticks_while_waiting() -> None:
    stream = Terminal()
    progress = Progress(stream, enabled=True, delay=0.0)
    async with progress.running("predicting", interval=0.01):
        await asyncio.sleep(0.05)
    assert "\rpredicting (" in stream.getvalue() and stream.getvalue().endswith("\r\033[K")


@pytest.fixture
def slow_snapshot_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin's snapshot load, 3 of 10 MB read and then slow, as a big file's is."""
    def slow(path: str, *, require_cluster: bool, progress: ProgressFn | None = None) -> ClusterState:
        assert progress is not None
        progress(3 << 20, 10 << 20)
        time.sleep(0.3)
        return load_snapshot(path, require_cluster=require_cluster, progress=progress)

    monkeypatch.setattr(snapshot_source, "load_snapshot", slow)


async def test_a_slow_snapshot_load_shows_the_mb_read_on_a_terminal(slow_snapshot_load: None) -> None:
    stream = Terminal()
    got = await SnapshotPreviewSource(str(CLUSTER)).preview(
        [POD], namespace=None, replicas=None, progress=Progress(stream, enabled=True, delay=0.1))
    assert got.preview == preview_objects(load_snapshot(CLUSTER), [POD])
    drawn = stream.getvalue()
    assert f"\rloading {CLUSTER} (MB read) 3/10 (" in drawn, drawn
    assert drawn.endswith("\r\033[K")  # cleared before the output is printed


async def test_no_snapshot_progress_when_stderr_is_not_a_terminal(slow_snapshot_load: None) -> None:
    stream = io.StringIO()
    got = await SnapshotPreviewSource(str(CLUSTER)).preview(
        [POD], namespace=None, replicas=None, progress=Progress.for_stream(stream))
    assert got.preview["results"] and stream.getvalue() == ""


async def test_a_quick_snapshot_load_draws_nothing_even_on_a_terminal() -> None:
    stream = Terminal()
    await SnapshotPreviewSource(str(CLUSTER)).preview([POD], namespace=None, replicas=None,
                                                      progress=Progress(stream, enabled=True, delay=30))
    assert stream.getvalue() == ""


async def test_snapshot_cache_in_an_unwritable_directory_warns_and_predicts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_bytes(CLUSTER.read_bytes())
    tmp_path.chmod(0o555)
    if os.access(tmp_path, os.W_OK):
        # root ignores permission bits: the cache module gets the error the kernel gives everyone else.
        def refusing_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            if "w" in mode and Path(file).parent == tmp_path:
                raise PermissionError(13, "Permission denied", str(file))
            return builtins.open(file, mode, *args, **kwargs)

        monkeypatch.setattr(snapshot_cache, "open", refusing_open, raising=False)
    try:
        got = await SnapshotPreviewSource(str(snapshot), cache=True).preview(
            [POD], namespace=None, replicas=None, progress=Progress())
    finally:
        tmp_path.chmod(0o755)
    assert got.preview == preview_objects(load_snapshot(CLUSTER), [POD])
    assert got.warnings == [f"snapshot cache: cannot write {tmp_path / '.cluster.yaml.pgcache'}: Permission denied"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster.yaml"]


def test_table_counts_victims_of_other_tenants_without_naming_them() -> None:
    result = {"pod": "team-a/web", "priorityClassName": "high", "outcome": "Preempts", "node": "n1",
              "victims": [{"namespace": "team-a", "name": "own-batch", "node": "n1", "priority": 1,
                           "pdbViolation": False}],
              "otherTenantVictims": {"count": 3, "pdbViolations": 1}, "pdbViolations": 1}
    text = format_tables({"results": [result], "summary": summarize([result])}, wide=False)
    lines = text.splitlines()
    assert lines[1].split()[:6] == ["team-a/web", "high", "Preempts", "n1", "4", "1"]
    assert any("own-batch" in line for line in lines)
    assert any(line.split()[:6] == ["<none>", "3", "pods", "of", "other", "tenants"] for line in lines), text
    assert lines[-1].endswith("4 victims in 1 namespace (team-a), 3 of them of other tenants, 1 PDB violation")


def test_wide_output_explains_where_a_fitting_pod_lands() -> None:
    """``-o wide`` lists each Fits pod's best-scored nodes with every Score plugin's weighted share (topNodes),
    as the JSON carries them; the default table does not."""
    result = {"pod": "a/web", "priorityClassName": None, "outcome": "Fits", "node": "n2", "victims": [],
              "pdbViolations": 0, "candidateNodes": 0, "tiedNodes": ["n2"], "expectedDelaySeconds": 0,
              "message": "fits on node n2", "placement": "scored", "scoredNodes": 2,
              "topNodes": [{"node": "n2", "score": 412, "scores": {"TaintToleration": 300, "NodeResourcesFit": 112}},
                           {"node": "n1", "score": 400, "scores": {"TaintToleration": 300, "NodeResourcesFit": 100}}]}
    preview = {"results": [result], "summary": {"pods": 1, "fits": 1}}
    wide = format_tables(preview, wide=True).splitlines()
    start = wide.index(next(line for line in wide if line.startswith("POD") and "PLUGIN SCORES" in line))
    assert [line.split() for line in wide[start + 1:start + 3]] == [
        ["a/web", "n2", "412", "TaintToleration=300,NodeResourcesFit=112"],
        ["a/web", "n1", "400", "TaintToleration=300,NodeResourcesFit=100"]]
    assert "PLUGIN SCORES" not in format_tables(preview, wide=False)
