"""Serving certificates of the webhook: ``preempt-guard certs`` (command), its decisions (plan), the
certificate material (material), CA and certificate issuance (issuance) and the cluster calls (kube)."""
