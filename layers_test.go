package framectl_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/framectl/framectl"

// goList runs go list with args and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return strings.Fields(string(out))
}

// The layers stay apart: the SQLite adapter knows nothing of buckets,
// fencing, followers, restore or compaction (within the module it depends
// on frames, capnp and internal packages only), and the replication
// session never imports go-sqlite3 itself (the restore it calls may).
func TestLayers(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to list the packages' imports: %v", err)
	}
	allowed := func(pkg string) bool {
		rel, ok := strings.CutPrefix(pkg, module+"/")
		return !ok || rel == "capture" || rel == "frames" || rel == "capnp" || strings.HasPrefix(rel, "internal/")
	}
	for _, adapter := range []string{"./capture", "./internal/captured"} {
		deps := goList(t, "-deps", adapter)
		if !slices.Contains(deps, module+"/frames") {
			t.Fatalf("go list -deps %s lists no frames: %v", adapter, deps)
		}
		for _, d := range deps {
			if strings.HasPrefix(d, module) && !allowed(d) {
				t.Errorf("%s depends on %s: the adapter must know only frames, capnp and internal packages", adapter, d)
			}
		}
	}
	imports := goList(t, "-f", `{{join .Imports " "}}`, "./session")
	if !slices.Contains(imports, module+"/bucket") {
		t.Fatalf("go list of ./session's imports lists no bucket: %v", imports)
	}
	for _, imp := range imports {
		if strings.HasPrefix(imp, "github.com/ncruces/go-sqlite3") || imp == module+"/capture" {
			t.Errorf("session imports %s: it must never know SQLite's formats (its Local does that)", imp)
		}
	}
}
