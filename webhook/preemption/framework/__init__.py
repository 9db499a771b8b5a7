"""The scheduler framework the plugins plug into, as upstream's pkg/scheduler/framework: statuses, ``NodeInfo``,
``CycleState``, the plugin interfaces, the runtime that runs a profile's plugins (the Filter runner with nominated
pods), the preemption ``Evaluator`` and its policy seam, and the indexed view of the cluster the plugins read."""
