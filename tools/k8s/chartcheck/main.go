// Command chartcheck runs the chart's consistency checks that no off-the-shelf
// tool does (scripts/chart-test.sh calls it):
//
//	chartcheck metric-names -rules R -dashboard D        print the receipts_* metric names the rules' and dashboard's queries use
//	chartcheck rules -rules R -tests T[,T...] -runbook M  every alert has summary, description and a runbook_url whose anchor is a heading of M, and a test case where it fires and one where it does not
//	chartcheck dashboard D                              Grafana JSON: schemaVersion, ${datasource} everywhere, unique ids, no overlapping panels, every query non-empty
//	chartcheck values-doc -values V -readme README      every leaf key of V appears in README as `key`
//	chartcheck manifests FILE                           rendered chart: restricted security contexts, probes, resources, grace periods, no credentials outside Secrets
//	chartcheck pods FILE                                print one Pod per workload of a rendered chart (for Pod Security admission)
//
// It exits 1 listing every problem found.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var problems []string
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "metric-names":
		err = metricNamesCmd(args)
	case "rules":
		problems, err = rulesCmd(args)
	case "dashboard":
		if len(args) != 1 {
			usage()
		}
		problems, err = checkDashboard(args[0])
	case "values-doc":
		problems, err = valuesDocCmd(args)
	case "pods":
		if len(args) != 1 {
			usage()
		}
		err = podsCmd(args[0])
	case "manifests":
		if len(args) != 1 {
			usage()
		}
		problems, err = checkManifests(args[0])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartcheck:", err)
		os.Exit(2)
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "chartcheck:", p)
		}
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: chartcheck metric-names|rules|dashboard|values-doc|manifests|pods ... (see the package doc)")
	os.Exit(2)
}

// --- rules -----------------------------------------------------------------

type ruleFile struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval"`
		Rules    []struct {
			Alert       string            `json:"alert"`
			Record      string            `json:"record"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func readYAML(path string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// metricName matches the project's metric names in a PromQL expression;
// recorded series (receipts:...) have a colon and do not match.
var metricName = regexp.MustCompile(`\breceipts_[a-zA-Z0-9_]+\b`)

func namesIn(exprs []string) []string {
	set := map[string]bool{}
	for _, e := range exprs {
		for _, m := range metricName.FindAllString(e, -1) {
			set[m] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func ruleExprs(path string) ([]string, error) {
	var rf ruleFile
	if err := readYAML(path, &rf); err != nil {
		return nil, err
	}
	var exprs []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	return exprs, nil
}

// dashboardExprs returns every query of a dashboard: panel targets' expr
// and template variables' queries.
func dashboardExprs(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch n := v.(type) {
		case map[string]any:
			for k, c := range n {
				if s, ok := c.(string); ok && (k == "expr" || k == "query" || k == "definition") {
					exprs = append(exprs, s)
				}
				walk(c)
			}
		case []any:
			for _, c := range n {
				walk(c)
			}
		}
	}
	walk(doc)
	return exprs, nil
}

func metricNamesCmd(args []string) error {
	fs := flag.NewFlagSet("metric-names", flag.ExitOnError)
	rules := fs.String("rules", "", "Prometheus rule file")
	dash := fs.String("dashboard", "", "Grafana dashboard JSON")
	_ = fs.Parse(args)
	if *rules == "" || *dash == "" {
		return errors.New("metric-names needs -rules and -dashboard")
	}
	re, err := ruleExprs(*rules)
	if err != nil {
		return err
	}
	de, err := dashboardExprs(*dash)
	if err != nil {
		return err
	}
	for _, n := range namesIn(append(re, de...)) {
		fmt.Println(n)
	}
	return nil
}

type testFile struct {
	RuleFiles          []string `json:"rule_files"`
	EvaluationInterval string   `json:"evaluation_interval"`
	GroupEvalOrder     []string `json:"group_eval_order"`
	Tests              []struct {
		Name          string `json:"name"`
		Interval      string `json:"interval"`
		InputSeries   []any  `json:"input_series"`
		AlertRuleTest []struct {
			EvalTime  string `json:"eval_time"`
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
		PromQLExprTest []any `json:"promql_expr_test"`
	} `json:"tests"`
}

// anchor is GitHub's anchor of a Markdown heading: lower case, punctuation
// dropped, spaces as dashes.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func headingAnchors(markdown string) map[string]bool {
	out := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(markdown, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		out[anchor(strings.TrimLeft(line, "#"))] = true
	}
	return out
}

func rulesCmd(args []string) ([]string, error) {
	fs := flag.NewFlagSet("rules", flag.ExitOnError)
	rules := fs.String("rules", "", "Prometheus rule file")
	tests := fs.String("tests", "", "promtool test files, comma-separated")
	runbook := fs.String("runbook", "", "Markdown runbook the runbook_url anchors point into")
	_ = fs.Parse(args)
	if *rules == "" || *tests == "" || *runbook == "" {
		return nil, errors.New("rules needs -rules, -tests and -runbook")
	}
	var rf ruleFile
	if err := readYAML(*rules, &rf); err != nil {
		return nil, err
	}
	md, err := os.ReadFile(*runbook)
	if err != nil {
		return nil, err
	}
	anchors := headingAnchors(string(md))
	fires := map[string]bool{}
	quiet := map[string]bool{}
	var problemsEarly []string
	for _, p := range strings.Split(*tests, ",") {
		var tf testFile
		if err := readYAML(p, &tf); err != nil {
			return nil, err
		}
		// promtool orders only the groups group_eval_order lists (the others
		// tie with the first): when it is used, it must name every group.
		if len(tf.GroupEvalOrder) > 0 {
			listed := map[string]bool{}
			for _, g := range tf.GroupEvalOrder {
				listed[g] = true
			}
			for _, g := range rf.Groups {
				if !listed[g.Name] {
					problemsEarly = append(problemsEarly, fmt.Sprintf("%s: group_eval_order does not list group %s", p, g.Name))
				}
			}
		}
		for _, t := range tf.Tests {
			for _, a := range t.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
		}
	}
	problems := problemsEarly
	alerts := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if alerts[r.Alert] {
				problems = append(problems, fmt.Sprintf("alert %s: defined twice", r.Alert))
			}
			alerts[r.Alert] = true
			for _, k := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[k]) == "" {
					problems = append(problems, fmt.Sprintf("alert %s: no %s annotation", r.Alert, k))
				}
			}
			if sev := r.Labels["severity"]; sev != "critical" && sev != "warning" {
				problems = append(problems, fmt.Sprintf("alert %s: severity %q, want critical or warning", r.Alert, sev))
			}
			if u := r.Annotations["runbook_url"]; u != "" {
				_, frag, ok := strings.Cut(u, "#")
				if !ok || !anchors[frag] {
					problems = append(problems, fmt.Sprintf("alert %s: runbook_url %s has no matching heading in %s", r.Alert, u, *runbook))
				}
			}
			if !fires[r.Alert] {
				problems = append(problems, fmt.Sprintf("alert %s: no promtool test where it fires", r.Alert))
			}
			if !quiet[r.Alert] {
				problems = append(problems, fmt.Sprintf("alert %s: no promtool test where it does not fire", r.Alert))
			}
		}
	}
	for name := range fires {
		if !alerts[name] {
			problems = append(problems, fmt.Sprintf("tests name alert %s, which the rules do not define", name))
		}
	}
	if len(alerts) == 0 {
		problems = append(problems, "no alert in "+*rules)
	}
	sort.Strings(problems)
	return problems, nil
}

// --- dashboard -------------------------------------------------------------

type gridPos struct{ H, W, X, Y int }

type panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	GridPos    gridPos         `json:"gridPos"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		Datasource json.RawMessage `json:"datasource"`
		Expr       string          `json:"expr"`
		RefID      string          `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

func checkDashboard(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d struct {
		Title         string  `json:"title"`
		UID           string  `json:"uid"`
		SchemaVersion int     `json:"schemaVersion"`
		Panels        []panel `json:"panels"`
		Templating    struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return []string{fmt.Sprintf("%s: not valid JSON: %v", path, err)}, nil
	}
	var problems []string
	add := func(f string, a ...any) { problems = append(problems, fmt.Sprintf(f, a...)) }
	if d.Title == "" || d.UID == "" {
		add("dashboard needs a title and a uid")
	}
	if d.SchemaVersion < 36 {
		add("schemaVersion %d: want 36 or later", d.SchemaVersion)
	}
	hasDS := false
	for _, v := range d.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus" {
			hasDS = true
		}
	}
	if !hasDS {
		add("no datasource template variable of type datasource for prometheus")
	}
	dsOK := func(raw json.RawMessage) bool {
		var ds struct{ Type, UID string }
		return json.Unmarshal(raw, &ds) == nil && ds.UID == "${datasource}"
	}
	ids := map[int]string{}
	var all []panel
	for _, p := range d.Panels {
		all = append(all, p)
		all = append(all, p.Panels...)
	}
	for _, p := range all {
		if prev, dup := ids[p.ID]; dup {
			add("panel id %d used by %q and %q", p.ID, prev, p.Title)
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		if !dsOK(p.Datasource) {
			add("panel %q: datasource is not ${datasource}", p.Title)
		}
		if len(p.Targets) == 0 {
			add("panel %q: no query", p.Title)
		}
		for _, t := range p.Targets {
			if strings.TrimSpace(t.Expr) == "" {
				add("panel %q: query %s is empty", p.Title, t.RefID)
			}
			if !dsOK(t.Datasource) {
				add("panel %q: query %s datasource is not ${datasource}", p.Title, t.RefID)
			}
		}
		if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			add("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
		}
	}
	for i, a := range all {
		for _, b := range all[i+1:] {
			ga, gb := a.GridPos, b.GridPos
			if ga.X < gb.X+gb.W && gb.X < ga.X+ga.W && ga.Y < gb.Y+gb.H && gb.Y < ga.Y+ga.H {
				add("panels %q and %q overlap", a.Title, b.Title)
			}
		}
	}
	return problems, nil
}

// --- values documentation ---------------------------------------------------

// leaves lists the dotted paths of a values tree's leaves: scalars, lists,
// and empty maps.
func leaves(prefix string, v any, out *[]string) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		*out = append(*out, prefix)
		return
	}
	for k, c := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		leaves(p, c, out)
	}
}

func valuesDocCmd(args []string) ([]string, error) {
	fs := flag.NewFlagSet("values-doc", flag.ExitOnError)
	values := fs.String("values", "", "values.yaml")
	readme := fs.String("readme", "", "README documenting the values")
	_ = fs.Parse(args)
	if *values == "" || *readme == "" {
		return nil, errors.New("values-doc needs -values and -readme")
	}
	var v map[string]any
	if err := readYAML(*values, &v); err != nil {
		return nil, err
	}
	doc, err := os.ReadFile(*readme)
	if err != nil {
		return nil, err
	}
	var paths []string
	leaves("", v, &paths)
	sort.Strings(paths)
	var problems []string
	for _, p := range paths {
		if !strings.Contains(string(doc), "`"+p+"`") {
			problems = append(problems, fmt.Sprintf("value %s is not documented in %s (as `%s`)", p, *readme, p))
		}
	}
	if len(paths) == 0 {
		problems = append(problems, "no value in "+*values)
	}
	return problems, nil
}
