package statsd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The npm packages the acceptance tests run, pinned. hot-shots is a
// third-party StatsD/DogStatsD client; statsd is etsy's server, the
// reference the collector must agree with.
var npmPackages = []string{"hot-shots@10.2.1", "statsd@0.9.0"}

// npmDir is where they are installed: $MDBUS_STATSD_NPM, or a directory
// in the user's cache named after the pinned versions.
func npmDir() string {
	if d := os.Getenv("MDBUS_STATSD_NPM"); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "mdbus-statsd-npm", strings.NewReplacer("@", "-", "/", "_").Replace(strings.Join(npmPackages, "_")))
}

func npmInstalled(dir string) bool {
	for _, p := range npmPackages {
		name := p[:strings.LastIndex(p, "@")]
		if _, err := os.Stat(filepath.Join(dir, "node_modules", name, "package.json")); err != nil {
			return false
		}
	}
	return true
}

// ensureNPM installs the pinned packages unless they are there or node
// or npm is missing (the tests then skip, or fail under CI=true). It runs
// outside the lab, before the tests.
func ensureNPM() {
	dir := npmDir()
	if npmInstalled(dir) {
		return
	}
	if _, err := exec.LookPath("node"); err != nil {
		return
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "statsd tests: %v\n", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append([]string{"install", "--prefix", dir, "--no-audit", "--no-fund", "--ignore-scripts", "--no-save"}, npmPackages...)
	cmd := exec.CommandContext(ctx, "npm", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "statsd tests: npm %s: %v\n", strings.Join(args, " "), err)
	}
}

// requireNode returns the node_modules directory, or skips the test
// (fails under CI=true) when node or the packages are missing.
func requireNode(t *testing.T) string {
	t.Helper()
	dir := npmDir()
	_, err := exec.LookPath("node")
	if err == nil && npmInstalled(dir) {
		return filepath.Join(dir, "node_modules")
	}
	why := fmt.Sprintf("node or the npm packages %v are missing in %s (the test installs them with npm before entering the lab)", npmPackages, dir)
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

// nodeCmd runs a script of scripts/ with node, the packages on NODE_PATH.
func nodeCmd(ctx context.Context, modules, script string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join("scripts", script)}, args...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	return cmd
}
