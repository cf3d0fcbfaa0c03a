package paritytest

import (
	"fmt"
	"strings"
	"time"

	"github.com/podrun/podrun/clustertest"
)

// report renders the results: the discrepancies first (what the test fails
// on, then what podrun refuses beyond the apiserver, with its reason),
// then the cases where both agree.
type report struct {
	results []result
	timing  reportTiming
}

type reportTiming struct {
	cases        int
	clusterReady time.Duration // etcd and kube-apiserver up, namespaces made
	total        time.Duration
}

func newReport(results []result, timing reportTiming) *report {
	return &report{results: results, timing: timing}
}

func (r *report) by(verdict string) []result {
	var out []result
	for _, res := range r.results {
		if res.verdict() == verdict {
			out = append(out, res)
		}
	}
	return out
}

func (r *report) markdown() string {
	var b strings.Builder
	accepts, rejects := r.by(podrunAccepts), r.by(podrunRejects)
	unexplained := 0
	for _, res := range rejects {
		if !res.explained() {
			unexplained++
		}
	}
	both, agree := r.by(bothReject), r.by(bothAccept)

	fmt.Fprintf(&b, "# Validation parity: podrun and kube-apiserver %s\n\n", clustertest.Version)
	b.WriteString("Written by `TestValidationParity` (manifest/paritytest): each case of a generated\n" +
		"corpus of Pod manifests goes, as the same bytes, to a real kube-apiserver (a dry-run\n" +
		"create, `fieldValidation=Strict`, admission included) and to `manifest.Parse` with\n" +
		"`Strict`. The test fails on every pod podrun accepts and the apiserver rejects, and\n" +
		"on every pod podrun rejects beyond the apiserver unless each of podrun's messages\n" +
		"says the rule is podrun's (contains \"podrun\"). Regenerate with\n\n" +
		"    PODRUN_PARITY_REPORT=$PWD/docs/validation-parity.md go test -run TestValidationParity ./manifest/paritytest/\n\n")
	fmt.Fprintf(&b, "| | cases |\n| --- | ---: |\n")
	fmt.Fprintf(&b, "| corpus | %d |\n", len(r.results))
	fmt.Fprintf(&b, "| both accept | %d |\n", len(agree))
	fmt.Fprintf(&b, "| both reject | %d |\n", len(both))
	fmt.Fprintf(&b, "| **podrun accepts, the apiserver rejects** (test failures) | %d |\n", len(accepts))
	fmt.Fprintf(&b, "| podrun rejects, the apiserver accepts | %d |\n", len(rejects))
	fmt.Fprintf(&b, "| ... of which without saying the rule is podrun's (test failures) | %d |\n\n", unexplained)
	fmt.Fprintf(&b, "Run time: %s for %d cases, of which %s starting etcd and kube-apiserver.\n\n",
		r.timing.total.Round(100*time.Millisecond), r.timing.cases, r.timing.clusterReady.Round(100*time.Millisecond))

	fmt.Fprintf(&b, "## podrun accepts, the apiserver rejects (%d)\n\n", len(accepts))
	b.WriteString("Each is a test failure. The apiserver's status code: 400 undecodable, 403 refused by an\n" +
		"admission plugin, 404 no such namespace, 422 invalid. The first table is what podrun accepts\n" +
		"without a word; the second what it accepts with a warning about the field (which podrun is\n" +
		"given with `Strict`, so such a warning is an error and should not occur).\n\n")
	var silent, warned []result
	for _, res := range accepts {
		if res.warnedAboutField() {
			warned = append(warned, res)
		} else {
			silent = append(silent, res)
		}
	}
	for _, group := range []struct {
		title string
		rows  []result
	}{{"Accepted without a word", silent}, {"Accepted with a warning about the field", warned}} {
		fmt.Fprintf(&b, "### %s (%d)\n\n", group.title, len(group.rows))
		if len(group.rows) == 0 {
			continue
		}
		b.WriteString("| case | field | apiserver | podrun's warnings |\n| --- | --- | --- | --- |\n")
		for _, res := range group.rows {
			fmt.Fprintf(&b, "| %s | %s | %d: %s | %s |\n", res.Name, code(res.Field),
				res.api.code, cell(strings.Join(res.api.messages, "; ")), cell(short(strings.Join(res.podrun.warnings, "; "))))
		}
		b.WriteString("\n")
	}

	fmt.Fprintf(&b, "## podrun rejects, the apiserver accepts (%d)\n\n", len(rejects))
	b.WriteString("Allowed only when each of podrun's messages says the rule is podrun's; the others are\n" +
		"test failures (explained: no). The apiserver's warnings, where it gave some, say what it\n" +
		"let through with a reservation.\n\n")
	if len(rejects) > 0 {
		b.WriteString("| case | field | podrun's reason | explained | the apiserver's warnings |\n| --- | --- | --- | --- | --- |\n")
		for _, res := range rejects {
			yes := "no"
			if res.explained() {
				yes = "yes"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", res.Name, code(res.Field), cell(strings.Join(res.podrun.messages, "; ")), yes,
				cell(short(strings.Join(res.api.warnings, "; "))))
		}
		b.WriteString("\n")
	}

	fmt.Fprintf(&b, "## Both reject (%d)\n\n", len(both))
	b.WriteString("\"elsewhere\": podrun's messages name neither the mutated field nor one the apiserver\n" +
		"names (it rejects the case for another reason, or names the field differently).\n\n")
	b.WriteString("| case | field | apiserver | podrun | |\n| --- | --- | --- | --- | --- |\n")
	for _, res := range both {
		note := ""
		if !res.fieldsAgree() {
			note = "elsewhere"
		}
		fmt.Fprintf(&b, "| %s | %s | %d: %s | %s | %s |\n", res.Name, code(res.Field), res.api.code,
			cell(short(strings.Join(res.api.messages, "; "))), cell(short(strings.Join(res.podrun.messages, "; "))), note)
	}
	b.WriteString("\n")

	fmt.Fprintf(&b, "## Both accept (%d)\n\n", len(agree))
	b.WriteString("| case | field | podrun's warnings | the apiserver's warnings |\n| --- | --- | --- | --- |\n")
	for _, res := range agree {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", res.Name, code(res.Field),
			cell(short(strings.Join(res.podrun.warnings, "; "))), cell(short(strings.Join(res.api.warnings, "; "))))
	}
	return b.String()
}

// discrepancies is what the test logs: the summary and the tables of
// disagreement (the tables of agreement are in the Markdown file only).
func (r *report) discrepancies() string {
	md := r.markdown()
	if i := strings.Index(md, "\n## Both reject"); i >= 0 {
		md = md[:i] + "\n(The cases both accept or both reject are listed in the report PODRUN_PARITY_REPORT writes.)\n"
	}
	return md
}

func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + strings.ReplaceAll(s, "`", "'") + "`"
}

// cell makes text safe in a Markdown table cell.
func cell(s string) string {
	s = strings.NewReplacer("\r", " ", "\n", " ", "|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
	return strings.Join(strings.Fields(s), " ")
}

// short cuts a long message for the tables of agreement.
func short(s string) string {
	const max = 240
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
