"""Benchmark: a large cluster ingested through the informer path from the fake API server.

The fake API server (tests/sources/fake_apiserver.py) runs in a child process, so neither its memory
nor its JSON encoding is counted against the informer. Prints:

* heap growth of the ingested ClusterState (tracemalloc, from a fresh process) and per pod; target
  <= 150 MB (taken as 150 MiB) for 150,000 pods
* full-sync time (paginated LIST of every kind into the indexed state, tracemalloc off)
* pod event throughput: a stream of ADDED/MODIFIED/DELETED pod events replayed to the watch; target
  >= 10,000 events/s on one core (the informer is one asyncio thread; CPU seconds are shown too). With
  ``--observe N`` the live observer's tracker (webhook/observe/tracker.py) listens to the pod changes while
  following N predictions, as a busy server does

Usage: python bench/cluster_state.py [--nodes 5000] [--pods-per-node 30] [--events 50000] [--observe 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import random
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT, ROOT / "bench", ROOT / "tests" / "sources"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from fake_apiserver import FakeApiServer  # noqa: E402

from webhook.observe.compare import Predicted  # noqa: E402
from webhook.observe.tracker import PredictionRecord, PredictionTracker  # noqa: E402
from webhook.sources.informer import RESOURCE_KINDS, InformerSettings  # noqa: E402
from webhook.sources.kube_source import KubernetesSource  # noqa: E402

TOKEN = "bench-token"
HEAP_TARGET_BYTES = 150 * 1024 * 1024
HEAP_TARGET_PODS = 150_000
EVENTS_TARGET_PER_SECOND = 10_000


# ---- the fake API server side (child process) ---------------------------------------------------
def pod_event_stream(server: FakeApiServer, count: int, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """``count`` pod events over the server's pods: 60% MODIFIED, 20% ADDED, 20% DELETED."""
    rng = random.Random(seed)
    pods = server.objects["pods"]
    live = list(pods)
    node_names = list(server.objects["nodes"]) or [""]
    modified: dict[str, dict[str, Any]] = {}
    events: list[tuple[str, dict[str, Any]]] = []
    for i in range(count):
        roll = rng.random()
        if roll < 0.6 and live:
            key = rng.choice(live)
            base = modified.get(key) or pods[key].raw
            meta = dict(base["metadata"])
            meta["labels"] = {**(meta.get("labels") or {}), "bench-revision": str(i)}
            obj = {"kind": "Pod", **base, "metadata": meta}
            modified[key] = obj
            events.append(("MODIFIED", obj))
        elif roll < 0.8 or not live:
            template: dict[str, Any] = {"spec": {"containers": []}}
            if live:
                key = rng.choice(live)
                template = modified.get(key) or pods[key].raw
            meta = {"name": f"bench-new-{i}", "namespace": template.get("metadata", {}).get("namespace", "default"),
                    "labels": {"app": "bench-new"}}
            spec = {**template.get("spec", {}), "nodeName": rng.choice(node_names)}
            obj = {"kind": "Pod", **template, "metadata": meta, "spec": spec}
            new_key = f"{meta['namespace']}/{meta['name']}"
            live.append(new_key)
            modified[new_key] = obj
            events.append(("ADDED", obj))
        else:
            index = rng.randrange(len(live))
            live[index], live[-1] = live[-1], live[index]
            key = live.pop()
            namespace, _, name = key.partition("/")
            events.append(("DELETED", {"kind": "Pod", "metadata": {"name": name, "namespace": namespace}}))
    return events


def serve_cluster(conn: Connection, nodes: int, pods_per_node: int, seed: int) -> None:
    asyncio.run(_serve_cluster(conn, nodes, pods_per_node, seed))


async def _serve_cluster(conn: Connection, nodes: int, pods_per_node: int, seed: int) -> None:
    from clustergen import generate_cluster  # bench/clustergen.py, shared with the other benches

    started = time.perf_counter()
    objects = generate_cluster(nodes, pods_per_node, seed=seed)
    server = FakeApiServer(token=TOKEN)
    server.load(objects)
    del objects
    await server.start()
    loop = asyncio.get_running_loop()
    counts = {plural: len(stored) for plural, stored in server.objects.items()}
    conn.send(("ready", server.port, counts, time.perf_counter() - started))
    while True:
        command = await loop.run_in_executor(None, conn.recv)
        if command[0] == "events":
            events = pod_event_stream(server, command[1], seed)
            for event_type, obj in events:
                if event_type == "ADDED":
                    server.create(obj)
                elif event_type == "MODIFIED":
                    server.update(obj)
                else:
                    server.delete("Pod", obj["metadata"]["name"], obj["metadata"]["namespace"])
            mix = {t: sum(1 for e, _ in events if e == t) for t in ("ADDED", "MODIFIED", "DELETED")}
            conn.send(("applied", str(server.resource_version), len(server.objects["pods"]), mix))
        else:
            await server.stop()
            conn.send(("stopped",))
            return


# ---- the informer side (this process) -----------------------------------------------------------
async def wait_until(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark step timed out")
        await asyncio.sleep(0.002)


async def synced_source(kubeconfig: Path, settings: InformerSettings) -> tuple[KubernetesSource, float]:
    source = KubernetesSource(kubeconfig=str(kubeconfig), settings=settings)
    started = time.perf_counter()
    await source.start()
    if not await source.wait_until_ready(timeout=600):
        raise TimeoutError(source.readiness_reason())
    return source, time.perf_counter() - started


def observe(source: KubernetesSource, predictions: int) -> PredictionTracker:
    """The tracker on the source's pod changes, following predictions of pods that never show up."""
    tracker = PredictionTracker(lambda decision: None, window_seconds=3600, max_predictions=max(predictions, 1))
    for i in range(predictions):
        tracker.follow(PredictionRecord(f"bench-{i}", "default", f"p-{i}", 1000, Predicted("Fits", "node-0")))
    source.state.pod_listener = tracker.pod_changed
    return tracker


async def measure(conn: Connection, port: int, events: int, page_size: int, observed: int = 0) -> dict[str, Any]:
    settings = InformerSettings(page_size=page_size, request_timeout_seconds=300)
    loop = asyncio.get_running_loop()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        fake = FakeApiServer(token=TOKEN)
        fake.port = port
        kubeconfig = fake.write_kubeconfig(Path(tmp))

        # 1. Heap of the ingested state, traced from an empty process state.
        gc.collect()
        tracemalloc.start()
        source, traced_sync = await synced_source(kubeconfig, settings)
        await source.stop()
        gc.collect()
        heap, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        results.update(heap=heap, heap_peak=peak, traced_sync=traced_sync, counts=source.state.counts())
        del source
        gc.collect()

        # 2. Full-sync time without tracing.
        source, sync_seconds = await synced_source(kubeconfig, settings)
        results.update(sync_seconds=sync_seconds)

        # 3. Pod events: the pod watch is paused, the server records the events in its history, then
        #    the informer resumes from its resourceVersion and the fake replays them at full speed.
        pods = next(i for i in source.informers if i.kind == "Pod")
        if observed:
            observe(source, observed)
        await pods.stop()
        conn.send(("events", events))
        _, final_version, pod_count, mix = await loop.run_in_executor(None, conn.recv)
        applied_before = pods.events_applied
        wall, cpu = time.perf_counter(), time.process_time()
        pods.start()
        await wait_until(lambda: pods.resource_version == final_version, timeout=600)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        results.update(events=pods.events_applied - applied_before, event_wall=wall, event_cpu=cpu, mix=mix,
                       pods_expected=pod_count, pods_held=len(source.state.pods))
        await source.stop()
    return results


def report(args: argparse.Namespace, counts: dict[str, int], generate_seconds: float, r: dict[str, Any]) -> None:
    pods = r["counts"]["Pod"]
    mib = 1024 * 1024
    heap_budget = HEAP_TARGET_BYTES * pods / HEAP_TARGET_PODS
    rate = r["events"] / r["event_wall"]
    cpu_rate = r["events"] / r["event_cpu"] if r["event_cpu"] else float("inf")
    print(f"cluster: {args.nodes} nodes x {args.pods_per_node} pods/node (seed {args.seed}); "
          f"served objects {counts}; generated+loaded in {generate_seconds:.1f}s")
    print(f"ingested: {r['counts']}")
    print(f"heap growth of the ingested state (tracemalloc): {r['heap'] / mib:.1f} MiB "
          f"({r['heap'] / max(pods, 1):.0f} B per pod, all kinds included); peak during sync "
          f"{r['heap_peak'] / mib:.1f} MiB; budget {heap_budget / mib:.1f} MiB "
          f"(150 MB per 150,000 pods) -> {'OK' if r['heap'] <= heap_budget else 'OVER'}")
    print(f"full sync (paginated LIST of {len(RESOURCE_KINDS)} kinds, page size {args.page_size}): "
          f"{r['sync_seconds']:.2f}s "
          f"({pods / r['sync_seconds']:.0f} pods/s; {r['traced_sync']:.2f}s under tracemalloc)")
    print(f"pod events: {r['events']} applied {r['mix']} in {r['event_wall']:.2f}s wall, {r['event_cpu']:.2f}s CPU "
          f"-> {rate:.0f} events/s wall, {cpu_rate:.0f} events/s per CPU second"
          f"{f' (observer following {args.observe} predictions)' if args.observe else ''}; target "
          f">= {EVENTS_TARGET_PER_SECOND}/s -> {'OK' if rate >= EVENTS_TARGET_PER_SECOND else 'UNDER'}")
    status = "OK" if r["pods_held"] == r["pods_expected"] else "MISMATCH"
    print(f"consistency: informer holds {r['pods_held']} pods, server has {r['pods_expected']} -> {status}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--observe", type=int, default=0, metavar="N",
                        help="attach the live observer's tracker, following N predictions, during the event stream")
    args = parser.parse_args(argv)

    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    server = context.Process(target=serve_cluster, args=(child, args.nodes, args.pods_per_node, args.seed),
                             daemon=True)
    server.start()
    try:
        _, port, counts, generate_seconds = parent.recv()
        results = asyncio.run(measure(parent, port, args.events, args.page_size, args.observe))
        report(args, counts, generate_seconds, results)
        parent.send(("stop",))
        parent.recv()
    finally:
        server.join(timeout=10)
        if server.is_alive():
            server.terminate()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
