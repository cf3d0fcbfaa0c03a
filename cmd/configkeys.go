package cmd

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	yaml "go.yaml.in/yaml/v3"

	"github.com/podrun/podrun/manifest"
)

// configKeys are the keys podrun's own config file may hold: the flags of
// every command, since one file serves them all (a watch flag in it is no
// error for ps). --config and --help are not read from it.
func configKeys(root *cobra.Command) []string {
	seen := map[string]bool{"config": true, "help": true}
	var keys []string
	add := func(f *pflag.Flag) {
		if !seen[f.Name] {
			seen[f.Name] = true
			keys = append(keys, f.Name)
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.PersistentFlags().VisitAll(add)
		c.Flags().VisitAll(add)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	sort.Strings(keys)
	return keys
}

// unknownConfigKeys names, with its line, every key of podrun's config
// file (data, read from file) that is not one of keys, and the key meant
// when one is spelled alike: a typo such as nod-name would otherwise be
// dropped without a word, and the node run under another name. Keys are
// compared as viper reads them, whatever their case. podrun's keys have
// no sections: the keys of a mapping under an unknown key are named by
// their path ("node.name"), down to the first that is spelled like a
// known key, which is what the hint needs ("node-name").
func unknownConfigKeys(file string, data []byte, keys []string) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil // viper has read it; nothing that holds keys
	}
	known := make(map[string]bool, len(keys))
	for _, k := range keys {
		known[k] = true
	}
	var errs []error
	var walk func(m *yaml.Node, prefix string)
	walk = func(m *yaml.Node, prefix string) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			key := prefix + k.Value
			if prefix == "" && known[strings.ToLower(key)] {
				continue
			}
			near := manifest.Nearest(strings.ToLower(key), keys)
			if near == "" && v.Kind == yaml.MappingNode && len(v.Content) > 0 {
				walk(v, key+".")
				continue
			}
			msg := fmt.Sprintf("%s:%d: unknown key %q", file, k.Line, key)
			if near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			errs = append(errs, errors.New(msg))
		}
	}
	walk(doc.Content[0], "")
	return errors.Join(errs...)
}
