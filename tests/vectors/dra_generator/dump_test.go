// Package incubating: this file is added to a scratch copy of k8s.io/dynamic-resource-allocation's incubating
// allocator package at build time (see generate.py); it is PreemptGuard's own code. It runs upstream's allocator test
// table (allocatortesting.TestAllocator) against upstream's incubating allocator, as the package's own test does,
// and records every case's inputs and upstream's results as test vectors for PreemptGuard's allocator.
package incubating

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured/internal"
	"k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

type recordedCase struct {
	Name           string                        `json:"name"`
	Features       internal.Features             `json:"features"`
	Node           *v1.Node                      `json:"node"`
	Claims         []*resourceapi.ResourceClaim  `json:"claims"`
	Slices         []*resourceapi.ResourceSlice  `json:"slices"`
	Classes        []*resourceapi.DeviceClass    `json:"classes"`
	Allocated      []string                      `json:"allocatedDevices"`
	SharedAllocated []string                     `json:"allocatedSharedDevices"`
	Results        []resourceapi.AllocationResult `json:"results"`
	Error          string                        `json:"error,omitempty"`
}

var (
	recordedMutex sync.Mutex
	recorded      []recordedCase
)

type recordingAllocator struct {
	internal.Allocator
	rc recordedCase
}

func (r *recordingAllocator) Allocate(ctx context.Context, node *v1.Node, claims []*resourceapi.ResourceClaim) ([]resourceapi.AllocationResult, error) {
	results, err := r.Allocator.Allocate(ctx, node, claims)
	rc := r.rc
	if underlier, ok := klog.FromContext(ctx).GetSink().(ktesting.Underlier); ok {
		if tb, ok := underlier.GetUnderlying().(testing.TB); ok {
			rc.Name = tb.Name()
		}
	}
	rc.Node = node
	for _, claim := range claims {
		rc.Claims = append(rc.Claims, claim.DeepCopy())
	}
	rc.Results = results
	if err != nil {
		rc.Error = err.Error()
	}
	recordedMutex.Lock()
	recorded = append(recorded, rc)
	recordedMutex.Unlock()
	return results, err
}

func TestDumpAllocatorVectors(t *testing.T) {
	newAllocator := func(ctx context.Context, features Features, allocatedState AllocatedState,
		classLister DeviceClassLister, slices []*resourceapi.ResourceSlice, celCache *cel.Cache) (internal.Allocator, error) {
		allocator, err := NewAllocator(ctx, features, allocatedState, classLister, slices, celCache)
		if err != nil {
			return nil, err
		}
		rc := recordedCase{Features: features}
		for _, slice := range slices {
			rc.Slices = append(rc.Slices, slice.DeepCopy())
		}
		if classes, err := classLister.List(); err == nil {
			for _, class := range classes {
				rc.Classes = append(rc.Classes, class.DeepCopy())
			}
		}
		for id := range allocatedState.AllocatedDevices {
			rc.Allocated = append(rc.Allocated, id.String())
		}
		for id := range allocatedState.AllocatedSharedDeviceIDs {
			rc.SharedAllocated = append(rc.SharedAllocated, id.String())
		}
		return &recordingAllocator{Allocator: allocator, rc: rc}, nil
	}
	allocatortesting.TestAllocator(t, SupportedFeatures, newAllocator)
	out, err := json.MarshalIndent(recorded, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(os.Getenv("DRA_VECTORS_OUT"), out, 0o644); err != nil {
		t.Fatal(err)
	}
}
