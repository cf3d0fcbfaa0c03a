package paritytest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/podrun/podrun/clustertest"
	"github.com/podrun/podrun/manifest"
)

// nodeName is podrun's --node-name for the corpus (part of each static
// pod's name).
const nodeName = "node1"

// defaultNamespace receives the pods that name no namespace.
const defaultNamespace = "parity"

// explainsItself is the rule for a rejection podrun makes beyond the
// apiserver: each of its messages must say that the rule is podrun's, by
// naming podrun ("podrun runs static pods: ..."). A message that only
// says what is wrong reads as if Kubernetes said it.
func explainsItself(msg string) bool { return strings.Contains(msg, "podrun") }

// Verdicts of a case.
const (
	bothAccept    = "both accept"
	bothReject    = "both reject"
	podrunAccepts = "podrun accepts, the apiserver rejects" // a failure
	podrunRejects = "podrun rejects, the apiserver accepts" // a failure unless explained
)

// outcome is what one side said of a case.
type outcome struct {
	accepted bool
	// messages are the reasons for a rejection: the apiserver's message
	// (its causes, when it gives them), or podrun's errors.
	messages []string
	// fields are the fields the rejection names.
	fields []string
	// code is the apiserver's HTTP status on rejection (400 undecodable,
	// 403 refused by admission, 404 namespace unknown, 422 invalid).
	code int32
	// warnings are what it said while accepting: podrun's warnings
	// (fields it ignores), whose fields are warningFields, or the
	// apiserver's warning headers.
	warnings, warningFields []string
}

// reject adds a reason for a rejection, about field ("" for the whole).
func (o *outcome) reject(field, msg string) {
	o.fields = append(o.fields, field)
	if field != "" {
		msg = field + ": " + msg
	}
	o.messages = append(o.messages, msg)
}

// result is a case with both outcomes.
type result struct {
	Case
	api, podrun outcome
}

func (r result) verdict() string {
	switch {
	case r.api.accepted && r.podrun.accepted:
		return bothAccept
	case !r.api.accepted && !r.podrun.accepted:
		return bothReject
	case !r.api.accepted:
		return podrunAccepts
	default:
		return podrunRejects
	}
}

// explained reports whether every message of podrun's rejection explains
// itself.
func (r result) explained() bool {
	for _, m := range r.podrun.messages {
		if !explainsItself(m) {
			return false
		}
	}
	return len(r.podrun.messages) > 0
}

// fieldsAgree reports whether podrun's rejection names the mutated field
// or one the apiserver names (or a field under or above one of them).
func (r result) fieldsAgree() bool {
	return r.Field == "" || r.mentions(r.podrun.fields)
}

// warnedAboutField reports whether podrun, accepting, warned about the
// mutated field or one the apiserver names.
func (r result) warnedAboutField() bool { return r.mentions(r.podrun.warningFields) }

// mentions reports whether one of fields is the mutated field or one the
// apiserver names, or is under or above one of them.
func (r result) mentions(fields []string) bool {
	want := append(append([]string{r.Field}, r.Also...), r.api.fields...)
	for _, f := range fields {
		for _, w := range want {
			if w == "" {
				continue
			}
			if f == "" || strings.HasPrefix(f, w) || strings.HasPrefix(w, f) {
				return true
			}
		}
	}
	return false
}

// TestValidationParity runs the corpus through a real kube-apiserver (a
// dry-run create with fieldValidation=Strict, the manifest's own bytes)
// and through manifest.Parse with Strict, and compares. It fails for each
// pod podrun accepts that the apiserver rejects, and for each pod podrun
// rejects beyond the apiserver without saying, in each message, that the
// rule is podrun's. Its report lists every case (t.Log, and as Markdown in
// $PODRUN_PARITY_REPORT when set; docs/validation-parity.md is one).
func TestValidationParity(t *testing.T) {
	cases := corpus()
	start := time.Now()
	cluster := clustertest.Start(t, clustertest.Options{})
	cfg := rest.CopyConfig(cluster.Admin)
	cfg.QPS, cfg.Burst = -1, 0             // no client-side rate limit: the cases go in parallel
	cfg.WarningHandler = rest.NoWarnings{} // they are in the report, per case
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	prepareCluster(ctx, t, client, cases)
	ready := time.Since(start)

	results := make([]result, len(cases))
	var wg sync.WaitGroup
	work := make(chan int)
	var mu sync.Mutex
	var harnessErrs []string
	for range 8 {
		wg.Go(func() {
			for i := range work {
				c := cases[i]
				api, err := submit(ctx, client, c)
				if err != nil {
					mu.Lock()
					harnessErrs = append(harnessErrs, fmt.Sprintf("%s: %v", c.Name, err))
					mu.Unlock()
				}
				results[i] = result{Case: c, api: api, podrun: parse(c)}
			}
		})
	}
	for i := range cases {
		work <- i
	}
	close(work)
	wg.Wait()
	if len(harnessErrs) > 0 {
		t.Fatalf("the apiserver did not answer some cases (not a verdict):\n%s", strings.Join(harnessErrs, "\n"))
	}
	elapsed := time.Since(start)

	// The bases must be valid to both, or their mutations prove nothing:
	// a mutation podrun rejects for its base's sake would hide whether it
	// rejects the mutation.
	for _, r := range results {
		if r.Base == "" && strings.HasPrefix(r.Name, "base/") && !r.api.accepted {
			t.Errorf("corpus: the apiserver rejects base %s: %s", r.Name, strings.Join(r.api.messages, "; "))
		}
		if r.Base == "" && strings.HasPrefix(r.Name, "base/") && !r.podrun.accepted {
			t.Errorf("corpus: podrun rejects base %s: %s", r.Name, strings.Join(r.podrun.messages, "; "))
		}
	}
	for _, r := range results {
		switch r.verdict() {
		case podrunAccepts:
			t.Errorf("%s: podrun accepts a pod the apiserver rejects (%d): %s", r.Name, r.api.code, strings.Join(r.api.messages, "; "))
		case podrunRejects:
			if !r.explained() {
				t.Errorf("%s: podrun rejects a pod the apiserver accepts, without saying the rule is podrun's: %s",
					r.Name, strings.Join(r.podrun.messages, "; "))
			}
		}
	}

	rep := newReport(results, reportTiming{cases: len(cases), clusterReady: ready, total: elapsed})
	t.Log("\n" + rep.discrepancies())
	if path := os.Getenv("PODRUN_PARITY_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(rep.markdown()), 0o644); err != nil {
			t.Errorf("write the report: %v", err)
		}
	}
}

// prepareCluster makes what the cases need that is cluster state rather
// than validation: every valid namespace they name, each with the
// service accounts they name (the ServiceAccount admission plugin
// refuses a pod whose account is missing, and no controller makes
// "default" here), and the RuntimeClass "runc".
func prepareCluster(ctx context.Context, t *testing.T, client kubernetes.Interface, cases []Case) {
	t.Helper()
	accounts := map[string]bool{"default": true}
	namespaces := map[string]bool{defaultNamespace: true}
	for _, c := range cases {
		ns, sa := caseNamespace(c), caseServiceAccount(c)
		if len(validation.IsDNS1123Label(ns)) == 0 {
			namespaces[ns] = true
		}
		if sa != "" && len(validation.IsDNS1123Subdomain(sa)) == 0 {
			accounts[sa] = true
		}
	}
	for _, ns := range sortedKeys(namespaces) {
		_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
		for _, sa := range sortedKeys(accounts) {
			_, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("create service account %s/%s: %v", ns, sa, err)
			}
		}
	}
	_, err := client.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "runc"}, Handler: "runc"}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create RuntimeClass runc: %v", err)
	}
	// The admission plugins read these through informers: wait until a
	// pod that needs them is admitted.
	probe := Case{Name: "probe", Body: []byte(minimal)}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := submit(ctx, client, probe)
		if err == nil && out.accepted {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the apiserver does not admit the minimal pod: %v %v", err, out.messages)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// loose decodes a case leniently, for the namespace to send it to.
func loose(c Case) map[string]any {
	var doc map[string]any
	if err := sigsyaml.Unmarshal(c.Body, &doc); err != nil {
		return nil
	}
	return doc
}

func caseNamespace(c Case) string {
	if meta, ok := loose(c)["metadata"].(map[string]any); ok {
		if ns, ok := meta["namespace"].(string); ok && ns != "" {
			return ns
		}
	}
	return defaultNamespace
}

func caseServiceAccount(c Case) string {
	if spec, ok := loose(c)["spec"].(map[string]any); ok {
		for _, k := range []string{"serviceAccountName", "serviceAccount"} {
			if sa, ok := spec[k].(string); ok && sa != "" {
				return sa
			}
		}
	}
	return ""
}

// submit sends a case's bytes to the apiserver as a dry-run create with
// strict field validation. An error means no verdict (the apiserver did
// not answer, or failed), not a rejection.
func submit(ctx context.Context, client kubernetes.Interface, c Case) (outcome, error) {
	contentType := "application/yaml"
	if c.JSON {
		contentType = "application/json"
	}
	var last error
	for attempt := range 3 {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 500 * time.Millisecond)
		}
		reqCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res := client.CoreV1().RESTClient().Post().
			Namespace(caseNamespace(c)).Resource("pods").
			Param("dryRun", "All").Param("fieldValidation", "Strict").
			SetHeader("Content-Type", contentType).
			Body(c.Body).Do(reqCtx)
		cancel()
		err := res.Error()
		if err == nil {
			out := outcome{accepted: true}
			for _, w := range res.Warnings() {
				out.warnings = append(out.warnings, w.Text)
			}
			return out, nil
		}
		var status apierrors.APIStatus
		if !errors.As(err, &status) {
			last = err
			continue
		}
		st := status.Status()
		if st.Code >= 500 || st.Code == 429 {
			last = err
			continue
		}
		out := outcome{code: st.Code}
		if st.Details != nil && len(st.Details.Causes) > 0 {
			// The causes of a map's problems come in random order.
			causes := slices.Clone(st.Details.Causes)
			slices.SortStableFunc(causes, func(a, b metav1.StatusCause) int {
				return cmp.Or(strings.Compare(a.Field, b.Field), strings.Compare(a.Message, b.Message))
			})
			for _, cause := range causes {
				out.reject(cause.Field, cause.Message)
			}
		} else {
			out.messages = []string{st.Message}
		}
		return out, nil
	}
	return outcome{}, last
}

// parse runs a case through podrun's decoder and validation.
func parse(c Case) outcome {
	source := strings.ReplaceAll(c.Name, "/", "_") + ".yaml"
	if c.JSON {
		source = strings.TrimSuffix(source, ".yaml") + ".json"
	}
	snap, err := manifest.Parse(source, c.Body, manifest.Options{
		NodeName: nodeName,
		Strict:   true,
		Now:      func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		var list manifest.ErrorList
		if !errors.As(err, &list) {
			return outcome{messages: []string{err.Error()}}
		}
		var out outcome
		for _, e := range list {
			out.reject(e.Field, e.Message)
		}
		return out
	}
	if len(snap.Pods) != 1 {
		return outcome{messages: []string{fmt.Sprintf("%d pods, want 1", len(snap.Pods))}}
	}
	// A warning reads "file:line: field: message"; keep field: message.
	out := outcome{accepted: true}
	for _, w := range snap.Warnings {
		_, w, _ = strings.Cut(w, ": ")
		field, _, _ := strings.Cut(w, ": ")
		out.warnings = append(out.warnings, w)
		out.warningFields = append(out.warningFields, field)
	}
	return out
}
