"""Shell completion: the real kubectl (1.26 or later runs ``kubectl_complete-preempt_preview``) asked with
``kubectl __complete preempt-preview WORDS...``, its Cobra-style answer, values from a fake API server within a
bound, the krew archive's completion script, and the scripts of ``completion bash|zsh`` run by bash and zsh."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from conftest import COMPLETER, ROOT, Kubectl, write_shim
from kubectl_plugin.completion import CLUSTER_SECONDS, plugin_flags, read_words
from kubectl_plugin.options import OUTPUTS

TYPES = ["pod/", "deployment/", "statefulset/", "replicaset/", "job/", "cronjob/"]


def answer(stdout: str) -> tuple[list[str], int]:
    """Cobra's protocol: one candidate per line, then ``:<directive>``."""
    *lines, last = stdout.splitlines()
    assert re.fullmatch(r":\d+", last), stdout
    return lines, int(last[1:])


def values(lines: list[str]) -> list[str]:
    return [line.partition("\t")[0] for line in lines]


def complete(kubectl: Kubectl, *words: str, env: dict[str, str] | None = None) -> tuple[list[str], int]:
    run = kubectl.run("__complete", "preempt-preview", *words, env=env)
    assert run.returncode == 0, run.stderr
    assert f"About to call: {kubectl.plugin_dir / COMPLETER}" in run.stderr  # the plugin's completer answered
    return answer(run.stdout)


# ---- flags, outputs, files, types: through the real kubectl ----------------------------------------------
def test_flags(kubectl: Kubectl) -> None:
    lines, directive = complete(kubectl, "-")
    assert directive == 4  # no file completion
    names = values(lines)
    assert {"-f", "--filename", "-o", "--output", "--request-timeout", "--no-headers", "--priority-class",
            "-n", "--namespace", "--context", "--kubeconfig", "--snapshot", "--webhook-url"} <= set(names)
    assert all(flag.names[-1] in names for flag in plugin_flags())  # every flag the command takes
    assert ("--output\tOutput format: table, wide, json, yaml, name, jsonpath=TEMPLATE or custom-columns=SPEC"
            in "\n".join(lines))
    # A flag given is not offered again, unless it repeats (-f), as Cobra does.
    given = values(complete(kubectl, "-o", "json", "-f", "a.yaml", "--")[0])
    assert "--output" not in given and "--filename" in given and "--no-headers" in given


def test_output_values(kubectl: Kubectl) -> None:
    assert values(complete(kubectl, "-o", "")[0]) == list(OUTPUTS)
    assert complete(kubectl, "--output=")[0] == complete(kubectl, "-o", "")[0]  # the value alone, as Cobra
    assert complete(kubectl, "-f", "x.yaml", "--output", "w") == (
        ["wide\tthe tables with priorities, candidate and tied nodes, and the expected delay"], 4)


def test_manifest_files(kubectl: Kubectl) -> None:
    # kubectl's own -f: files with these extensions (and directories), directive FilterFileExt.
    assert complete(kubectl, "-f", "") == (["json", "yaml", "yml"], 8)
    assert complete(kubectl, "--snapshot", "ex") == (["json", "yaml", "yml"], 8)
    assert complete(kubectl, "--kubeconfig", "") == ([], 0)  # any file


def test_types_and_the_completion_command(kubectl: Kubectl) -> None:
    lines, directive = complete(kubectl, "")
    assert values(lines) == [*TYPES, "completion", "exposure"] and directive == 4 | 2  # no space after TYPE/
    assert complete(kubectl, "dep") == (["deployment/"], 6)
    assert complete(kubectl, "sts") == (["sts/"], 6)  # a short name, kept as typed
    assert complete(kubectl, "comp") == (["completion\tPrint the shell completion script for "
                                          "kubectl-preempt_preview (bash or zsh)"], 4)
    assert complete(kubectl, "completion", "") == (["bash", "zsh"], 4)
    assert complete(kubectl, "exp") == (["exposure\tWhich of a namespace's running pods could be preempted, and by "
                                         "which PriorityClasses"], 4)
    assert complete(kubectl, "exposure", "") == ([], 4)
    assert complete(kubectl, "-f", "x.yaml", "") == ([], 4)  # -f or TYPE/NAME, not both
    assert complete(kubectl, "svc/") == ([], 4)


def test_contexts_from_the_kubeconfig(kubectl: Kubectl, tmp_path: Path) -> None:
    config = {"apiVersion": "v1", "kind": "Config", "contexts": [
        {"name": "prod", "context": {}}, {"name": "staging", "context": {}},
        {"name": "arn:aws:eks:eu-west-1:1:cluster/a", "context": {}}]}
    (tmp_path / "config").write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {"KUBECONFIG": str(tmp_path / "config")}
    assert complete(kubectl, "--context", "", env=env) == (["prod", "staging", "arn:aws:eks:eu-west-1:1:cluster/a"], 4)
    assert complete(kubectl, "--kubeconfig", str(tmp_path / "config"), "--context", "st") == (["staging"], 4)


def test_reading_the_words_as_pflag_does() -> None:
    typed = read_words(["-ojson", "-f", "a", "--filename=b", "-n", "x", "deploy", "--", "-z"], plugin_flags())
    assert typed.values == {"output": "json", "filename": "b", "namespace": "x"}
    assert typed.positionals == ["deploy", "-z"] and typed.end_of_flags
    assert read_words(["--priority-class"], plugin_flags()).pending is not None


# ---- values from the cluster ----------------------------------------------------------------------------
class ListingApiServer:
    """Lists of priority classes, namespaces and deployments for one bearer token, after ``delay`` seconds."""

    def __init__(self, delay: float = 0) -> None:
        self.delay = delay
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.lists: dict[str, list[dict[str, Any]]] = {
            "/apis/scheduling.k8s.io/v1/priorityclasses": [
                {"metadata": {"name": "high"}, "value": 1000000},
                {"metadata": {"name": "high-never"}, "value": 1000000, "preemptionPolicy": "Never"},
                {"metadata": {"name": "standard"}, "value": 1000, "globalDefault": True}],
            "/api/v1/namespaces": [{"metadata": {"name": n}} for n in ("team-a", "team-b")],
            "/apis/apps/v1/namespaces/team-a/deployments": [{"metadata": {"name": n}} for n in ("web", "worker")],
            "/apis/apps/v1/namespaces/team-b/deployments": [{"metadata": {"name": "payments"}}],
        }

    async def handle(self, request: web.Request) -> web.Response:
        if request.path == "/version":  # this machine's kubectl asks it first, to pick a matching release
            return web.json_response({"major": "1", "minor": "32", "gitVersion": "v1.32.4"})
        self.requests.append((request.path, dict(request.query)))
        await asyncio.sleep(self.delay)
        if request.headers.get("Authorization") != "Bearer t":
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        return web.json_response({"kind": "List", "items": self.lists.get(request.path, [])})

    async def kubeconfig(self, aiohttp_server: Any, path: Path) -> dict[str, str]:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.handle)
        server = await aiohttp_server(app)
        config = {"apiVersion": "v1", "kind": "Config", "current-context": "fake",
                  "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{server.port}"}}],
                  "users": [{"name": "u", "user": {"token": "t"}}],
                  "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u", "namespace": "team-a"}}]}
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return {"KUBECONFIG": str(path)}


async def acomplete(kubectl: Kubectl, *words: str, env: dict[str, str]) -> tuple[list[str], int]:
    run = await kubectl.arun("__complete", "preempt-preview", *words, env=env)
    assert run.returncode == 0, run.stderr
    return answer(run.stdout)


async def test_values_from_the_cluster(kubectl: Kubectl, aiohttp_server: Any, tmp_path: Path) -> None:
    api = ListingApiServer()
    env = await api.kubeconfig(aiohttp_server, tmp_path / "kubeconfig")
    classes, high, namespaces, deployments, other_namespace, two_words = await asyncio.gather(
        acomplete(kubectl, "-f", "x.yaml", "--priority-class", "", env=env),
        acomplete(kubectl, "--priority-class=hi", env=env),
        acomplete(kubectl, "-n", "", env=env),
        acomplete(kubectl, "deployment/w", env=env),
        acomplete(kubectl, "-n", "team-b", "deploy/", env=env),
        acomplete(kubectl, "deployments.apps", "", env=env))
    assert classes == (["high\tvalue 1000000", "high-never\tvalue 1000000, preemptionPolicy Never",
                        "standard\tvalue 1000, global default"], 4)
    assert values(high[0]) == ["high", "high-never"]
    assert namespaces == (["team-a", "team-b"], 4)
    assert deployments == (["deployment/web", "deployment/worker"], 4)  # the context's namespace
    assert other_namespace == (["deploy/payments"], 4)
    assert two_words == (["web", "worker"], 4)
    # One page is enough to choose from; the API server is told the bound too (?timeout=, as client-go does).
    assert {tuple(sorted(q.items())) for _, q in api.requests} == {(("limit", "500"), ("timeout", "2s"))}


async def test_a_slow_cluster_never_holds_up_a_tab(kubectl: Kubectl, aiohttp_server: Any, tmp_path: Path) -> None:
    api = ListingApiServer(delay=30)
    env = await api.kubeconfig(aiohttp_server, tmp_path / "kubeconfig")
    started = time.monotonic()
    got = await acomplete(kubectl, "--priority-class", "", env=env)
    elapsed = time.monotonic() - started
    assert got == ([], 4)
    assert api.requests  # it asked, and gave up after CLUSTER_SECONDS (not --request-timeout's default 60s)
    assert elapsed < CLUSTER_SECONDS + 10, elapsed  # generous for a loaded machine; the server needs 30s
    # Called directly, the completer prints nothing but its answer, and --request-timeout shortens the bound.
    run = await asyncio.create_subprocess_exec(str(kubectl.plugin_dir / COMPLETER), "--request-timeout", "1",
                                               "--priority-class", "", stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, env=kubectl.env(env))
    out, err = await asyncio.wait_for(run.communicate(), 30)
    assert (run.returncode, out, err) == (0, b":4\n", b"")
    assert api.requests[-1][1]["timeout"] == "1s"


def test_no_kubeconfig_no_values(kubectl: Kubectl) -> None:
    assert complete(kubectl, "--priority-class", "", env={"KUBECONFIG": "/nonexistent"}) == ([], 4)


# ---- the completion script of the krew archive --------------------------------------------------------
def test_the_krew_archives_completer_asks_the_plugin(kubectl: Kubectl, tmp_path: Path) -> None:
    """krew/kubectl_complete-preempt_preview, on PATH next to the plugin, as the krew caveats install it."""
    script = ROOT / "krew" / COMPLETER
    assert os.access(script, os.X_OK)
    write_shim(tmp_path)
    shutil.copy2(script, tmp_path / COMPLETER)
    krew = Kubectl(kubectl.binary, tmp_path, kubectl.home)
    assert values(complete(krew, "-o", "")[0]) == list(OUTPUTS)
    assert complete(krew, "dep") == (["deployment/"], 6)


# ---- completion bash|zsh --------------------------------------------------------------------------------
def test_completion_command(kubectl: Kubectl) -> None:
    bash, zsh = (kubectl.run("preempt-preview", "completion", shell) for shell in ("bash", "zsh"))
    assert (bash.returncode, zsh.returncode) == (0, 0)
    assert "complete -o default -F __kubectl_preempt_preview_complete kubectl-preempt_preview" in bash.stdout
    assert zsh.stdout.startswith("#compdef kubectl-preempt_preview\n")
    for args, message in [((), "error: Shell not specified: kubectl preempt-preview completion bash|zsh"),
                          (("fish",), 'error: Unsupported shell type "fish": expected bash or zsh'),
                          (("bash", "zsh"), "error: Too many arguments")]:
        run = kubectl.run("preempt-preview", "completion", *args)
        assert (run.returncode, run.stdout) == (2, "") and run.stderr.startswith(message)
        assert len(run.stderr.splitlines()) == 1


BASH_HARNESS = r"""
source "$SCRIPT"
compopt() { echo "compopt $*" >&2; }   # outside a completion the builtin refuses: record what is asked
COMP_LINE=$LINE
COMP_POINT=${#LINE}
eval "COMP_WORDS=($WORDS)"
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
__kubectl_preempt_preview_complete
printf '%s\n' "${COMPREPLY[@]}"
"""


def bash_words(line: str) -> list[str]:
    """COMP_WORDS as bash splits the line: blanks separate, "=" and ":" are words of their own."""
    words = re.findall(r"[=:]+|[^\s=:]+", line)
    return [*words, ""] if line.endswith(" ") else words


def run_bash(kubectl: Kubectl, script: Path, line: str, *,
             env: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """The script in plain bash (it needs none of the bash-completion package's helpers)."""
    words = " ".join("'" + w.replace("'", "'\\''") + "'" for w in bash_words(line))
    extra = {"SCRIPT": str(script), "LINE": line, "WORDS": words, **(env or {})}
    done = subprocess.run(["bash", "-c", BASH_HARNESS], capture_output=True, text=True, env=kubectl.env(extra),
                          cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return [w for w in done.stdout.splitlines() if w], [c for c in done.stderr.splitlines() if c.startswith("compopt")]


def test_bash_script(kubectl: Kubectl, tmp_path: Path) -> None:
    script = tmp_path / "completion.bash"
    script.write_text(kubectl.run("preempt-preview", "completion", "bash").stdout, encoding="utf-8")
    config = {"apiVersion": "v1", "kind": "Config", "contexts": [{"name": "arn:aws:eks:eu-west-1:1:cluster/a"}]}
    (tmp_path / "config").write_text(yaml.safe_dump(config), encoding="utf-8")

    def bash(line: str) -> tuple[list[str], list[str]]:
        return run_bash(kubectl, script, line, env={"KUBECONFIG": str(tmp_path / "config")})

    assert bash("kubectl-preempt_preview -o w") == (["wide"], ["compopt +o default"])
    assert bash("kubectl-preempt_preview --output=y") == (["yaml"], ["compopt +o default"])
    assert bash("kubectl-preempt_preview dep") == (["deployment/"], ["compopt -o nospace", "compopt +o default"])
    assert bash("kubectl-preempt_preview completion ") == (["bash", "zsh"], ["compopt +o default"])
    # -f: manifests (.json, .yaml, .yml) and directories, as bash lists them.
    replies, options = bash("kubectl-preempt_preview -f examples/pods/1")
    assert sorted(replies) == sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples/pods").glob("1*.yaml"))
    assert options == ["compopt -o filenames"]
    assert bash("kubectl-preempt_preview -f exa")[0] == ["examples"]
    # No candidate, and files allowed: bash's default completion (registered with -o default) takes over.
    assert bash("kubectl-preempt_preview --kubeconfig ex") == ([], [])
    # bash replaces the word from its last ":": the candidate is cut there.
    assert bash("kubectl-preempt_preview --context arn:aws:eks:eu") == (["eu-west-1:1:cluster/a"],
                                                                        ["compopt +o default"])


def test_zsh_script_asks_the_same_completer(kubectl: Kubectl) -> None:
    """The zsh script is a thin shell over the same ``__complete`` protocol tested above (running it needs zsh's
    completion system and a terminal, which this suite does not assume)."""
    script = kubectl.run("preempt-preview", "completion", "zsh").stdout
    assert script.startswith("#compdef kubectl-preempt_preview")
    assert "_kubectl_preempt_preview()" in script and "__complete" in script
    assert "_describe" in script and "_files" in script


def test_completer_is_quick_to_start() -> None:
    """It runs on every TAB: the predictor and the HTTP clients stay unloaded."""
    code = ("import sys, kubectl_plugin.completion; "
            "print(sorted(m for m in ('aiohttp', 'kubernetes_asyncio', 'webhook.preemption.preview', "
            "'kubectl_plugin.sources.kube_api') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60, check=True)
    assert done.stdout.strip() == "[]"

