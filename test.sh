#!/usr/bin/env bash
# test.sh: framectl's whole test suite, on a fresh machine, in one command.
#
#   ./test.sh              vet, generated-code check, go test -race ./...,
#                          the packages whose tests -race cuts again without
#                          it, a short run of every fuzz target
#   FUZZTIME=1000000x ./test.sh   fuzz longer (executions per target)
#   FUZZTIME=0 ./test.sh          no fuzzing
#   FUZZTIME_HEAVY=100000x ./test.sh  the heavy targets' budget alone (below)
#
# Fuzz budgets are execution counts, not durations: with a duration, Go 1.26's
# fuzz coordinator can fail a target with a bare "context deadline exceeded"
# at the deadline and no crashing input (golang/go#75804, fixed in Go 1.27).
#
# It starts a real S3 server (versitygw, installed on first use and cached in
# $HOME/.cache) on 127.0.0.1 for the S3 tests, and installs Debian's capnp
# compiler if it is missing (to check that the committed generated code is
# what the schema generates). With CI=true, a test that needs S3 and finds no
# server fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")"

if [ -z "${FRAMECTL_TEST_S3:-}" ]; then
  exec scripts/with-s3.sh "$0" "$@"
fi

# The targets whose every execution opens SQLite or runs a whole restore
# cost 2-5 ms an execution, against 0.1-0.3 ms for a decoder alone: at
# 30,000 executions they took 450 of the fuzz step's 600 s in CI. They run
# a third of the executions, unless FUZZTIME is given: then every target
# runs it (FUZZTIME_HEAVY still overrides).
if [ -n "${FUZZTIME:-}" ]; then FUZZTIME_HEAVY=${FUZZTIME_HEAVY:-$FUZZTIME}; fi
FUZZTIME=${FUZZTIME:-30000x}
FUZZTIME_HEAVY=${FUZZTIME_HEAVY:-10000x}
heavy_fuzz=" FuzzReadManifestContent FuzzRestore FuzzSnapshotContent FuzzBatchContent FuzzReadChunkContent "
step() { printf '\n== %s\n' "$*" >&2; }

step "no build outputs or large files tracked by git"
# A compiled binary (ELF, Mach-O, PE) or any file over 1 MiB does not
# belong in git: a 24 MB framebench executable once sat at the root.
tracked_bad=
if git rev-parse --git-dir >/dev/null 2>&1; then tracked_bad=$(git ls-files -z | while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue
  size=$(stat -c %s -- "$f")
  if [ "$size" -gt $((1 << 20)) ]; then echo "$f: $size bytes (over 1 MiB)"; continue; fi
  magic=$(head -c 4 -- "$f" | od -An -tx1 | tr -d ' \n')
  case "$magic" in
    7f454c46) echo "$f: an ELF executable" ;;
    feedface|feedfacf|cefaedfe|cffaedfe|cafebabe) echo "$f: a Mach-O executable" ;;
    4d5a*) echo "$f: a PE executable" ;;
  esac
done); fi
if [ -n "$tracked_bad" ]; then echo "git tracks build outputs or large files (git rm --cached them; .gitignore):" >&2; echo "$tracked_bad" >&2; exit 1; fi

step "go vet"
go vet ./...

step "gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then echo "gofmt needed:" >&2; echo "$unformatted" >&2; exit 1; fi

step "generated Cap'n Proto code is up to date"
if ! command -v capnp >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y -qq capnproto >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq capnproto >/dev/null; }
  fi
fi
if command -v capnp >/dev/null; then
  go generate ./capnp/...
  git diff --exit-code -- capnp/ || { echo "capnp/: generated code differs from the committed code" >&2; exit 1; }
elif [ "${CI:-}" = true ]; then
  echo "capnp compiler missing and could not be installed (apt package capnproto)" >&2; exit 1
else
  echo "skipped: no capnp compiler (apt-get install capnproto)" >&2
fi

step "go test -race ./..."
go test -race -timeout 30m -count=1 ./...

# The race detector instruments SQLite itself (go-sqlite3 is SQLite
# translated to Go; about five times slower) and slows follow's simulation
# about tenfold, so under -race these packages cut their tests
# (internal/race): restore's corruption sweep keeps every third damaged
# version and its workloads shrink to a third, compact's live-writer test
# runs 120 rounds instead of 200, session's random workloads run a third of
# their operations, capture's zero-allocation check is off, the SIGKILL
# test (package framectl, the root) kills 20 times instead of 100, and
# follow's simulation runs a fifth of its seeds. Run them again without
# -race, in full.
step "go test ./restore ./compact . ./session ./capture ./follow (full, without -race)"
go test -timeout 30m -count=1 ./restore ./compact . ./session ./capture ./follow

if [ "$FUZZTIME" != 0 ]; then
  for target in $(go test -list '^Fuzz' ./fuzz | grep '^Fuzz'); do
    budget=$FUZZTIME
    case "$heavy_fuzz" in *" $target "*) budget=$FUZZTIME_HEAVY ;; esac
    step "fuzz $target for $budget"
    go test ./fuzz -run '^$' -fuzz "^${target}\$" -fuzztime "$budget" -fuzzminimizetime 5s
  done
fi

step "all tests passed"
