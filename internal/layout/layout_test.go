package layout

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/mdbus/mdbus"

// rule says where a package (or a group, "tools/...") sits and what it may
// import. Ranks rise from helpers to commands; a package imports only
// packages of a lower rank.
type rule struct {
	pattern string
	rank    int
	// may lists the module packages it may import. With below set it may
	// import every package of a lower rank instead (and others of its own
	// group).
	may   []string
	below bool
	// stdOnly: the standard library only, no module or outside package.
	stdOnly bool
	// testOnly: imported only by test code, commands and other test-only
	// packages.
	testOnly bool
}

// helpers are the low-level packages that any role may use.
var helpers = []string{"packetconn", "internal/sock", "internal/monotime", "internal/alarm", "internal/logx", "internal/ratelimit", "internal/cfgcheck"}

func with(extra ...string) []string { return append(slices.Clone(helpers), extra...) }

// rules is the Layout table of README.md, from the bottom up. Keep them
// equal: TestREADMEMatchesRules compares them.
var rules = []rule{
	{pattern: "wire", rank: 1, stdOnly: true},
	{pattern: "packetconn", rank: 0},
	{pattern: "internal/monotime", rank: 0},
	{pattern: "internal/logx", rank: 0},
	{pattern: "internal/cfgcheck", rank: 0},
	{pattern: "internal/regfile", rank: 0},
	{pattern: "internal/ratelimit", rank: 1, may: []string{"internal/monotime"}},
	{pattern: "internal/alarm", rank: 1, may: []string{"internal/monotime"}},
	{pattern: "internal/verify", rank: 0},
	{pattern: "internal/synth", rank: 0},
	{pattern: "internal/sock", rank: 1, may: []string{"packetconn", "internal/monotime", "internal/cfgcheck"}},
	{pattern: "internal/oneway", rank: 1, may: []string{"internal/synth", "internal/cfgcheck"}},
	{pattern: "internal/validpkt", rank: 2, may: []string{"wire"}},
	{pattern: "packetconn/impair", rank: 2, may: with("wire")},
	{pattern: "nak", rank: 3, may: []string{"wire", "internal/monotime", "internal/cfgcheck"}},
	{pattern: "journal", rank: 4, may: []string{"wire", "internal/monotime", "internal/logx", "internal/regfile", "internal/cfgcheck"}},
	{pattern: "retransmit", rank: 4, may: with("wire", "internal/validpkt")},
	{pattern: "fetch", rank: 4, may: with("wire")},
	{pattern: "publisher", rank: 5, may: with("wire", "internal/validpkt")},
	{pattern: "subscriber", rank: 5, may: with("wire", "nak")},
	{pattern: "replay", rank: 6, may: with("wire", "journal")},
	{pattern: "resume", rank: 6, may: with("wire", "journal", "subscriber", "fetch")},
	{pattern: "fanout", rank: 6, may: with("wire", "journal", "subscriber", "fetch", "internal/regfile")},
	{pattern: "recorder", rank: 7, may: with("wire", "nak", "journal", "retransmit", "subscriber", "resume")},
	{pattern: "bench", rank: 8, may: with("wire", "nak", "retransmit", "publisher", "subscriber", "internal/synth", "internal/oneway", "packetconn/impair")},
	{pattern: "tools/...", rank: 9, below: true},
	{pattern: "cmd/...", rank: 10, below: true},
	{pattern: "bench/peers/...", rank: 10, below: true},
	{pattern: "internal/netlab", rank: 0, testOnly: true},
	{pattern: "internal/race", rank: 0, testOnly: true},
	{pattern: "internal/cfgtest", rank: 0, testOnly: true},
	{pattern: "internal/labtest", rank: 1, testOnly: true, may: []string{"internal/netlab"}},
	{pattern: "internal/impairtest", rank: 3, testOnly: true, may: []string{"wire", "internal/sock"}},
	{pattern: "internal/e2e", rank: 11, testOnly: true, below: true},
	{pattern: "internal/layout", rank: 11, testOnly: true},
}

func (r rule) matches(pkg string) bool {
	if p, ok := strings.CutSuffix(r.pattern, "/..."); ok {
		return strings.HasPrefix(pkg, p+"/")
	}
	return pkg == r.pattern
}

func lookup(pkg string) (rule, bool) {
	for _, r := range rules {
		if r.matches(pkg) {
			return r, true
		}
	}
	return rule{}, false
}

func isTools(pkg string) bool   { return strings.HasPrefix(pkg, "tools/") }
func isCommand(pkg string) bool { r, _ := lookup(pkg); return r.rank == 10 }

// pkg is what "go list -json" says about a package, import paths made
// relative to the module.
type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Standard     bool
}

// listModule runs go list over the whole module.
func listModule(t *testing.T) (pkgs []pkg, std map[string]bool) {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-deps",
		"-json=ImportPath,Imports,TestImports,XTestImports,Standard", "./...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	std = map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		require.NoError(t, dec.Decode(&p))
		if p.Standard {
			std[p.ImportPath] = true
			continue
		}
		if rel, ok := strings.CutPrefix(p.ImportPath, module+"/"); ok {
			p.ImportPath = rel
			pkgs = append(pkgs, p)
		}
	}
	require.NotEmpty(t, pkgs)
	return pkgs, std
}

// violations returns every import of pkgs that breaks the rules. std tells
// standard-library packages apart (test imports outside the module's build
// are judged by their path: no dot in the first element).
func violations(pkgs []pkg, std map[string]bool) []string {
	var bad []string
	isStd := func(p string) bool {
		return std[p] || !strings.Contains(strings.SplitN(p, "/", 2)[0], ".")
	}
	for _, p := range pkgs {
		r, ok := lookup(p.ImportPath)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s: not in the layout table (README.md Layout, internal/layout rules)", p.ImportPath))
			continue
		}
		for _, imp := range p.Imports {
			mod, inModule := strings.CutPrefix(imp, module+"/")
			switch {
			case isStd(imp):
				continue
			case !inModule:
				if r.stdOnly {
					bad = append(bad, fmt.Sprintf("%s imports %s: it may import only the standard library", p.ImportPath, imp))
				}
				continue
			}
			m, ok := lookup(mod)
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("%s imports %s, which is not in the layout table", p.ImportPath, mod))
			case r.stdOnly:
				bad = append(bad, fmt.Sprintf("%s imports %s: it may import only the standard library", p.ImportPath, mod))
			case isTools(mod) && !isTools(p.ImportPath) && !isCommand(p.ImportPath):
				bad = append(bad, fmt.Sprintf("%s imports %s: nothing outside tools/ and cmd/ imports tools/", p.ImportPath, mod))
			case m.testOnly && !r.testOnly && !isCommand(p.ImportPath):
				bad = append(bad, fmt.Sprintf("%s imports %s, which only tests and commands may import", p.ImportPath, mod))
			case r.below:
				if m.rank >= r.rank && !(m.pattern == r.pattern) {
					bad = append(bad, fmt.Sprintf("%s imports %s, which is not below it", p.ImportPath, mod))
				}
			case !slices.Contains(r.may, mod):
				bad = append(bad, fmt.Sprintf("%s imports %s: it may import only %s", p.ImportPath, mod, render(r)))
			}
		}
		if p.ImportPath == "internal/e2e" || isTools(p.ImportPath) || isCommand(p.ImportPath) {
			continue
		}
		for _, imp := range append(slices.Clone(p.TestImports), p.XTestImports...) {
			if mod, ok := strings.CutPrefix(imp, module+"/"); ok && isTools(mod) {
				bad = append(bad, fmt.Sprintf("%s's tests import %s: nothing outside tools/ and cmd/ imports tools/", p.ImportPath, mod))
			}
		}
	}
	return bad
}

func TestImportsFollowLayout(t *testing.T) {
	pkgs, std := listModule(t)
	for _, v := range violations(pkgs, std) {
		t.Error(v)
	}
}

// TestViolationsFound checks that each rule can fail.
func TestViolationsFound(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	for _, tc := range []struct {
		name string
		p    pkg
		want string
	}{
		{"wire imports a module", pkg{ImportPath: "wire", Imports: []string{"fmt", "golang.org/x/sys/unix"}}, "only the standard library"},
		{"role imports tools", pkg{ImportPath: "resume", Imports: []string{m("tools/fetch")}}, "nothing outside tools/"},
		{"helper imports tools", pkg{ImportPath: "internal/oneway", Imports: []string{m("tools/synth")}}, "nothing outside tools/"},
		{"test imports tools", pkg{ImportPath: "journal", TestImports: []string{m("tools/synth")}}, "nothing outside tools/"},
		{"role imports higher role", pkg{ImportPath: "subscriber", Imports: []string{m("recorder")}}, "may import only"},
		{"server imports client", pkg{ImportPath: "retransmit", Imports: []string{m("nak")}}, "may import only"},
		{"tool imports command", pkg{ImportPath: "tools/demo", Imports: []string{m("cmd/mdbus")}}, "not below it"},
		{"library imports the lab", pkg{ImportPath: "publisher", Imports: []string{m("internal/netlab")}}, "only tests and commands"},
		{"unknown package", pkg{ImportPath: "newthing"}, "not in the layout table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := violations([]pkg{tc.p}, map[string]bool{"fmt": true})
			require.Len(t, bad, 1, "%q", bad)
			require.Contains(t, bad[0], tc.want)
		})
	}
	ok := []pkg{
		{ImportPath: "tools/demo", Imports: []string{m("tools/counters"), m("recorder")}},
		{ImportPath: "cmd/mdbus", Imports: []string{m("internal/netlab"), m("tools/demo")}},
		{ImportPath: "internal/e2e", TestImports: []string{m("tools/counters")}},
		{ImportPath: "publisher", TestImports: []string{m("subscriber"), m("internal/netlab")}},
	}
	require.Empty(t, violations(ok, nil))
}

// TestRulesPointDown keeps the table itself honest: no entry may let a
// package import one of its own rank or higher.
func TestRulesPointDown(t *testing.T) {
	for _, r := range rules {
		for _, m := range r.may {
			mr, ok := lookup(m)
			require.True(t, ok, "%s may import %s, which has no rule", r.pattern, m)
			require.Less(t, mr.rank, r.rank, "%s may import %s of a rank not below it", r.pattern, m)
			require.False(t, isTools(m), "%s may import %s", r.pattern, m)
		}
	}
}

// render writes what a rule allows as the README's "may import" cell.
func render(r rule) string {
	var s string
	switch {
	case r.stdOnly:
		s = "the standard library only"
	case r.below && r.rank == 10:
		s = "everything"
	case r.below:
		s = "everything below it"
	case len(r.may) == 0:
		s = "no mdbus package"
	default:
		var parts []string
		may := r.may
		if len(may) >= len(helpers) && slices.Equal(may[:len(helpers)], helpers) {
			parts, may = append(parts, "helpers"), may[len(helpers):]
		}
		for _, m := range may {
			parts = append(parts, "`"+m+"`")
		}
		s = strings.Join(parts, ", ")
	}
	if r.testOnly {
		s += "; imported only by tests and commands"
	}
	return s
}

var backquoted = regexp.MustCompile("`([^`]+)`")

// TestREADMEMatchesRules compares the Layout table of README.md with
// rules: the same packages, each with the same "may import" cell.
func TestREADMEMatchesRules(t *testing.T) {
	f, err := os.Open("../../README.md")
	require.NoError(t, err)
	defer f.Close()
	got := map[string]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Layout"
			continue
		}
		if !in || !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| package ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		require.Len(t, cells, 3, "README Layout row %q: want | package | owns | may import |", line)
		for _, m := range backquoted.FindAllStringSubmatch(cells[0], -1) {
			got[m[1]] = strings.TrimSpace(cells[2])
		}
	}
	require.NoError(t, sc.Err())
	want := map[string]string{}
	for _, r := range rules {
		want[r.pattern] = render(r)
	}
	require.Equal(t, want, got, "README.md's Layout table differs from internal/layout's rules")
}
