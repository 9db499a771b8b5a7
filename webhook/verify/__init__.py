"""``preempt-guard verify``: PreemptGuard's prediction held against a real kube-scheduler (docs/interfaces.md §8).

``controlplane`` starts etcd, kube-apiserver and kube-scheduler on loopback; ``loader`` writes a snapshot into
it faithfully; ``observe`` watches what the scheduler does with each pod; ``webhook.observe.compare`` gives the
verdict (pure, shared with the live observer of docs/interfaces.md §9); ``report`` renders it; ``engine`` is the
one door to the predictor; ``runner`` and ``command`` tie them together.
"""
