"""``kubectl preempt-preview --webhook-url``: the real kubectl, the plugin, and the real PreemptGuard server."""

from __future__ import annotations

import json
import re
import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES, Kubectl, PreemptGuard, Run, expected_outcome, expected_results, results_of

EXAMPLE_SUBSET = ["01-user-class", "04-unknown-class", "10-pdb-violation", "11-unschedulable-too-big",
                  "14-deployment-high"]


def via_webhook(kubectl: Kubectl, server: PreemptGuard, *args: str, stdin: str | None = None) -> Run:
    return kubectl.run("preempt-preview", "--webhook-url", server.url, "--certificate-authority",
                       str(server.ca_file), *args, stdin=stdin)


@pytest.mark.parametrize("name", EXAMPLE_SUBSET)
def test_webhook_url_prints_the_servers_preview(kubectl: Kubectl, preemptguard: PreemptGuard, name: str) -> None:
    path = EXAMPLES / "pods" / f"{name}.yaml"
    run = via_webhook(kubectl, preemptguard, "-f", str(path), "-o", "json")
    assert run.stderr == ""
    preview = json.loads(run.stdout)
    expect = expected_outcome(path)
    assert {r["outcome"] for r in preview["results"]} == {expect}
    assert run.returncode == (0 if expect == "Fits" else 1)
    # The server simulates replicas in order, as the examples' expectations were worked out, and tells the
    # previewing namespace's tenant (no tenantLabel: the namespace) only its own victims: the others are counts.
    expected = expected_results(path)
    own = [(pod, outcome, node, tuple(v for v in victims if v.split("/")[0] == pod.split("/")[0]))
           for pod, outcome, node, victims in expected]
    assert results_of(preview) == own
    assert [(r.get("otherTenantVictims") or {}).get("count", 0) for r in preview["results"]] == [
        len(full[3]) - len(mine[3]) for full, mine in zip(expected, own, strict=True)]


def test_webhook_url_multiple_objects_and_what_if_flags(kubectl: Kubectl, preemptguard: PreemptGuard) -> None:
    # -n may only name the manifests' own namespace (kubectl's rule), so these copies set none.
    text = "\n---\n".join(re.sub(r"(?m)^  namespace: .*$", "", (EXAMPLES / "pods" / f"{n}.yaml").read_text(
        encoding="utf-8")) for n in ("08-small-fits", "01-user-class"))
    run = via_webhook(kubectl, preemptguard, "-f", "-", "--priority-class", "batch", "-n", "team-c",
                      "--replicas", "2", "-o", "json", stdin=text)
    preview = json.loads(run.stdout)
    assert [r["pod"] for r in preview["results"]] == ["team-c/checkout-debug-0", "team-c/checkout-debug-1",
                                                      "team-c/web-canary-0", "team-c/web-canary-1"]
    assert {(r["priorityClassName"], r["priority"]) for r in preview["results"]} == {("batch", 100)}
    assert preview["summary"]["pods"] == 4
    assert run.returncode == 0


def test_webhook_url_table(kubectl: Kubectl, preemptguard: PreemptGuard) -> None:
    run = via_webhook(kubectl, preemptguard, "-f", str(EXAMPLES / "pods/10-pdb-violation.yaml"))
    assert run.returncode == 1
    assert run.stdout.splitlines()[1].split()[:6] == ["team-b/payments-migration", "high", "Preempts",
                                                      "pool-general-04", "1", "1"]


def one_error_line(run: Run) -> str:
    assert run.returncode >= 2 and run.stdout == "" and "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


def test_unverified_certificate_is_an_error_unless_skipped(kubectl: Kubectl, preemptguard: PreemptGuard) -> None:
    pod = str(EXAMPLES / "pods/08-small-fits.yaml")
    line = one_error_line(kubectl.run("preempt-preview", "--webhook-url", preemptguard.url, "-f", pod))
    assert "cannot verify the certificate" in line and "--certificate-authority" in line
    run = kubectl.run("preempt-preview", "--webhook-url", preemptguard.url, "--insecure-skip-tls-verify", "-f", pod,
                      "-o", "json")
    assert run.returncode == 0 and json.loads(run.stdout)["results"][0]["outcome"] == "Fits"


def test_unreachable_webhook(kubectl: Kubectl) -> None:
    with socket.socket() as sock:  # a port that nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    run = kubectl.run("preempt-preview", "--webhook-url", f"https://127.0.0.1:{port}", "-f",
                      str(EXAMPLES / "pods/08-small-fits.yaml"))
    line = one_error_line(run)
    assert run.returncode == 3
    assert line.startswith(f"error: cannot reach PreemptGuard at https://127.0.0.1:{port}/preview")


def test_bad_certificate_authority_file(kubectl: Kubectl, preemptguard: PreemptGuard, tmp_path: Path) -> None:
    bogus = tmp_path / "ca.crt"
    bogus.write_text("not a certificate", encoding="utf-8")
    line = one_error_line(kubectl.run("preempt-preview", "--webhook-url", preemptguard.url, "--certificate-authority",
                                      str(bogus), "-f", str(EXAMPLES / "pods/08-small-fits.yaml")))
    assert line.startswith(f"error: --certificate-authority {bogus}: cannot load")


# ---- 429 from prediction.previewsPerMinute: retried as Retry-After says, within --request-timeout ------------
def previews_refused(server: PreemptGuard) -> float:
    """How many /preview requests the server answered 429 so far (its own counter)."""
    assert server.metrics_url is not None
    with urllib.request.urlopen(f"{server.metrics_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    found = re.search(r'^preemptguard_http_requests_total\{code="429",endpoint="/preview"\} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def drain_previews(server: PreemptGuard) -> None:
    """Spend this caller's previews (the snapshot server's caller is the client address) until a 429 says so."""
    context = ssl.create_default_context(cadata=server.ca_pem.decode())
    body = json.dumps({"pod": yaml.safe_load((EXAMPLES / "pods" / "08-small-fits.yaml").read_text())}).encode()
    for _ in range(100):
        request = urllib.request.Request(f"{server.url}/preview", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, context=context, timeout=30):
                continue
        except urllib.error.HTTPError as refused:
            assert refused.code == 429 and refused.headers["Retry-After"].isdigit()
            return
    raise AssertionError("no 429 after 100 previews")


TWO_PODS = "\n---\n".join((EXAMPLES / "pods" / f"{name}.yaml").read_text(encoding="utf-8")
                          for name in ("08-small-fits", "01-user-class"))


@pytest.mark.parametrize("preemptguard_rate_limited", [12], indirect=True)  # one preview per 5 s once spent
def test_a_preview_refused_for_its_rate_is_retried_when_retry_after_says(
        kubectl: Kubectl, preemptguard_rate_limited: PreemptGuard) -> None:
    server = preemptguard_rate_limited
    drain_previews(server)
    refused_before = previews_refused(server)
    run = via_webhook(kubectl, server, "-f", "-", "-o", "json", stdin=TWO_PODS)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert [r["outcome"] for r in json.loads(run.stdout)["results"]] == ["Fits", "Fits"]
    # It was told 429 (Retry-After: 5 at most) at least once, and asked again until answered.
    assert previews_refused(server) > refused_before


@pytest.mark.parametrize("preemptguard_rate_limited", [1], indirect=True)  # one preview a minute
def test_a_retry_after_past_the_request_timeout_is_one_error_line_and_exit_3(
        kubectl: Kubectl, preemptguard_rate_limited: PreemptGuard) -> None:
    server = preemptguard_rate_limited
    drain_previews(server)
    run = via_webhook(kubectl, server, "-f", str(EXAMPLES / "pods" / "08-small-fits.yaml"), "--request-timeout", "3s")
    assert run.returncode == 3 and run.stdout == ""
    (line,) = run.stderr.splitlines()
    assert line.startswith(f"error: {server.url}/preview: HTTP 429: too many previews from anonymous: "
                           "at most 1 per minute (prediction.previewsPerMinute); retry in "), line
    assert re.search(r"; not retried: Retry-After \d+s is past --request-timeout 3s \(counted from the first try\)$",
                     line), line
