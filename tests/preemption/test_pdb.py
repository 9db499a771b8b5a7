"""PodDisruptionBudgets during preemption: selectors upstream cannot convert protect nobody."""

from __future__ import annotations

import pytest

from webhook.preemption.preview import preview_objects
from webhook.preemption.results import Outcome

from .clusters import bound_item, cluster, node_item, pod_manifest

# ---- PDBs with selectors upstream cannot convert ------------------------------------------------------------

@pytest.mark.parametrize("expression", [
    "{key: app, operator: In, values: []}",
    "{key: app, operator: NotIn, values: []}",
    "{key: app, operator: Exists, values: [batch]}",
    "{key: app, operator: DoesNotExist, values: [x]}",
    "{key: app, operator: Gt, values: ['1']}",
])
def test_a_pdb_with_an_invalid_selector_protects_nobody(expression: str) -> None:
    pdb = f"""
- apiVersion: policy/v1
  kind: PodDisruptionBudget
  metadata: {{name: broken, namespace: batch}}
  spec: {{selector: {{matchLabels: {{app: batch}}, matchExpressions: [{expression}]}}}}
  status: {{disruptionsAllowed: 0}}
"""
    valid = pdb.replace("name: broken", "name: fine").replace(f", matchExpressions: [{expression}]", "")
    objects = node_item("n1", cpu="2") + bound_item("batch-1", "n1", cpu="1500m", labels="{app: batch}")
    (broken,) = preview_objects(cluster(objects + pdb), [pod_manifest(cpu="1")])["results"]
    assert broken["outcome"] == Outcome.PREEMPTS and broken["pdbViolations"] == 0
    (protected,) = preview_objects(cluster(objects + valid), [pod_manifest(cpu="1")])["results"]
    assert protected["pdbViolations"] == 1  # the same PDB with a valid selector does protect the pod
