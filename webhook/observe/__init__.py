"""Predictions held against what kube-scheduler then did, in the live cluster (docs/interfaces.md §9).

Pure logic, no I/O: ``compare`` gives the verdict (shared with ``preempt-guard verify``), ``tracker`` follows
each prediction through the pod changes the informers deliver and decides it once, ``report`` renders a
decision tenant-redacted (docs/interfaces.md §7) and keeps the summary of ``GET /debug/predictions``. The
server (``webhook.server.observing``) feeds them and reports: the metric, the log line, the Event.
"""
