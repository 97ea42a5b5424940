// Command oracle answers, with Kubernetes' own code (k8s.io/kubernetes at the release hack/build-tools.sh pins:
// go.mod for the default minor, minors/v1.MINOR.mod for the others), what the API server and kubelet
// would do with a manifest, so qos-guard's tests can compare its verdicts with the real thing.
//
// It is a long-lived stream process: one JSON value per input line, one JSON object per output line, in order.
//
//	oracle objects     each line a manifest (JSON object); answers decoding, create-time defaulting and
//	                   validation (rest.BeforeCreate with the resource's registry strategy), the stored QoS
//	                   class and, per container, the exclusive CPUs the static CPU manager allocates
//	oracle quantities  each line a JSON string (or number); answers resource.ParseQuantity and
//	                   Quantity.UnmarshalJSON, as exact milli values after the API server's round-up
//	oracle read        each line a JSON string holding a file's bytes; answers the documents kubectl's
//	                   reader yields (cli-runtime resource.StreamVisitor), as JSON
//	oracle readfile    each line a JSON string holding a file's raw bytes in base64; answers the documents
//	                   kubectl yields for a file or stdin (cli-runtime resource.FileVisitor: UTF-16 on a BOM,
//	                   a UTF-8 BOM dropped, invalid UTF-8 replaced by U+FFFD, then StreamVisitor)
//	oracle topology    each line {machine, policy, scope, pod}; answers whether kubelet's Topology Manager
//	                   (fed by the device manager and the static CPU and Memory Manager policies) admits the
//	                   Pod on an empty node of that machine, where each container went, and the machine's
//	                   per-NUMA capacity and allocatable as an exporter publishes them (topology.go)
//	oracle placement   each line {spec, nodes}; answers, per node, whether the Pod's nodeName, nodeSelector and
//	                   required node affinity let it land there (nodeaffinity.GetRequiredNodeAffinity)
//	oracle reserved    each line the reservedSystemCPUs, systemReserved and kubeReserved of a kubelet
//	                   configuration; answers how many CPUs kubelet's static CPU Manager reserves
//
// Nothing is re-implemented: each answer is the return value of the upstream function named beside it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"
	"gopkg.in/inf.v0"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	_ "k8s.io/kubernetes/pkg/apis/batch/install"
	api "k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	"k8s.io/kubernetes/pkg/controller"
	"k8s.io/kubernetes/pkg/registry/apps/daemonset"
	"k8s.io/kubernetes/pkg/registry/apps/deployment"
	"k8s.io/kubernetes/pkg/registry/apps/replicaset"
	"k8s.io/kubernetes/pkg/registry/apps/statefulset"
	"k8s.io/kubernetes/pkg/registry/batch/cronjob"
	"k8s.io/kubernetes/pkg/registry/batch/job"
	"k8s.io/kubernetes/pkg/registry/core/pod"
	"k8s.io/kubernetes/pkg/registry/core/podtemplate"
	"k8s.io/kubernetes/pkg/registry/core/replicationcontroller"
	"k8s.io/utils/cpuset"
)

// strategies are the registry strategies (and resource names) the API server creates these kinds with.
var strategies = map[schema.GroupKind]struct {
	rest.RESTCreateStrategy
	resource string
}{
	{Group: "", Kind: "Pod"}:                   {pod.Strategy, "pods"},
	{Group: "", Kind: "PodTemplate"}:           {podtemplate.Strategy, "podtemplates"},
	{Group: "", Kind: "ReplicationController"}: {replicationcontroller.Strategy, "replicationcontrollers"},
	{Group: "apps", Kind: "Deployment"}:        {deployment.Strategy, "deployments"},
	{Group: "apps", Kind: "ReplicaSet"}:        {replicaset.Strategy, "replicasets"},
	{Group: "apps", Kind: "StatefulSet"}:       {statefulset.Strategy, "statefulsets"},
	{Group: "apps", Kind: "DaemonSet"}:         {daemonset.Strategy, "daemonsets"},
	{Group: "batch", Kind: "Job"}:              {job.Strategy, "jobs"},
	{Group: "batch", Kind: "CronJob"}:          {cronjob.Strategy, "cronjobs"},
}

// FieldError is one cause of an Invalid status: what `kubectl apply` prints.
type FieldError struct {
	Field   string `json:"field"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

// BadQuantity is a resources value that Quantity.UnmarshalJSON refuses, located in the raw manifest.
type BadQuantity struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

// Result is the answer for one object.
type Result struct {
	Kind          string          `json:"kind,omitempty"`
	DecodeError   string          `json:"decodeError,omitempty"`
	BadQuantities []BadQuantity   `json:"badQuantities,omitempty"`
	StrictErrors  []string        `json:"strictErrors,omitempty"`
	Errors        []FieldError    `json:"errors,omitempty"`    // create of the object itself
	PodErrors     []FieldError    `json:"podErrors,omitempty"` // create of the Pod a workload's controller makes
	QOSClass      string          `json:"qosClass,omitempty"`  // status.qosClass as stored
	PodLevel      bool            `json:"podLevelResourcesSet,omitempty"`
	Exclusive     map[string]bool `json:"exclusive,omitempty"` // container name -> gets exclusive CPUs
	CPUs          map[string]int  `json:"cpus,omitempty"`      // container name -> how many (0: shared pool)
	AllocError    string          `json:"allocationError,omitempty"`
	Items         []Result        `json:"items,omitempty"` // kind: List
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: oracle objects|quantities|read|readfile|reserved|topology|placement  (JSON lines on stdin)")
		fmt.Fprintln(os.Stderr, "       oracle version  (the k8s.io/kubernetes release it was built against)")
		os.Exit(2)
	}
	if os.Args[1] == "version" {
		fmt.Println(kubernetesVersion())
		return
	}
	klog.SetLogger(logr.Discard()) // the kubelet code logs every allocation; answers go to stdout only
	handlers := map[string]func([]byte) any{"objects": object, "quantities": quantities, "read": read,
		"readfile": readFile, "reserved": reserved, "topology": topologyMode, "placement": placementMode}
	handle, ok := handlers[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	enc := json.NewEncoder(out)
	for {
		line, err := in.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			if encErr := enc.Encode(handle(line)); encErr != nil {
				fmt.Fprintln(os.Stderr, encErr)
				os.Exit(1)
			}
			if in.Buffered() == 0 { // answer as soon as the client stops sending
				_ = out.Flush()
			}
		}
		if err == io.EOF {
			_ = out.Flush()
			return
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// kubernetesVersion is the k8s.io/kubernetes module version this binary was built against (its answers are
// that release's, at that release's default feature gates).
func kubernetesVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "k8s.io/kubernetes" {
				return dep.Version
			}
		}
	}
	return "unknown"
}

// ---- objects ----

// decoder is the API server's JSON decoding with fieldValidation=Strict (kubectl's default): unknown and
// duplicate fields come back as a strict decoding error beside the decoded object.
var decoder = serializer.NewCodecFactory(legacyscheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

func object(line []byte) any { return judge(line) }

func judge(data []byte) Result {
	obj, gvk, err := decoder.Decode(data, nil, nil)
	res := Result{}
	if gvk != nil {
		res.Kind = gvk.Kind
	}
	if err != nil && runtime.IsStrictDecodingError(err) {
		res.StrictErrors = append(res.StrictErrors, err.Error())
	} else if err != nil {
		res.DecodeError = err.Error()
		res.BadQuantities = badQuantities(data)
		return res
	}
	if list, ok := obj.(*v1.List); ok {
		for _, item := range list.Items {
			res.Items = append(res.Items, judge(item.Raw))
		}
		return res
	}
	strategy, ok := strategies[gvk.GroupKind()]
	if !ok {
		res.DecodeError = fmt.Sprintf("oracle: kind %s is not a Pod or workload", gvk.GroupKind())
		return res
	}
	// The API server defaults the versioned object (pkg/apis/*/v1 SetDefaults_*), then converts it to the
	// internal version its registry works on.
	legacyscheme.Scheme.Default(obj)
	internal, err := legacyscheme.Scheme.ConvertToVersion(obj, schema.GroupVersion{Group: gvk.Group, Version: runtime.APIVersionInternal})
	if err != nil {
		res.DecodeError = "conversion: " + err.Error()
		return res
	}
	res.Errors = create(strategy.RESTCreateStrategy, *gvk, strategy.resource, internal)
	if p, ok := internal.(*api.Pod); ok {
		judgePod(p, &res)
		return res
	}
	// A workload: its controller creates Pods from the (defaulted, stored) template with
	// controller.GetPodFromTemplate; the API server then defaults and admits each as a Pod.
	tmpl := template(obj)
	if tmpl == nil {
		return res
	}
	newPod, err := controller.GetPodFromTemplate(tmpl, obj, nil)
	if err != nil {
		res.DecodeError = "template: " + err.Error()
		return res
	}
	newPod.Namespace = namespaceOf(obj)
	newPod.APIVersion, newPod.Kind = "v1", "Pod"
	legacyscheme.Scheme.Default(newPod)
	internalPod := &api.Pod{}
	if err := legacyscheme.Scheme.Convert(newPod, internalPod, nil); err != nil {
		res.DecodeError = "template conversion: " + err.Error()
		return res
	}
	res.PodErrors = create(pod.Strategy, v1.SchemeGroupVersion.WithKind("Pod"), "pods", internalPod)
	judgePod(internalPod, &res)
	return res
}

// template is the Pod template a workload's controller instantiates.
func template(obj runtime.Object) *v1.PodTemplateSpec {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil
	}
	path := []string{"spec", "template"}
	switch obj.GetObjectKind().GroupVersionKind().Kind {
	case "PodTemplate":
		path = []string{"template"}
	case "CronJob":
		path = []string{"spec", "jobTemplate", "spec", "template"}
	}
	m, found, err := unstructured.NestedMap(raw, path...)
	if !found || err != nil {
		return nil
	}
	t := &v1.PodTemplateSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, t); err != nil {
		return nil
	}
	return t
}

func namespaceOf(obj runtime.Object) string {
	if o, ok := obj.(metav1.Object); ok && o.GetNamespace() != "" {
		return o.GetNamespace()
	}
	return metav1.NamespaceDefault
}

// create runs what the API server's generic registry runs before storing a new object: system metadata,
// name generation, then rest.BeforeCreate (PrepareForCreate, Validate, ValidateObjectMeta).
func create(strategy rest.RESTCreateStrategy, gvk schema.GroupVersionKind, resource string, obj runtime.Object) []FieldError {
	meta, ok := obj.(metav1.Object)
	if !ok {
		return []FieldError{{Type: "oracle", Message: "object has no metadata"}}
	}
	ns := metav1.NamespaceDefault
	if meta.GetNamespace() != "" {
		ns = meta.GetNamespace()
	}
	rest.FillObjectMetaSystemFields(meta)
	if meta.GetGenerateName() != "" && meta.GetName() == "" {
		meta.SetName(strategy.GenerateName(meta.GetGenerateName()))
	}
	prefix := "apis"
	if gvk.Group == "" {
		prefix = "api"
	}
	// Declarative validation identifies the request by its RequestInfo, as the API server's handler sets it.
	ctx := genericapirequest.WithRequestInfo(genericapirequest.WithNamespace(context.Background(), ns),
		&genericapirequest.RequestInfo{IsResourceRequest: true, Verb: "create", APIPrefix: prefix,
			APIGroup: gvk.Group, APIVersion: gvk.Version, Namespace: ns, Resource: resource, Name: meta.GetName()})
	err := rest.BeforeCreate(strategy, ctx, obj)
	if err == nil {
		return nil
	}
	var out []FieldError
	if status, ok := err.(apierrors.APIStatus); ok && status.Status().Details != nil && len(status.Status().Details.Causes) > 0 {
		for _, c := range status.Status().Details.Causes {
			out = append(out, FieldError{Field: c.Field, Type: string(c.Type), Message: c.Message})
		}
		return out
	}
	return []FieldError{{Type: "error", Message: err.Error()}}
}

// judgePod records the stored QoS class (set by PrepareForCreate) and what the static CPU manager does.
func judgePod(p *api.Pod, res *Result) {
	res.QOSClass = string(p.Status.QOSClass)
	vp := &v1.Pod{}
	if err := legacyscheme.Scheme.Convert(p, vp, nil); err != nil {
		res.AllocError = "conversion: " + err.Error()
		return
	}
	vp.UID = types.UID("oracle")
	res.PodLevel = resourcehelper.IsPodLevelResourcesSet(vp)
	res.Exclusive = exclusive(vp)
	res.CPUs, res.AllocError = allocate(vp)
}

// badQuantities locates the resources values in a manifest that Quantity.UnmarshalJSON refuses, so a
// decode error can be attributed to cpu, memory or another resource.
func badQuantities(data []byte) []BadQuantity {
	var root any
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	if dec.Decode(&root) != nil {
		return nil
	}
	var out []BadQuantity
	var walk func(v any, path string, parent string)
	walk = func(v any, path string, parent string) {
		switch t := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				child := strings.TrimPrefix(path+"."+k, ".")
				if (k == "limits" || k == "requests") && parent == "resources" {
					if m, ok := t[k].(map[string]any); ok {
						for name, val := range m {
							raw, _ := json.Marshal(val)
							var q resource.Quantity
							if err := q.UnmarshalJSON(raw); err != nil {
								out = append(out, BadQuantity{Path: child + "." + name, Error: err.Error()})
							}
						}
					}
					continue
				}
				walk(t[k], child, k)
			}
		case []any:
			for i, e := range t {
				walk(e, fmt.Sprintf("%s[%d]", path, i), parent)
			}
		}
	}
	walk(root, "", "")
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// ---- quantities ----

// Parsed is a quantity as the API server keeps it: rounded up to milli (SetDefaults_ResourceList calls
// Quantity.RoundUp(resource.Milli)), given as the exact integer number of milli-units, or for values too long
// to print, as milli = unscaled * 10^exp.
type Parsed struct {
	Milli    string `json:"milli,omitempty"`
	Unscaled string `json:"unscaled,omitempty"`
	Exp      int64  `json:"exp,omitempty"`
	Error    string `json:"error,omitempty"`
}

// quantities answers "parse" (resource.ParseQuantity of the string) and "json" (Quantity.UnmarshalJSON of
// the value as kubectl sends it: a string re-encoded by encoding/json, which escapes control characters
// and U+2028/U+2029, so only the other white space reaches UnmarshalJSON's strings.TrimSpace; a number as
// written).
func quantities(line []byte) any {
	out := map[string]Parsed{}
	var s string
	raw := []byte(strings.TrimSpace(string(line)))
	if json.Unmarshal(line, &s) == nil {
		if q, err := resource.ParseQuantity(s); err != nil {
			out["parse"] = Parsed{Error: err.Error()}
		} else {
			out["parse"] = milli(q)
		}
		raw, _ = json.Marshal(s)
	}
	var q resource.Quantity
	if err := q.UnmarshalJSON(raw); err != nil {
		out["json"] = Parsed{Error: err.Error()}
	} else {
		out["json"] = milli(q)
	}
	return out
}

func milli(q resource.Quantity) Parsed {
	q.RoundUp(resource.Milli)
	m := new(inf.Dec).Mul(q.AsDec(), inf.NewDec(1, -3)) // value * 1000: scale <= 0 after the round-up
	exp := -int64(m.Scale())
	if exp < 0 {
		return Parsed{Error: fmt.Sprintf("oracle: %s is not whole after RoundUp(Milli)", m)}
	}
	if exp > 4000 && m.Sign() != 0 {
		return Parsed{Unscaled: m.UnscaledBig().String(), Exp: exp}
	}
	v := new(big.Int).Mul(m.UnscaledBig(), new(big.Int).Exp(big.NewInt(10), big.NewInt(exp), nil))
	return Parsed{Milli: v.String()}
}

// ---- read ----

// Read is what kubectl's reader makes of a file.
type Read struct {
	Documents []json.RawMessage `json:"documents"`
	// DocumentErrors: documents that parse but are not objects (resource.mapper infoForData fails); kubectl
	// reports each and goes on.
	DocumentErrors []string `json:"documentErrors,omitempty"`
	// Error: the stream could not be read past this point (resource.StreamVisitor returns it).
	Error string `json:"error,omitempty"`
}

// read follows k8s.io/cli-runtime/pkg/resource/visitor.go StreamVisitor.Visit: the same decoder and
// buffer size, the same trimming and skipping of empty documents, then the mapper's decoding of each
// document as unstructured JSON.
func read(line []byte) any {
	var data string
	if err := json.Unmarshal(line, &data); err != nil {
		return Read{Error: "oracle: input line is not a JSON string: " + err.Error()}
	}
	return readStream(strings.NewReader(data))
}

// readFile follows k8s.io/cli-runtime/pkg/resource/visitor.go FileVisitor.Visit, which every file and stdin
// (`-f -`) goes through: the bytes are wrapped in transform.NewReader(f, unicode.BOMOverride(
// unicode.UTF8.NewDecoder())) before StreamVisitor reads them.
func readFile(line []byte) any {
	var data []byte // base64 in JSON: any bytes, not only UTF-8 text
	if err := json.Unmarshal(line, &data); err != nil {
		return Read{Error: "oracle: input line is not a base64 JSON string: " + err.Error()}
	}
	utf16bom := unicode.BOMOverride(unicode.UTF8.NewDecoder())
	return readStream(transform.NewReader(bytes.NewReader(data), utf16bom))
}

func readStream(r io.Reader) Read {
	res := Read{Documents: []json.RawMessage{}}
	d := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for {
		ext := runtime.RawExtension{}
		if err := d.Decode(&ext); err != nil {
			if err != io.EOF {
				res.Error = err.Error()
			}
			return res
		}
		raw := []byte(strings.TrimSpace(string(ext.Raw)))
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		if _, _, err := unstructured.UnstructuredJSONScheme.Decode(raw, nil, nil); err != nil {
			res.DocumentErrors = append(res.DocumentErrors, err.Error())
			continue
		}
		if !utf8.Valid(raw) {
			// JSON after a UTF-8 BOM passes FileVisitor unchanged; what kubectl applies is the decoded
			// object, in which encoding/json made each invalid byte of a string U+FFFD: answer that.
			var obj any
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			if err := dec.Decode(&obj); err == nil {
				if again, err := json.Marshal(obj); err == nil {
					raw = again
				}
			}
		}
		res.Documents = append(res.Documents, raw)
	}
}

// ---- reserved ----

// ReservedIn is what decides the static CPU Manager's reservation in a kubelet configuration.
type ReservedIn struct {
	ReservedSystemCPUs string            `json:"reservedSystemCPUs"`
	SystemReserved     map[string]string `json:"systemReserved"`
	KubeReserved       map[string]string `json:"kubeReserved"`
}

// ReservedOut is how many CPUs it reserves (and which, when listed), or why kubelet would not start.
type ReservedOut struct {
	Count int    `json:"count"`
	CPUs  string `json:"cpus,omitempty"`
	Error string `json:"error,omitempty"`
}

// reserved follows kubelet from its configuration to the static policy's count. The calls are upstream's:
// cpuset.Parse and CPUSet.Size/String (cmd/kubelet/app/server.go getReservedCPUs, which overwrites
// systemReserved cpu with the set's size and drops kubeReserved cpu), resource.ParseQuantity with a negative
// refused (parseResourceList), Quantity.Add of system and kube reserved (cm GetNodeAllocatableReservation),
// and the ceiling of MilliValue/1000 (cpumanager.NewManager); the few lines joining them are kubelet's,
// unexported there, so repeated here.
func reserved(line []byte) any {
	var in ReservedIn
	if err := json.Unmarshal(line, &in); err != nil {
		return ReservedOut{Error: "oracle: " + err.Error()}
	}
	if in.ReservedSystemCPUs != "" {
		set, err := cpuset.Parse(in.ReservedSystemCPUs)
		if err != nil {
			return ReservedOut{Error: err.Error()}
		}
		return ReservedOut{Count: set.Size(), CPUs: set.String()}
	}
	total := resource.NewQuantity(0, resource.DecimalSI)
	for _, m := range []map[string]string{in.SystemReserved, in.KubeReserved} {
		v, ok := m["cpu"]
		if !ok {
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return ReservedOut{Error: err.Error()}
		}
		if q.Sign() == -1 {
			return ReservedOut{Error: fmt.Sprintf("resource quantity for %q cannot be negative: %v", "cpu", v)}
		}
		total.Add(q)
	}
	return ReservedOut{Count: int(math.Ceil(float64(total.MilliValue()) / 1000))}
}
