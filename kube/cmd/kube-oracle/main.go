// Command kube-oracle runs kube-scheduler's default profile over given objects and prints
// what kube decides, so that placer's reading of kube's rules can be checked against kube's
// own code rather than against tables.
//
// It reads a JSON list of cases from stdin, each
//
//	{"nodes": [v1.Node...], "pods": [v1.Pod bound by spec.nodeName...], "pod": v1.Pod,
//	 "scoringStrategy": NodeResourcesFitArgs.scoringStrategy (optional)}
//
// applies the API server's defaulting to every object, and for the pending "pod" runs the
// default profile's PreFilter and Filter plugins over every node (as the scheduler's
// findNodesThatFitPod does, with no extender and no nominated pods), then PreScore and Score
// over the feasible nodes. It writes a JSON list of results, one per case:
//
//	{"feasible": [names, sorted], "message": FitError text or "",
//	 "statuses": {node: {"plugin": name, "code": name, "reasons": [...]}},
//	 "scores": {node: {"total": n, "plugins": {plugin: weighted normalised score}}}}
//
// This is how cluster-autoscaler's simulator drives the framework
// (frameworkruntime.NewFramework over a snapshot built from plain objects). DynamicResources
// is left out of the profile: it needs a DRA manager, and the cases carry no claims. For the
// same reason the DRAExtendedResource gate (beta, on in v1.36) is off: with it NodeResourcesFit
// asks the DRA manager whether a DeviceClass backs each extended resource it scores, and with
// no DeviceClasses (none here) kube-scheduler decides as it does with the gate off.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	corev1defaults "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

type inputCase struct {
	Nodes []*v1.Node `json:"nodes"`
	Pods  []*v1.Pod  `json:"pods"`
	Pod   *v1.Pod    `json:"pod"`
	// ScoringStrategy, when given, replaces NodeResourcesFit's (LeastAllocated over cpu and
	// memory); its fields are those of the v1 configuration (type, resources,
	// requestedToCapacityRatio.shape), decoded into the internal type by name.
	ScoringStrategy *config.ScoringStrategy `json:"scoringStrategy"`
}

type nodeStatus struct {
	Plugin  string   `json:"plugin"`
	Code    string   `json:"code"`
	Reasons []string `json:"reasons"`
}

type nodeScore struct {
	Total   int64            `json:"total"`
	Plugins map[string]int64 `json:"plugins"`
}

type result struct {
	Feasible []string              `json:"feasible"`
	Message  string                `json:"message"`
	Statuses map[string]nodeStatus `json:"statuses"`
	Scores   map[string]nodeScore  `json:"scores"`
	Error    string                `json:"error,omitempty"`
}

var scheme = runtime.NewScheme()

func main() {
	if err := corev1defaults.AddToScheme(scheme); err != nil {
		fail(err)
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{string(features.DRAExtendedResource): false}); err != nil {
		fail(err)
	}
	metrics.InitMetrics()
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	var cases []inputCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		fail(fmt.Errorf("stdin: %w", err))
	}
	profile, err := defaultProfile()
	if err != nil {
		fail(err)
	}
	results := make([]result, len(cases))
	for i := range cases {
		res, err := decide(profile, &cases[i])
		if err != nil {
			res = result{Error: err.Error()}
		}
		results[i] = res
	}
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(results); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kube-oracle:", err)
	os.Exit(1)
}

// defaultProfile is kube-scheduler's default profile (v1 defaults converted to the internal
// configuration, as `latest.Default` gives it) without DynamicResources.
func defaultProfile() (*config.KubeSchedulerProfile, error) {
	cfg, err := latest.Default()
	if err != nil {
		return nil, err
	}
	profile := cfg.Profiles[0]
	drop := func(set *config.PluginSet) {
		kept := set.Enabled[:0]
		for _, p := range set.Enabled {
			if p.Name != names.DynamicResources {
				kept = append(kept, p)
			}
		}
		set.Enabled = kept
	}
	for _, set := range []*config.PluginSet{
		&profile.Plugins.MultiPoint, &profile.Plugins.PreEnqueue, &profile.Plugins.PreFilter,
		&profile.Plugins.Filter, &profile.Plugins.PostFilter, &profile.Plugins.PreScore,
		&profile.Plugins.Score, &profile.Plugins.Reserve, &profile.Plugins.PreBind,
	} {
		drop(set)
	}
	return &profile, nil
}

func decide(profile *config.KubeSchedulerProfile, c *inputCase) (result, error) {
	if c.Pod == nil {
		return result{}, fmt.Errorf("a case without \"pod\"")
	}
	for _, n := range c.Nodes {
		scheme.Default(n)
	}
	for _, p := range c.Pods {
		scheme.Default(p)
	}
	scheme.Default(c.Pod)
	if c.ScoringStrategy != nil {
		profile = withScoringStrategy(profile, c.ScoringStrategy)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snapshot := cache.NewSnapshot(c.Pods, c.Nodes)
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	fw, err := frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), profile,
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithClientSet(client),
	)
	if err != nil {
		return result{}, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	res := result{Feasible: []string{}, Statuses: map[string]nodeStatus{}, Scores: map[string]nodeScore{}}
	pod := c.Pod
	diagnosis := framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
	allNodes, err := snapshot.NodeInfos().List()
	if err != nil {
		return result{}, err
	}
	fitError := func() string {
		fe := &framework.FitError{Pod: pod, NumAllNodes: len(allNodes), Diagnosis: diagnosis}
		return fe.Error()
	}
	state := framework.NewCycleState()
	preRes, status, unscheduled := fw.RunPreFilterPlugins(ctx, state, pod)
	diagnosis.UnschedulablePlugins = unscheduled
	if !status.IsSuccess() {
		if !status.IsRejected() {
			return result{}, status.AsError()
		}
		diagnosis.NodeToStatus.SetAbsentNodesStatus(status)
		diagnosis.PreFilterMsg = status.Message()
		diagnosis.AddPluginStatus(status)
		for _, n := range allNodes {
			res.Statuses[n.Node().Name] = statusOf(status)
		}
		res.Message = fitError()
		return res, nil
	}
	nodes := allNodes
	if !preRes.AllNodes() {
		nodes = nil
		absent := fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sets.List(unscheduled)))
		diagnosis.NodeToStatus.SetAbsentNodesStatus(absent)
		for _, n := range allNodes {
			if preRes.NodeNames.Has(n.Node().Name) {
				nodes = append(nodes, n)
			} else {
				res.Statuses[n.Node().Name] = statusOf(absent)
			}
		}
	}
	var feasible []fwk.NodeInfo
	for _, n := range nodes {
		st := fw.RunFilterPlugins(ctx, state, pod, n)
		if st.Code() == fwk.Error {
			return result{}, st.AsError()
		}
		if st.IsSuccess() {
			feasible = append(feasible, n)
			res.Feasible = append(res.Feasible, n.Node().Name)
			continue
		}
		diagnosis.NodeToStatus.Set(n.Node().Name, st)
		diagnosis.AddPluginStatus(st)
		res.Statuses[n.Node().Name] = statusOf(st)
	}
	sort.Strings(res.Feasible)
	if len(feasible) == 0 {
		res.Message = fitError()
		return res, nil
	}
	if st := fw.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
		return result{}, st.AsError()
	}
	scores, st := fw.RunScorePlugins(ctx, state, pod, feasible)
	if !st.IsSuccess() {
		return result{}, st.AsError()
	}
	for _, s := range scores {
		ns := nodeScore{Total: s.TotalScore, Plugins: map[string]int64{}}
		for _, p := range s.Scores {
			ns.Plugins[p.Name] = p.Score
		}
		res.Scores[s.Name] = ns
	}
	return res, nil
}

// withScoringStrategy is profile with NodeResourcesFit scoring by strategy (its other
// arguments kept).
func withScoringStrategy(profile *config.KubeSchedulerProfile, strategy *config.ScoringStrategy) *config.KubeSchedulerProfile {
	copied := *profile
	copied.PluginConfig = make([]config.PluginConfig, len(profile.PluginConfig))
	for i, pc := range profile.PluginConfig {
		if args, ok := pc.Args.(*config.NodeResourcesFitArgs); ok && pc.Name == names.NodeResourcesFit {
			fit := args.DeepCopy()
			fit.ScoringStrategy = strategy
			pc.Args = fit
		}
		copied.PluginConfig[i] = pc
	}
	return &copied
}

func statusOf(st *fwk.Status) nodeStatus {
	reasons := st.Reasons()
	if reasons == nil {
		reasons = []string{}
	}
	return nodeStatus{Plugin: st.Plugin(), Code: st.Code().String(), Reasons: reasons}
}
