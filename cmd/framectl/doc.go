// Command framectl is the operator CLI of framectl: it restores, verifies,
// lists, inspects and compacts what replicated SQLite databases put in a
// bucket, and runs a demonstration of the whole cycle. One file per
// command (its flags, help, run and output); main.go dispatches.
//
// It must never change a bucket from a read-only command (restore, verify,
// ls and inspect create nothing, not even a missing file:// directory),
// print anything on stdout under --json but the one JSON document, or tell
// errors apart by their text (exitcodes.go matches sentinels).
//
// The synopsis, as `framectl COMMAND -h` prints it from each command's flag
// set (synopsis.go; TestSynopsis checks these lines and the README's):
//
//	framectl demo [--dir DIR] [--bucket URL] [--commits N] [--clients N]
//	              [--seed N] [--json [-v]]
//	framectl restore --bucket URL
//	                 (--namespace NS [--tenant TENANT] | --namespace-id ID)
//	                 --actor HEX --out FILE [--to-seq N | --at TIME]
//	                 [--nearest] [--parallel N] [--json [-v]]
//	framectl restore --bucket URL
//	                 (--namespace NS [--tenant TENANT] | --namespace-id ID)
//	                 --all --out DIR [--to-seq N | --at TIME] [--nearest]
//	                 [--parallel N] [--json [-v]]
//	framectl verify --bucket URL
//	                [--namespace NS [--tenant TENANT] | --namespace-id ID]
//	                [--actor HEX] [--grace DURATION] [--parallel N]
//	                [--scratch DIR] [--json [-v]]
//	framectl ls --bucket URL
//	            [--namespace NS [--tenant TENANT] | --namespace-id ID]
//	            [--actor HEX] [--headers] [--json [-v]]
//	framectl inspect --bucket URL KEY [--pages] [--json [-v]]
//	framectl inspect FILE [--kind KIND] [--pages] [--json [-v]]
//	framectl compact --bucket URL
//	                 (--namespace NS [--tenant TENANT] | --namespace-id ID)
//	                 [--actor HEX]
//	                 [--retention DURATION [--shorten-retention]] [--force]
//	                 [--live] [--grace DURATION] [--scratch DIR]
//	                 [--sweep-leases AGE] [--json [-v]]
//	framectl help [COMMAND]
//
// Bucket URLs are s3://BUCKET/PREFIX?endpoint=HOST:PORT&region=R&insecure=1
// (credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN) or file:///DIR for a local directory bucket. A namespace
// is given by its unique key (--namespace, with --tenant, default empty) or
// by its path element (--namespace-id, the 22 characters ls prints).
//
// Every command takes --json and then prints exactly one JSON document on
// stdout, whatever the outcome: when the exit code is not 0 it has an
// "error" member {"code", "kind", "message"} (jsonerror.go). Progress goes
// to stderr: a bar on a terminal, plain lines otherwise, none with --json
// unless -v. Errors go to stderr, one line each, naming the object
// concerned.
//
// Exit codes (the word after the code is the "kind" of the JSON error), as
// `framectl help` prints them (exitcodes.go; TestSynopsis checks them):
//
//	0    success; verify: no damage found (warnings allowed)
//	1    damage: an object in the bucket is corrupt, truncated, of a format
//	     this build does not know, missing although another object names
//	     it, or inconsistent with the others (a gap or a broken checksum
//	     chain in the log, an own.json or node lease that does not parse),
//	     found by verify or inspect, or the operation failed on it. An I/O
//	     error (3), an object that nothing names and that does not exist
//	     (4) and an interruption (130) are not damage
//	2    usage: a flag or argument is wrong or missing
//	3    io: the bucket is unreachable, or an I/O error (network, disk,
//	     permissions)
//	4    not-found: no such bucket, actor, session, snapshot or object, or a restore
//	     target outside what the session holds (restore --nearest)
//	130  interrupted: SIGINT or SIGTERM
package main
