"""Serving certificates of the webhook: ``preempt-guard certs`` (command), its decisions (plan), the
certificate material (material) and the cluster calls (kube)."""
