"""docs/architecture.md tells the truth: no package imports another the table does not allow."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\| `([\w.]+)` \| (.+) \|$")


def allowed_imports() -> dict[str, set[str]]:
    text = DOC.read_text(encoding="utf-8")
    table = text[text.index("## Which package may import which"):text.index("## The path of one pod")]
    allowed: dict[str, set[str]] = {}
    for line in table.splitlines():
        match = ROW.match(line)
        if match:
            allowed[match.group(1)] = set(re.findall(r"`([\w.]+)`", match.group(2)))
    return allowed


def package_of(module: str) -> str:
    """``webhook.x.y`` → ``webhook.x``; ``kubectl_plugin.y`` → ``kubectl_plugin``."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "webhook" and len(parts) > 1 else parts[0]


def imported_packages(path: Path) -> set[str]:
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names = [node.args[0].value]  # importlib.import_module("webhook.certs.command")
        found |= {package_of(n) for n in names if n.split(".")[0] in ("webhook", "kubectl_plugin")}
    return found


def test_every_package_is_in_the_table() -> None:
    allowed = allowed_imports()
    packages = {package_of(".".join(p.relative_to(ROOT).with_suffix("").parts))
                for p in [*(ROOT / "webhook").rglob("*.py"), *(ROOT / "kubectl_plugin").rglob("*.py")]
                if p.name != "__init__.py" or p.parent.name != "webhook"}
    assert packages - {"webhook.__main__"} <= set(allowed), sorted(packages - set(allowed))


def test_no_import_crosses_the_table() -> None:
    allowed = allowed_imports()
    crossings = []
    for path in [*(ROOT / "webhook").rglob("*.py"), *(ROOT / "kubectl_plugin").rglob("*.py")]:
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        own = package_of(module)
        if own == "webhook.__init__":
            continue
        for target in imported_packages(path) - {own}:
            if target not in allowed.get(own, set()):
                crossings.append(f"{module} imports {target}")
    assert not crossings, "\n".join(sorted(crossings))


def test_the_table_is_read() -> None:
    allowed = allowed_imports()
    assert allowed["webhook.cluster"] == {"webhook.errors", "webhook.routes"}
    assert "webhook.server" not in allowed["webhook.preemption"]


# docs/architecture.md's layers: the domain is pure; the edges do I/O (files, HTTP, the Kubernetes API, threads).
DOMAIN = {"webhook.cluster", "webhook.priority", "webhook.preemption", "webhook.guardrails", "webhook.observe"}
EDGES = {"webhook.sources", "webhook.kubeapi", "webhook.server", "webhook.prediction", "webhook.certs",
         "webhook.verify", "webhook.cli", "kubectl_plugin"}
NETWORK_LIBRARIES = {"aiohttp", "kubernetes_asyncio"}


def files_of(package: str) -> list[Path]:
    base = ROOT.joinpath(*package.split("."))
    return sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]


def third_party_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
    return found


def test_the_domain_imports_no_edge() -> None:
    allowed = allowed_imports()
    assert {package: sorted(allowed[package] & EDGES) for package in DOMAIN} == {package: [] for package in DOMAIN}


def test_the_domain_and_the_admission_pipeline_know_no_http_and_no_kubernetes_client() -> None:
    offenders = [f"{path.relative_to(ROOT)} imports {sorted(third_party_imports(path) & NETWORK_LIBRARIES)}"
                 for package in [*sorted(DOMAIN), "webhook.admission"] for path in files_of(package)
                 if third_party_imports(path) & NETWORK_LIBRARIES]
    assert not offenders, "\n".join(offenders)


def test_one_module_talks_to_the_kubernetes_client() -> None:
    """webhook/kubeapi.py is the one door to the API: nothing else imports kubernetes_asyncio or sends a request."""
    doors = set()
    for path in [*(ROOT / "webhook").rglob("*.py"), *(ROOT / "kubectl_plugin").rglob("*.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        sends = any(isinstance(node, ast.Attribute) and node.attr == "call_api" for node in ast.walk(tree))
        if sends or "kubernetes_asyncio" in third_party_imports(path):
            doors.add(str(path.relative_to(ROOT)))
    assert doors == {"webhook/kubeapi.py"}
