package restore

import "context"

// IntegrityCheckOS is IntegrityCheck through go-sqlite3's plain "os" VFS,
// as it ran before it read ahead: BenchmarkIntegrityCheck's baseline.
var IntegrityCheckOS = func(ctx context.Context, path string) error {
	return integrityCheck(ctx, path, "os")
}
