"""DynamicResources (pkg/scheduler/framework/plugins/dynamicresources): the pod's ResourceClaims, and its extended
resources a DeviceClass backs, must be allocatable on the node. ``plugin`` holds PreFilter and Filter, ``allocator``
the structured allocator, ``extended`` the claim DRA-backed extended resources become."""
