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
    assert allowed["webhook.cluster"] == {"webhook.errors"}
    assert "webhook.server" not in allowed["webhook.preemption"]
