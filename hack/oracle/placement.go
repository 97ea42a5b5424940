// The `placement` mode: which nodes a Pod's own spec lets it land on, by the scheduler's own code
// (k8s.io/component-helpers/scheduling/corev1/nodeaffinity GetRequiredNodeAffinity: nodeSelector and required
// node affinity) and spec.nodeName, which skips the scheduler.
package main

import (
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// PlacementCase is a Pod spec and the nodes (name and labels) to match it against.
type PlacementCase struct {
	Spec  v1.PodSpec `json:"spec"`
	Nodes []struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"nodes"`
}

// PlacementAnswer says, per node in order, whether the Pod may land there.
type PlacementAnswer struct {
	Error   string `json:"error,omitempty"`
	Matches []bool `json:"matches"`
}

func placementMode(line []byte) any {
	var c PlacementCase
	if err := json.Unmarshal(line, &c); err != nil {
		return PlacementAnswer{Error: "oracle: input is not a placement case: " + err.Error()}
	}
	pod := &v1.Pod{Spec: c.Spec}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	ans := PlacementAnswer{Matches: []bool{}}
	for _, n := range c.Nodes {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}
		match, _ := required.Match(node)
		if c.Spec.NodeName != "" && c.Spec.NodeName != n.Name {
			match = false
		}
		ans.Matches = append(ans.Matches, match)
	}
	return ans
}
