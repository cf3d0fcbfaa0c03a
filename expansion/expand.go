// Package expansion expands $(VAR) references the way Kubernetes does in a
// container's command, args, env values and exec probes.
package expansion

import (
	"fmt"
	"strings"
)

// MaxLen is the longest string Expand yields: 128 KiB, Linux's
// MAX_ARG_STRLEN. execve refuses a longer argument or environment string,
// so no container that could run is refused; and references, which can
// double a value at every variable ("$(V1)$(V1)"), cannot turn a manifest
// of a few lines into gigabytes of podrun's memory.
const MaxLen = 128 << 10

// MaxTotal bounds the strings of one process's exec, its environment,
// command and arguments together: 6 MiB, the most Linux takes (3/4 of
// _STK_LIM, whatever the stack limit). Many references to a long value
// stay within it too.
const MaxTotal = 6 << 20

var (
	// ErrTooLong is the error of a string longer than MaxLen, expanded.
	ErrTooLong = fmt.Errorf("longer than %d KiB (expanded), the most Linux passes to a process as one argument or environment string", MaxLen>>10)
	// ErrTooMuch is the error of a Budget spent.
	ErrTooMuch = fmt.Errorf("the process's environment, command and arguments are more than %d MiB (expanded), the most Linux passes to a process", MaxTotal>>20)
)

// Budget counts the bytes of one process's exec strings as execve counts
// them: each with its terminating NUL, a variable as NAME=value. The zero
// value is an unspent budget of MaxTotal.
type Budget struct{ used int }

// Take counts n more bytes (n < 0 gives them back): ErrTooMuch once the
// total is over MaxTotal.
func (b *Budget) Take(n int) error {
	b.used += n
	if b.used > MaxTotal {
		return ErrTooMuch
	}
	return nil
}

// Expand replaces $(NAME) in s with lookup(NAME), as the kubelet expands
// command, args and env values: $$ is an escaped $, and a reference to a
// name lookup does not know is left as it is. A result longer than MaxLen
// is ErrTooLong, found before it is made.
func Expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		if len(s) > MaxLen {
			return "", ErrTooLong
		}
		return s, nil
	}
	var b strings.Builder
	b.Grow(min(len(s), MaxLen))
	write := func(piece string) bool {
		if b.Len()+len(piece) > MaxLen {
			return false
		}
		b.WriteString(piece)
		return true
	}
	for i := 0; i < len(s); i++ {
		piece := s[i : i+1]
		if s[i] == '$' && i+1 < len(s) {
			switch s[i+1] {
			case '$':
				i++
			case '(':
				end := strings.IndexByte(s[i+2:], ')')
				if end < 0 {
					// Unterminated: keep the rest as it is.
					piece, i = s[i:], len(s)
					break
				}
				name := s[i+2 : i+2+end]
				piece = s[i : i+3+end]
				if v, ok := lookup(name); ok && name != "" {
					piece = v
				}
				i += 2 + end
			}
		}
		if !write(piece) {
			return "", ErrTooLong
		}
	}
	return b.String(), nil
}

// All expands every string of ss, an argument list, each taken from b as
// it is made; nil stays nil. The error names the string, by index.
func All(ss []string, lookup func(string) (string, bool), b *Budget) ([]string, error) {
	if ss == nil {
		return nil, nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		v, err := Expand(s, lookup)
		if err == nil {
			err = b.Take(len(v) + 1)
		}
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}
