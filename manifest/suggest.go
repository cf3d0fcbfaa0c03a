package manifest

import "strings"

// Nearest is the candidate spelled most like name (case aside), within two
// edits, as the "did you mean" of an unknown field says it; "" when none
// is that close, or when name is a candidate. Ties go to the first in
// alphabetical order, so that the hint is the same every time.
func Nearest(name string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if c == name {
			return ""
		}
		d := editDistance(strings.ToLower(name), strings.ToLower(c))
		if d < bestDist || (d == bestDist && c < best) {
			best, bestDist = c, d
		}
	}
	return best
}
