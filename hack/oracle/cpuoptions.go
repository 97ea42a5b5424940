// The CPU Manager's policy options in the topology mode: kubelet's cpuManagerPolicyOptions, and the two feature
// gates that decide which of them a kubelet accepts (CPUManagerPolicyAlphaOptions, off by default in every
// supported release; CPUManagerPolicyBetaOptions, on). Which option is alpha, beta or GA is each release's own
// (pkg/kubelet/cm/cpumanager/policy_options.go), so the same case asks each release what it does.

package main

import (
	"fmt"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

// optionGates are the gates a case may set, at their default in every release the oracle builds against.
var optionGates = map[string]bool{"CPUManagerPolicyAlphaOptions": false, "CPUManagerPolicyBetaOptions": true}

// setOptionGates sets the CPU Manager option gates for one case: the case's values, the default for the others
// (a case never inherits the one before it).
func setOptionGates(asked map[string]bool) error {
	gates := map[string]bool{}
	for name, value := range optionGates {
		gates[name] = value
	}
	for name, value := range asked {
		if _, known := optionGates[name]; !known {
			return fmt.Errorf("featureGates: %s is not a gate the topology mode sets (%v)", name, optionGates)
		}
		gates[name] = value
	}
	return utilfeature.DefaultMutableFeatureGate.SetFromMap(gates)
}
