package cmd

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
)

// extendedResources is --extended-resource NAME=COUNT (repeatable, or
// comma-separated as a config-file list comes): the extended resources
// this node has, which pods may ask for while the count lasts.
type extendedResources map[v1.ResourceName]int64

var _ pflag.Value = (*extendedResources)(nil)

func addExtendedResourceFlag(f *pflag.FlagSet, p *extendedResources) {
	f.Var(p, "extended-resource", "an extended resource this node has, NAME=COUNT (example.com/dongle=1), "+
		"counted out to the pods that ask for it (repeatable); nvidia.com/gpu=N caps the GPUs the NVIDIA runtime hands out")
}

func (e *extendedResources) String() string {
	if e == nil || len(*e) == 0 {
		return ""
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(*e)) {
		parts = append(parts, fmt.Sprintf("%s=%d", name, (*e)[name]))
	}
	return strings.Join(parts, ",")
}

func (e *extendedResources) Type() string { return "NAME=COUNT" }

// Set adds one or more (comma-separated) NAME=COUNT. A name given twice is
// an error: which count was meant?
func (e *extendedResources) Set(s string) error {
	if *e == nil {
		*e = extendedResources{}
	}
	for _, item := range strings.Split(s, ",") {
		name, count, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return fmt.Errorf("%q: want NAME=COUNT, such as example.com/dongle=1", item)
		}
		rn := v1.ResourceName(name)
		if !v1helper.IsExtendedResourceName(rn) {
			return fmt.Errorf("%q is not an extended resource: want a name with a domain outside kubernetes.io, "+
				"such as example.com/dongle (cpu, memory and hugepages are the machine's)", name)
		}
		n, err := strconv.ParseInt(count, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%s=%s: the count must be a whole number, 0 or more", name, count)
		}
		if _, dup := (*e)[rn]; dup {
			return fmt.Errorf("%s is given twice", name)
		}
		(*e)[rn] = n
	}
	return nil
}
