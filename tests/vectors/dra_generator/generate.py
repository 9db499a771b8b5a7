"""Regenerate tests/vectors/dra_allocator.json from upstream's allocator test table (not run by the tests).

    python3 tests/vectors/dra_generator/generate.py   (needs Go and the module proxy)

A scratch module requires k8s.io/dynamic-resource-allocation at the release's version, replaced by a scratch copy of
that module (Go refuses overlays inside its module cache) with ``dump_test.go`` added to the incubating allocator's
package; ``go test`` then runs upstream's ``TestAllocator`` table against upstream's allocator, which must pass it, and
every case's inputs and results are written out. Nothing of upstream is copied into this repository.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
VERSION = "v0.37.2"  # k8s.io/dynamic-resource-allocation of Kubernetes v1.37.2
PACKAGE = "k8s.io/dynamic-resource-allocation/structured/internal/incubating"
OUT = ROOT / "tests" / "vectors" / "dra_allocator.json"


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="dra-vectors-") as work:
        module = Path(work) / "main"
        module.mkdir()
        env = {**os.environ, "GOFLAGS": "-mod=mod"}
        source = subprocess.run(["go", "mod", "download", "-json", f"k8s.io/dynamic-resource-allocation@{VERSION}"],
                                cwd=work, env=env, check=True, capture_output=True, text=True)
        copy = Path(work) / "dra"
        shutil.copytree(json.loads(source.stdout)["Dir"], copy)
        for path in copy.rglob("*"):
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
        shutil.copy(HERE / "dump_test.go", copy / "structured" / "internal" / "incubating" / "zz_dump_test.go")
        (module / "go.mod").write_text(
            "module preemptguard.io/dravectors\n\ngo 1.26.0\n\n"
            f"require k8s.io/dynamic-resource-allocation {VERSION}\n\n"
            f"replace k8s.io/dynamic-resource-allocation => {copy}\n")
        raw = module / "vectors.json"
        subprocess.run(["go", "mod", "tidy"], cwd=module, env=env, check=False)
        subprocess.run(["go", "test", "-count=1", "-run", "TestDumpAllocatorVectors", PACKAGE],
                       cwd=module, env={**env, "DRA_VECTORS_OUT": str(raw)}, check=True)
        cases = json.loads(raw.read_text())
    cases.sort(key=lambda c: c["name"])
    OUT.write_text(json.dumps({"source": {"module": f"k8s.io/dynamic-resource-allocation@{VERSION}",
                                          "file": "structured/internal/allocatortesting/allocator_testing.go",
                                          "test": "TestAllocator", "allocator": "incubating"},
                               "cases": cases}, indent=1, sort_keys=True) + "\n")
    print(f"{len(cases)} cases -> {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
