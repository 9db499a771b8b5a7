"""docs/architecture.md tells the truth: no package imports another the table does not allow, and inside the
predictor no part imports another its own table does not allow."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\| `([\w.*]+)` \| (.+) \|$")
PREDICTOR = "webhook.preemption"
PLUGINS = f"{PREDICTOR}.plugins"
ANY_PLUGIN = f"{PLUGINS}.*"


def table(heading: str) -> dict[str, set[str]]:
    """The rows of the first table under ``heading``: a name and the names it may import."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index(heading):]
    section = section[:section.find("\n## ", 1)]
    allowed: dict[str, set[str]] = {}
    for line in section.splitlines():
        match = ROW.match(line)
        if match:
            allowed[match.group(1)] = set(re.findall(r"`([\w.*]+)`", match.group(2)))
    return allowed


def allowed_imports() -> dict[str, set[str]]:
    return table("## Which package may import which")


def predictor_imports() -> dict[str, set[str]]:
    return table("## Inside the predictor")


def package_of(module: str) -> str:
    """``webhook.x.y`` → ``webhook.x``; ``kubectl_plugin.y`` → ``kubectl_plugin``."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "webhook" and len(parts) > 1 else parts[0]


def part_of(module: str) -> str:
    """The predictor's parts: each plugin (``webhook.preemption.plugins.x``), each subpackage and top module."""
    parts = module.removesuffix(".__init__").split(".")
    return ".".join(parts[:4] if module.startswith(f"{PLUGINS}.") else parts[:3])


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}  # ``from pkg import module``
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.add(node.args[0].value)  # importlib.import_module("webhook.certs.command")
    return found


def imported_packages(path: Path) -> set[str]:
    return {package_of(n) for n in imported_modules(path) if n.split(".")[0] in ("webhook", "kubectl_plugin")}


def modules(root: Path) -> dict[str, Path]:
    return {".".join(p.relative_to(ROOT).with_suffix("").parts): p for p in root.rglob("*.py")}


def predictor_module_names() -> set[str]:
    return set(modules(ROOT / "webhook" / "preemption"))


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


def row_of(part: str, rows: dict[str, set[str]]) -> str | None:
    """A part's own row, else the row every plugin without one follows."""
    if part in rows:
        return part
    return ANY_PLUGIN if part.startswith(f"{PLUGINS}.") and ANY_PLUGIN in rows else None


def test_every_part_of_the_predictor_is_in_its_table() -> None:
    rows = predictor_imports()
    parts = {part_of(m) for m in predictor_module_names()} - {PREDICTOR, PLUGINS}
    assert not {p for p in parts if row_of(p, rows) is None}, sorted(p for p in parts if row_of(p, rows) is None)
    assert not set(rows) - parts - {ANY_PLUGIN}, "rows for parts that do not exist"


def test_no_import_inside_the_predictor_crosses_its_table() -> None:
    """Plugins import the framework and the shared helper, not each other; the framework imports no plugin."""
    rows = predictor_imports()
    crossings = []
    for module, path in modules(ROOT / "webhook" / "preemption").items():
        own = part_of(module)
        row = row_of(own, rows)
        if row is None:
            continue  # the package faces (__init__.py): the test above names any part without a row
        may = rows[row]
        for target in {part_of(n) for n in imported_modules(path) if n.startswith(f"{PREDICTOR}.")} - {own}:
            if target in (PREDICTOR, PLUGINS):
                continue  # ``from webhook.preemption.plugins import nodeaffinity``: the module is checked
            if target not in may and not (target.startswith(f"{PLUGINS}.") and ANY_PLUGIN in may):
                crossings.append(f"{module} imports {target}")
    assert not crossings, "\n".join(sorted(crossings))


def test_the_predictor_imports_no_server_and_no_network_library() -> None:
    """Pure and synchronous: only the standard library, the model and the other domain packages."""
    foreign = []
    for module, path in modules(ROOT / "webhook" / "preemption").items():
        for name in imported_modules(path):
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top != "webhook":
                foreign.append(f"{module} imports {name}")
    assert not foreign, "\n".join(sorted(foreign))


def test_the_tables_are_read() -> None:
    allowed = allowed_imports()
    assert allowed["webhook.cluster"] == {"webhook.errors", "webhook.routes"}
    assert "webhook.server" not in allowed["webhook.preemption"]
    rows = predictor_imports()
    assert f"{PREDICTOR}.plugins.registry" in rows and ANY_PLUGIN in rows[f"{PREDICTOR}.plugins.registry"]
    assert not any(p.startswith(PLUGINS) for p in rows[f"{PREDICTOR}.framework"])


# docs/architecture.md's layers: the domain is pure; the edges do I/O (files, HTTP, the Kubernetes API, threads).
DOMAIN = {"webhook.cluster", "webhook.priority", "webhook.preemption", "webhook.guardrails", "webhook.observe",
          "webhook.exposure"}
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
