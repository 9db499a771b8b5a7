"""DefaultPreemption (pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go): the PostFilter
plugin, its policy (``default_preemption``) and the policy's bounded dry run for resource-only pods
(``bounded_dry_run``)."""
