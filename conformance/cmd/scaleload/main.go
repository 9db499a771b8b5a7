// Command scaleload puts a generated cluster into a real kube-apiserver through its API, as fast as the API
// allows, and then streams pod churn at a steady rate: bench/scale.py drives it (issue 29).
//
//	scaleload load  -kubeconfig K [-workers 48] [-etcd http://127.0.0.1:2379] < objects.ndjson
//	scaleload churn -kubeconfig K -rate 500 -duration 20s -nodes 1000 -out events.ndjson
//	scaleload watch -kubeconfig K -out arrivals.ndjson
//
// load reads one API object per line (PriorityClass, Namespace, Node, Pod, PodDisruptionBudget, in the order
// given; each run of one kind is finished before the next kind starts, so namespaces exist before their pods),
// creates each one and writes its status through the status subresource, as a kubelet or a controller would:
// create drops the status (the registries' PrepareForCreate). A namespace also gets its "default"
// ServiceAccount (the ServiceAccount admission plugin refuses pods without it; no controller manager runs here).
// Requests go out in protobuf, without client-side rate limit. It prints one JSON object: per kind the objects,
// requests and seconds, and the totals.
//
// With -etcd, nodes and pods are written straight into etcd instead, as kube-apiserver stores them (protobuf in
// the storage version, under /registry/minions/NAME and /registry/pods/NAMESPACE/NAME), in transactions of
// txnOps puts: past admission and validation, so the input must carry what they would add (defaults, the pod's
// priority, the status). The API server's watch cache sees them arrive through its etcd watch and serves them:
// lists and watches stay real; only the write path is skipped, because it is 100 times slower on 2 cores.
//
// churn creates, updates and deletes bound pods at -rate writes per second for -duration or until SIGTERM (a
// third of each once its pool is full), and writes one JSON line per acknowledged write to -out: the operation, the resourceVersion
// the API server answered with, and the wall-clock times (Unix nanoseconds) the request was sent and answered.
// bench/scale.py compares those resourceVersions with the one the webhook's informer has applied (its
// preemptguard_informer_resource_version gauge) to measure the informer's lag. It prints a JSON summary.
//
// watch watches every pod from the API server's current resourceVersion, as the webhook's informer does (JSON,
// bookmarks) but doing nothing with an event, until SIGTERM, and writes one JSON line per event: its
// resourceVersion and the wall-clock time (Unix nanoseconds) it arrived. bench/scale.py holds the churn's writes
// against these arrivals as it holds them against the webhook's gauge: the part of the informer's lag that is the
// API server's own delivery. It prints a JSON summary (events, bookmarks, watches opened).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
)

const protobufType = "application/vnd.kubernetes.protobuf"

func main() {
	if len(os.Args) < 2 {
		fail("usage: scaleload load|churn|watch [flags]")
	}
	switch os.Args[1] {
	case "load":
		load(os.Args[2:])
	case "churn":
		churn(os.Args[2:])
	case "watch":
		watch(os.Args[2:])
	default:
		fail("unknown subcommand " + os.Args[1] + " (load, churn, watch)")
	}
}

func fail(message string) {
	fmt.Fprintln(os.Stderr, "scaleload: "+message)
	os.Exit(2)
}

func client(kubeconfig string, workers int) *kubernetes.Clientset {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fail(err.Error())
	}
	config.ContentType = protobufType
	config.AcceptContentTypes = protobufType + ",application/json"
	config.QPS = -1 // no client-side limit: the API server's own limits are what is measured
	config.Burst = workers
	config.UserAgent = "scaleload"
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		fail(err.Error())
	}
	return clientset
}

// ---- load -------------------------------------------------------------------------------------------------------

type object struct {
	Kind string `json:"kind"`
}

type kindFigures struct {
	Objects  int     `json:"objects"`
	Requests int64   `json:"requests"`
	Seconds  float64 `json:"seconds"`
}

type loader struct {
	api      *kubernetes.Clientset
	etcd     *clientv3.Client // nil: everything through the API
	requests atomic.Int64
}

// etcd's default --max-txn-ops is 128.
const txnOps = 128

func load(args []string) {
	flags := flag.NewFlagSet("load", flag.ExitOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the API server")
	workers := flags.Int("workers", 48, "requests in flight")
	etcdURL := flags.String("etcd", "", "write nodes and pods straight into this etcd (see the command's doc)")
	_ = flags.Parse(args)
	l := &loader{api: client(*kubeconfig, *workers)}
	if *etcdURL != "" {
		etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{*etcdURL}, DialTimeout: 10 * time.Second,
			MaxCallSendMsgSize: 16 << 20})
		if err != nil {
			fail(err.Error())
		}
		defer etcd.Close()
		l.etcd = etcd
	}
	reader := bufio.NewReaderSize(os.Stdin, 1<<20)
	figures := map[string]*kindFigures{}
	order := []string{}
	started := time.Now()
	var batch [][]byte
	batchKind := ""
	flush := func() {
		if len(batch) == 0 {
			return
		}
		began := time.Now()
		before := l.requests.Load()
		l.run(batchKind, batch, *workers)
		f := figures[batchKind]
		if f == nil {
			f = &kindFigures{}
			figures[batchKind] = f
			order = append(order, batchKind)
		}
		f.Objects += len(batch)
		f.Requests += l.requests.Load() - before
		f.Seconds += time.Since(began).Seconds()
		batch = nil
	}
	for {
		line, err := reader.ReadBytes('\n')
		if len(line) > 1 {
			var head object
			if jerr := json.Unmarshal(line, &head); jerr != nil {
				fail("bad input line: " + jerr.Error())
			}
			if head.Kind != batchKind || len(batch) >= 20000 {
				flush()
				batchKind = head.Kind
			}
			batch = append(batch, line)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			fail(err.Error())
		}
	}
	flush()
	total := time.Since(started).Seconds()
	objects := 0
	for _, f := range figures {
		objects += f.Objects
	}
	out, _ := json.Marshal(map[string]any{
		"kinds": figures, "order": order, "objects": objects, "requests": l.requests.Load(), "seconds": total,
		"objectsPerSecond": float64(objects) / total, "requestsPerSecond": float64(l.requests.Load()) / total,
	})
	fmt.Println(string(out))
}

// run creates every object of one kind with “workers“ requests in flight.
func (l *loader) run(kind string, lines [][]byte, workers int) {
	if l.etcd != nil && (kind == "Node" || kind == "Pod") {
		l.store(kind, lines, workers)
		return
	}
	jobs := make(chan []byte)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for line := range jobs {
				if err := l.create(kind, line); err != nil && firstErr.Load() == nil {
					firstErr.Store(err)
				}
			}
		}()
	}
	for _, line := range lines {
		if firstErr.Load() != nil {
			break
		}
		jobs <- line
	}
	close(jobs)
	wg.Wait()
	if err := firstErr.Load(); err != nil {
		fail(fmt.Sprintf("%s: %v", kind, err))
	}
}

// store writes nodes or pods into etcd, txnOps per transaction, “workers“ transactions in flight.
func (l *loader) store(kind string, lines [][]byte, workers int) {
	codec := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	batches := make(chan [][]byte)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range batches {
				ops := make([]clientv3.Op, 0, len(batch))
				for _, line := range batch {
					key, value, err := storedForm(codec, kind, line)
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					ops = append(ops, clientv3.OpPut(key, string(value)))
				}
				if _, err := l.etcd.Txn(context.Background()).Then(ops...).Commit(); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				l.requests.Add(1)
			}
		}()
	}
	for start := 0; start < len(lines) && firstErr.Load() == nil; start += txnOps {
		batches <- lines[start:min(start+txnOps, len(lines))]
	}
	close(batches)
	wg.Wait()
	if err := firstErr.Load(); err != nil {
		fail(fmt.Sprintf("%s: %v", kind, err))
	}
}

// storedForm is an object as kube-apiserver keeps it in etcd: protobuf with its storage apiVersion and kind, a
// uid and a creation time, no resourceVersion (the etcd revision is the object's resourceVersion).
func storedForm(codec runtime.Encoder, kind string, line []byte) (string, []byte, error) {
	var obj runtime.Object
	var meta *metav1.ObjectMeta
	var key string
	switch kind {
	case "Node":
		node := &corev1.Node{}
		if err := json.Unmarshal(line, node); err != nil {
			return "", nil, err
		}
		obj, meta, key = node, &node.ObjectMeta, "/registry/minions/"+node.Name
	default:
		pod := &corev1.Pod{}
		if err := json.Unmarshal(line, pod); err != nil {
			return "", nil, err
		}
		obj, meta, key = pod, &pod.ObjectMeta, "/registry/pods/"+pod.Namespace+"/"+pod.Name
	}
	obj.GetObjectKind().SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	meta.ResourceVersion = ""
	if meta.UID == "" {
		meta.UID = types.UID(uuid.NewString())
	}
	if meta.CreationTimestamp.IsZero() {
		meta.CreationTimestamp = metav1.Now()
	}
	var out bytes.Buffer
	if err := codec.Encode(obj, &out); err != nil {
		return "", nil, err
	}
	return key, out.Bytes(), nil
}

// retry repeats a request the API server refused for load (429, 5xx, timeouts) with a short backoff.
func retry(do func() error) error {
	var err error
	for attempt := range 8 {
		if err = do(); err == nil || !(apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) ||
			apierrors.IsTimeout(err) || apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)) {
			return err
		}
		time.Sleep(time.Duration(50<<attempt) * time.Millisecond)
	}
	return err
}

func (l *loader) create(kind string, line []byte) error {
	ctx := context.Background()
	create := metav1.CreateOptions{}
	update := metav1.UpdateOptions{}
	count := func(err error) error { l.requests.Add(1); return err }
	switch kind {
	case "PriorityClass":
		var pc schedulingv1.PriorityClass
		if err := json.Unmarshal(line, &pc); err != nil {
			return err
		}
		return retry(func() error {
			_, err := l.api.SchedulingV1().PriorityClasses().Create(ctx, &pc, create)
			return count(err)
		})
	case "Namespace":
		var ns corev1.Namespace
		if err := json.Unmarshal(line, &ns); err != nil {
			return err
		}
		if err := retry(func() error { _, err := l.api.CoreV1().Namespaces().Create(ctx, &ns, create); return count(err) }); err != nil {
			return err
		}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns.Name}}
		return retry(func() error {
			_, err := l.api.CoreV1().ServiceAccounts(ns.Name).Create(ctx, sa, create)
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
			return count(err)
		})
	case "Node":
		var node corev1.Node
		if err := json.Unmarshal(line, &node); err != nil {
			return err
		}
		status, taints := node.Status, node.Spec.Taints
		var created *corev1.Node
		if err := retry(func() (err error) {
			created, err = l.api.CoreV1().Nodes().Create(ctx, &node, create)
			return count(err)
		}); err != nil {
			return err
		}
		// The TaintNodesByCondition admission plugin adds a not-ready taint on create (a kubelet would clear it).
		if len(created.Spec.Taints) != len(taints) {
			created.Spec.Taints = taints
			if err := retry(func() (err error) {
				created, err = l.api.CoreV1().Nodes().Update(ctx, created, update)
				return count(err)
			}); err != nil {
				return err
			}
		}
		created.Status = status
		return retry(func() error {
			_, err := l.api.CoreV1().Nodes().UpdateStatus(ctx, created, update)
			return count(err)
		})
	case "Pod":
		var pod corev1.Pod
		if err := json.Unmarshal(line, &pod); err != nil {
			return err
		}
		status := pod.Status
		var created *corev1.Pod
		if err := retry(func() (err error) {
			created, err = l.api.CoreV1().Pods(pod.Namespace).Create(ctx, &pod, create)
			return count(err)
		}); err != nil {
			return err
		}
		status.QOSClass = created.Status.QOSClass // set by the API server; status updates may not change it
		created.Status = status
		return retry(func() error {
			_, err := l.api.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, created, update)
			return count(err)
		})
	case "PodDisruptionBudget":
		var pdb policyv1.PodDisruptionBudget
		if err := json.Unmarshal(line, &pdb); err != nil {
			return err
		}
		status := pdb.Status
		var created *policyv1.PodDisruptionBudget
		if err := retry(func() (err error) {
			created, err = l.api.PolicyV1().PodDisruptionBudgets(pdb.Namespace).Create(ctx, &pdb, create)
			return count(err)
		}); err != nil {
			return err
		}
		created.Status = status
		return retry(func() error {
			_, err := l.api.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, created, update)
			return count(err)
		})
	}
	return fmt.Errorf("unsupported kind %q", kind)
}

// ---- churn ------------------------------------------------------------------------------------------------------

type record struct {
	Op   string `json:"op"`
	RV   int64  `json:"rv"`
	Sent int64  `json:"sent"`
	Ack  int64  `json:"ack"`
}

type churner struct {
	api       *kubernetes.Clientset
	resource  string // "pods", or "configmaps": the same writes on objects a webhook does not watch
	namespace string
	prefix    string
	nodes     int
	pool      int
	mu        sync.Mutex
	live      []string // churn pods that exist (created, not yet deleted)
	next      int
	turn      int
}

func churn(args []string) {
	flags := flag.NewFlagSet("churn", flag.ExitOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the API server")
	rate := flags.Float64("rate", 500, "writes per second")
	duration := flags.Duration("duration", 20*time.Second, "how long to churn")
	nodes := flags.Int("nodes", 1000, "pods are bound to node-00000 .. node-(N-1)")
	namespace := flags.String("namespace", "team-00", "namespace of the churn pods")
	prefix := flags.String("prefix", "churn", "name prefix of the churn pods (one per run)")
	pool := flags.Int("pool", 500, "churn pods kept alive once the pool is full")
	workers := flags.Int("workers", 64, "requests in flight at most")
	outPath := flags.String("out", "", "JSON lines, one per acknowledged write")
	resource := flags.String("resource", "pods", "pods, or configmaps (the same load on the API server, unwatched)")
	_ = flags.Parse(args)
	if *resource != "pods" && *resource != "configmaps" {
		fail("-resource: pods or configmaps, not " + *resource)
	}
	c := &churner{api: client(*kubeconfig, *workers), resource: *resource, namespace: *namespace, prefix: *prefix,
		nodes: *nodes, pool: *pool}
	out := os.Stdout
	if *outPath != "" {
		file, err := os.Create(*outPath)
		if err != nil {
			fail(err.Error())
		}
		defer file.Close()
		out = file
	}
	writer := bufio.NewWriter(out)
	records := make(chan record, 4096)
	var written sync.WaitGroup
	written.Add(1)
	var latencies []float64
	ops := map[string]int{}
	go func() {
		defer written.Done()
		encoder := json.NewEncoder(writer)
		for r := range records {
			_ = encoder.Encode(r)
			latencies = append(latencies, float64(r.Ack-r.Sent)/1e6)
			ops[r.Op]++
		}
	}()
	slots := make(chan struct{}, *workers)
	var inFlight sync.WaitGroup
	var errors, dropped atomic.Int64
	var lastError atomic.Value
	interval := time.Duration(float64(time.Second) / *rate)
	// SIGTERM ends the churn early, as the deadline would (bench/scale.py churns until a restarted replica is
	// ready and then some): the writes in flight are awaited and the summary printed.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	started := time.Now()
	deadline := started.Add(*duration)
	sent := 0
churning:
	for now := time.Now(); now.Before(deadline); now = time.Now() {
		due := started.Add(time.Duration(sent) * interval)
		select {
		case <-stop:
			break churning
		default:
		}
		if due.After(now) {
			select {
			case <-stop:
				break churning
			case <-time.After(due.Sub(now)):
			}
		}
		select {
		case slots <- struct{}{}:
		default:
			dropped.Add(1) // every slot busy: the API server is not keeping up with the rate
			sent++
			continue
		}
		sent++
		op, name := c.pick()
		inFlight.Add(1)
		go func() {
			defer inFlight.Done()
			defer func() { <-slots }()
			r, err := c.write(op, name)
			if err != nil {
				errors.Add(1)
				lastError.Store(err.Error())
				return
			}
			records <- r
		}()
	}
	inFlight.Wait()
	elapsed := time.Since(started).Seconds()
	close(records)
	written.Wait()
	_ = writer.Flush()
	sort.Float64s(latencies)
	summary := map[string]any{
		"target": *rate, "seconds": elapsed, "acknowledged": len(latencies), "errors": errors.Load(),
		"dropped": dropped.Load(), "achieved": float64(len(latencies)) / elapsed, "ops": ops,
		"apiLatencyMs": map[string]float64{"p50": quantile(latencies, 0.5), "p99": quantile(latencies, 0.99)},
	}
	if e := lastError.Load(); e != nil {
		summary["lastError"] = e
	}
	text, _ := json.Marshal(summary)
	fmt.Println(string(text))
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted)-1)+0.5))]
}

// pick chooses the next write: creates until the pool is full, then create, update and delete in turn.
func (c *churner) pick() (string, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.live) < c.pool || len(c.live) == 0 {
		c.next++
		name := c.prefix + "-" + strconv.Itoa(c.next)
		c.live = append(c.live, name)
		return "create", name
	}
	c.turn++
	switch c.turn % 3 {
	case 0:
		c.next++
		name := c.prefix + "-" + strconv.Itoa(c.next)
		c.live = append(c.live, name)
		return "create", name
	case 1:
		return "update", c.live[rand.IntN(len(c.live))]
	default:
		// The oldest pod goes: it was acknowledged long ago, so the delete never overtakes its create.
		name := c.live[0]
		c.live = c.live[1:]
		return "delete", name
	}
}

func (c *churner) write(op, name string) (record, error) {
	ctx := context.Background()
	pods := c.api.CoreV1().Pods(c.namespace)
	sent := time.Now().UnixNano()
	var meta metav1.Object
	var err error
	switch op {
	case "create":
		if c.resource == "configmaps" {
			var made *corev1.ConfigMap
			made, err = c.api.CoreV1().ConfigMaps(c.namespace).Create(ctx, c.configMap(name), metav1.CreateOptions{})
			meta = made
		} else {
			var pod *corev1.Pod
			pod, err = pods.Create(ctx, c.pod(name), metav1.CreateOptions{})
			meta = pod
		}
	case "update":
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"churn-generation":"%d"}}}`, sent))
		if c.resource == "configmaps" {
			var made *corev1.ConfigMap
			made, err = c.api.CoreV1().ConfigMaps(c.namespace).Patch(ctx, name, "application/merge-patch+json", patch,
				metav1.PatchOptions{})
			meta = made
		} else {
			var pod *corev1.Pod
			pod, err = pods.Patch(ctx, name, "application/merge-patch+json", patch, metav1.PatchOptions{})
			meta = pod
		}
	default:
		zero := int64(0) // bound pods wait for a kubelet otherwise; none runs here
		// The typed client's Delete drops the answer; the REST call keeps it: the pod as deleted, whose
		// resourceVersion is the deletion's (k8s.io/apiserver/pkg/storage/etcd3/store.go, conditionalDelete).
		var answer any
		answer, err = c.api.CoreV1().RESTClient().Delete().
			Namespace(c.namespace).Resource(c.resource).Name(name).
			Body(&metav1.DeleteOptions{GracePeriodSeconds: &zero}).Do(ctx).Get()
		if err == nil {
			var ok bool
			if meta, ok = answer.(metav1.Object); !ok {
				err = fmt.Errorf("delete %s: answer %T", name, answer)
			}
		}
	}
	ack := time.Now().UnixNano()
	if err != nil {
		return record{}, err
	}
	rv, err := strconv.ParseInt(meta.GetResourceVersion(), 10, 64)
	if err != nil {
		return record{}, fmt.Errorf("resourceVersion %q: %w", meta.GetResourceVersion(), err)
	}
	return record{Op: op, RV: rv, Sent: sent, Ack: ack}, nil
}

// configMap is the unwatched twin of a churn pod: about the size of one as the API server stores it.
func (c *churner) configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.namespace,
			Labels: map[string]string{"app": "churn", "tier": "batch-low"}},
		Data: map[string]string{"payload": strings.Repeat("x", 1024)},
	}
}

func (c *churner) pod(name string) *corev1.Pod {
	node := fmt.Sprintf("node-%05d", rand.IntN(c.nodes))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.namespace,
			Labels: map[string]string{"app": "churn", "tier": "batch-low"}},
		Spec: corev1.PodSpec{
			NodeName:          node,
			PriorityClassName: "batch-low",
			Containers: []corev1.Container{{Name: "main", Image: "registry.example/churn:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("10m"),
					corev1.ResourceMemory: resource.MustParse("16Mi")}}}},
		},
	}
}

// ---- watch ------------------------------------------------------------------------------------------------------

type arrival struct {
	RV int64 `json:"rv"`
	At int64 `json:"at"`
}

func watch(args []string) {
	flags := flag.NewFlagSet("watch", flag.ExitOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the API server")
	outPath := flags.String("out", "", "JSON lines, one per event")
	_ = flags.Parse(args)
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err.Error())
	}
	config.QPS = -1
	config.UserAgent = "scaleload-watch" // JSON, as the webhook's informer reads its watch
	api, err := kubernetes.NewForConfig(config)
	if err != nil {
		fail(err.Error())
	}
	file, err := os.Create(*outPath)
	if err != nil {
		fail(err.Error())
	}
	defer file.Close()
	writer := bufio.NewWriter(file)
	ctx, cancel := context.WithCancel(context.Background())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-stop; cancel() }()
	// A list of one pod gives the current resourceVersion without the 450,000 synthetic ADDED events a watch
	// from "" or "0" would send first.
	listed, err := api.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		fail("list: " + err.Error())
	}
	version := listed.ResourceVersion
	events, bookmarks, watches := 0, 0, 0
	encoder := json.NewEncoder(writer)
	fmt.Fprintln(os.Stderr, "scaleload: watching from", version) // bench/scale.py waits for this line
	for ctx.Err() == nil {
		watches++
		w, err := api.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{ResourceVersion: version,
			AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			fail("watch: " + err.Error())
		}
		for event := range w.ResultChan() {
			at := time.Now().UnixNano()
			if event.Type == "ERROR" {
				if ctx.Err() != nil {
					break // the stream cut by SIGTERM, reported as an error event by client-go's StreamWatcher
				}
				fail(fmt.Sprintf("watch: error event %v", event.Object))
			}
			meta, ok := event.Object.(metav1.Object)
			if !ok {
				fail(fmt.Sprintf("watch: %s event of %T", event.Type, event.Object))
			}
			version = meta.GetResourceVersion()
			if event.Type == "BOOKMARK" {
				bookmarks++
				continue
			}
			rv, err := strconv.ParseInt(version, 10, 64)
			if err != nil {
				fail(fmt.Sprintf("resourceVersion %q: %v", version, err))
			}
			events++
			_ = encoder.Encode(arrival{RV: rv, At: at})
		}
		w.Stop()
	}
	_ = writer.Flush()
	text, _ := json.Marshal(map[string]any{"events": events, "bookmarks": bookmarks, "watches": watches})
	fmt.Println(string(text))
}
