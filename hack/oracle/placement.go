// The `placement` mode: which nodes a Pod's own spec lets it land on, by the scheduler's own code
// (k8s.io/component-helpers/scheduling/corev1/nodeaffinity GetRequiredNodeAffinity: nodeSelector and required
// node affinity; the TaintToleration filter: FindMatchingUntoleratedTaint over the NoSchedule and NoExecute
// taints) and spec.nodeName, which skips the scheduler and leaves kubelet's admission to check the affinity and
// the NoExecute taints.
package main

import (
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	schedhelper "k8s.io/kubernetes/pkg/scheduler/framework/plugins/helper"
)

// PlacementCase is a Pod spec and the nodes (name, labels and taints) to match it against.
type PlacementCase struct {
	Spec  v1.PodSpec `json:"spec"`
	Nodes []struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
		Taints []v1.Taint        `json:"taints"`
	} `json:"nodes"`
}

// PlacementAnswer says, per node in order, whether the Pod may land there.
type PlacementAnswer struct {
	Error   string `json:"error,omitempty"`
	Matches []bool `json:"matches"`
}

// kubeletTaints is the filter of pkg/kubelet/lifecycle/predicate.go (an unexported closure there): a Pod bound
// by spec.nodeName is refused only for an untolerated NoExecute taint.
func kubeletTaints(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoExecute }

func placementMode(line []byte) any {
	var c PlacementCase
	if err := json.Unmarshal(line, &c); err != nil {
		return PlacementAnswer{Error: "oracle: input is not a placement case: " + err.Error()}
	}
	pod := &v1.Pod{Spec: c.Spec}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	filter := schedhelper.DoNotScheduleTaintsFilterFunc()
	if c.Spec.NodeName != "" {
		filter = kubeletTaints
	}
	ans := PlacementAnswer{Matches: []bool{}}
	for _, n := range c.Nodes {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}, Spec: v1.NodeSpec{Taints: n.Taints}}
		match, _ := required.Match(node)
		if c.Spec.NodeName != "" && c.Spec.NodeName != n.Name {
			match = false
		}
		if untoleratedTaint(node.Spec.Taints, pod.Spec.Tolerations, filter) {
			match = false
		}
		ans.Matches = append(ans.Matches, match)
	}
	return ans
}
