"""DRA-backed extended resources (DRAExtendedResource, GA and on in v1.37; extendeddynamicresources.go): a
container's request of an extended resource that no node advertises (allocatable 0) but a DeviceClass names
(``spec.extendedResourceName``, or ``deviceclass.resource.kubernetes.io/<class>``) becomes a device request of a
claim the scheduler creates for the pod; NodeResourcesFit leaves such a resource to DynamicResources.

``device_requests`` is ``createRequestsAndMappings``: one request per long-lived container (``container-<i>-request-
<j>``, j the resource's index among the container's sorted request names), and for init containers only the largest
extra count they need beyond the long-lived containers that follow them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from webhook.cluster.devices import EXACT_COUNT, ContainerDeviceRequests, DeviceClass, DeviceRequest, ExactDeviceRequest


def device_requests(containers: tuple[ContainerDeviceRequests, ...], extended: Mapping[str, int],
                    class_of: Callable[[str], DeviceClass | None]) -> tuple[DeviceRequest, ...]:
    """The special claim's requests for the ``extended`` resources the node leaves to DRA, sorted by name."""
    long_lived = [c for c in containers if not c.init or c.sidecar]
    short_lived = [c for c in containers if c.init and not c.sidecar]
    requests: list[DeviceRequest] = []
    for resource in sorted(extended):
        device_class = class_of(resource)
        if device_class is None:
            continue
        counts: dict[int, tuple[str, int]] = {}  # container index -> (request name, count)
        for container in long_lived:
            made = _request(container, resource)
            if made is not None:
                counts[container.index] = made
        biggest: tuple[str, int] | None = None
        for container in short_lived:
            want = container.requests.get(resource, 0)
            if not want:
                continue
            # Devices of the long-lived containers after this init container are reused first.
            reused = 0
            for index, (_, count) in sorted(counts.items()):
                if index >= container.index:
                    reused += count
                    if reused >= want:
                        break
            if reused >= want:
                continue
            made = _request(container, resource, want - reused)
            if made is not None and (biggest is None or biggest[1] < made[1]):
                biggest = made
        found = [*([biggest] if biggest is not None else []), *(counts[i] for i in sorted(counts))]
        requests.extend(DeviceRequest(name, ExactDeviceRequest(name, device_class.name, (), EXACT_COUNT, count))
                        for name, count in found)
    return tuple(sorted(requests, key=lambda r: r.name))


def _request(container: ContainerDeviceRequests, resource: str, count: int | None = None) -> tuple[str, int] | None:
    want = container.requests.get(resource, 0) if count is None else count
    if not want:
        return None
    names = sorted(container.requests)
    return f"container-{container.index}-request-{names.index(resource)}", want
