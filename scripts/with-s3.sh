#!/usr/bin/env bash
# with-s3.sh CMD...: run CMD with a real S3 server (versitygw) on loopback.
#
# Installs versitygw from the Go module proxy the first time (about five
# minutes on two cores) and keeps the binary in $HOME/.cache, starts it on a
# free 127.0.0.1 port over a temporary directory, exports the variables the
# tests read, runs CMD, and stops the server whatever CMD does.
#
#   FRAMECTL_TEST_S3   bucket URL for tests, e.g. s3://test/?endpoint=127.0.0.1:34567&insecure=1
#   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION   credentials for it
#
# versitygw is Apache-2.0; it is run, never vendored or committed.
set -euo pipefail

VGW_VERSION=v1.8.0
VGW_BIN_DIR=${VGW_BIN_DIR:-$HOME/.cache/versitygw-$VGW_VERSION}
VGW=$VGW_BIN_DIR/versitygw

if [ ! -x "$VGW" ]; then
  echo "with-s3: installing versitygw $VGW_VERSION into $VGW_BIN_DIR (about 5 min cold)..." >&2
  GOBIN=$VGW_BIN_DIR GOFLAGS= go install "github.com/versity/versitygw/cmd/versitygw@$VGW_VERSION"
fi

S3_DIR=$(mktemp -d "${TMPDIR:-/tmp}/framectl-s3.XXXXXX")
BUCKET=test
mkdir -p "$S3_DIR/data/$BUCKET"   # versitygw posix: a bucket is a top-level directory
export AWS_ACCESS_KEY_ID=framectl-test AWS_SECRET_ACCESS_KEY=framectl-test-secret-0123456789 AWS_REGION=us-east-1

VGW_PID=
stop_s3() {
  if [ -n "$VGW_PID" ]; then kill "$VGW_PID" 2>/dev/null || true; wait "$VGW_PID" 2>/dev/null || true; fi
  rm -rf "$S3_DIR"
}
trap stop_s3 EXIT

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

for _ in 1 2 3 4 5 6 7 8 9 10; do
  PORT=$(( 20000 + RANDOM % 40000 ))
  port_free "$PORT" || continue
  ROOT_ACCESS_KEY=$AWS_ACCESS_KEY_ID ROOT_SECRET_KEY=$AWS_SECRET_ACCESS_KEY \
    "$VGW" --port "127.0.0.1:$PORT" --quiet posix "$S3_DIR/data" >"$S3_DIR/vgw.log" 2>&1 &
  VGW_PID=$!
  for _ in $(seq 1 100); do                  # up to 10 s; usually ready in ~0.3 s
    kill -0 "$VGW_PID" 2>/dev/null || break  # exited (port taken?): try another port
    if ! port_free "$PORT"; then break 2; fi # listening: ready
    sleep 0.1
  done
  kill "$VGW_PID" 2>/dev/null || true; wait "$VGW_PID" 2>/dev/null || true; VGW_PID=
done
if [ -z "$VGW_PID" ]; then echo "with-s3: versitygw did not start:" >&2; cat "$S3_DIR/vgw.log" >&2; exit 1; fi

export FRAMECTL_TEST_S3="s3://$BUCKET/?endpoint=127.0.0.1:$PORT&insecure=1"
echo "with-s3: versitygw $VGW_VERSION pid $VGW_PID at $FRAMECTL_TEST_S3" >&2
"$@"
