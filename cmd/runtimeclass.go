package cmd

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/podrun/podrun/runner"
)

// parseRuntimeClasses reads --runtime-class values, NAME=RUNTIME each, or
// several joined by commas (as a config file's list or PODRUN_RUNTIME_CLASS
// gives them): the name a DNS subdomain (a RuntimeClass's name), the
// runtime as Docker names it. A name given twice with two runtimes is an
// error.
func parseRuntimeClasses(values []string) (map[string]string, error) {
	var split []string
	for _, v := range values {
		split = append(split, strings.Split(v, ",")...)
	}
	out := make(map[string]string, len(split))
	for _, v := range split {
		name, rt, ok := strings.Cut(v, "=")
		name, rt = strings.TrimSpace(name), strings.TrimSpace(rt)
		if !ok || name == "" || rt == "" {
			return nil, fmt.Errorf("--runtime-class %q: want NAME=RUNTIME, e.g. gvisor=runsc", v)
		}
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			return nil, fmt.Errorf("--runtime-class %q: %q is not a valid RuntimeClass name: %s", v, name, strings.Join(msgs, "; "))
		}
		if strings.ContainsAny(rt, " \t\n/") {
			return nil, fmt.Errorf("--runtime-class %q: %q is not a Docker runtime name", v, rt)
		}
		if prev, dup := out[name]; dup && prev != rt {
			return nil, fmt.Errorf("--runtime-class %q: %s is given twice (also =%s)", v, name, prev)
		}
		out[name] = rt
	}
	return out, nil
}

// runtimeClassOptions is --runtime-class, of the commands that run pods.
type runtimeClassOptions struct {
	Values []string
	// Classes is Values parsed (parse), name -> Docker runtime.
	Classes map[string]string
}

func addRuntimeClassFlag(f *pflag.FlagSet, o *runtimeClassOptions) {
	f.StringArrayVar(&o.Values, "runtime-class", nil,
		"RuntimeClass NAME=RUNTIME: pods with runtimeClassName NAME run with the Docker runtime RUNTIME (repeatable; "+
			"wins over a RuntimeClass object of the same name in the cluster or the manifests)")
}

// parse checks the flag's values: bad input when one is malformed.
func (o *runtimeClassOptions) parse() error {
	m, err := parseRuntimeClasses(o.Values)
	if err != nil {
		return badInput(err)
	}
	o.Classes = m
	return nil
}

// tune gives the runner the classes.
func (o *runtimeClassOptions) tune(c *runner.Config) {
	c.RuntimeClasses = runner.NewRuntimeClasses(o.Classes)
}
