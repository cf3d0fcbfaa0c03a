// Package expansion expands $(VAR) references the way Kubernetes does in a
// container's command, args, env values and exec probes.
package expansion

import "strings"

// Expand replaces $(NAME) in s with lookup(NAME), as the kubelet expands
// command, args and env values: $$ is an escaped $, and a reference to a
// name lookup does not know is left as it is.
func Expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				// Unterminated: keep the rest as it is.
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok && name != "" {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// All expands every string of ss; nil stays nil.
func All(ss []string, lookup func(string) (string, bool)) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = Expand(s, lookup)
	}
	return out
}
