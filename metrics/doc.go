// Package metrics owns framectl's Prometheus exposition: collectors that
// read the stats of package session, host and bucket at scrape time, a bucket
// wrapper that counts and times every request, and a session.Observer that
// feeds histograms. A runtime registers one [Metrics] per node with its
// registry and serves it (examples/actorhost serves /metrics).
//
// It must never change what it observes: the wrapped bucket answers
// exactly what the bucket beneath answers, and is paced as that bucket is
// (it says what it wraps, session.Config.UploadInterval); the observer's funcs
// only add to counters and histograms. And it must never block a commit:
// nothing here runs while SQLite writes. A bucket request costs an atomic
// add and a histogram observation more; a Durable call, a clock reading
// and an observation after its wait; a scrape reads host.Stats, which
// holds the host's lock only to list the actors, then takes each
// database's lock for a moment (framectl.DB.Stats), and in peer mode each
// session's (quorum.Session.Stats), never across I/O.
//
// # One series per node, never per actor
//
// A node may hold 10,000 actors, and an actor's namespace and ID are
// whatever its requests name (in examples/actorhost, any client's), so
// neither is ever a label: per-actor series would be unbounded in number.
// The replication of the actors is summed over the node instead (the
// lagging ones counted, their lag summed and its maximum, the bytes
// pending summed and their maximum), and labels take only the few values
// listed below. An operator who needs one actor's figures reads them from
// the runtime (actorhost's /status) or the bucket (framectl ls).
//
// # Metrics
//
// From the bucket wrapper ([Metrics.Bucket]), every request of the node:
// uploads, restores, compaction, leases, claims, the alarm index.
//
//	framectl_bucket_requests_total{op,result}         counter    requests; op: get, put, stat, list, delete,
//	                                                              delete_many; result: ok, not_found, precondition,
//	                                                              canceled, error
//	framectl_bucket_request_duration_seconds{op}      histogram  latency (a get: until its body is open)
//
// From the session.Observer ([Metrics.Observer]), one event at a time (the
// names keep the prefix framectl_vfs_ they had before package vfs was split
// into capture, session and framectl: dashboards and alerts use them):
//
//	framectl_vfs_durable_wait_seconds                 histogram  each framectl.DB.Durable call's wait (the output gate)
//	framectl_vfs_durable_errors_total                 counter    Durable calls that returned an error
//	framectl_vfs_compactions_total{result}            counter    background compaction passes: ok, error, canceled
//	framectl_vfs_compaction_duration_seconds          histogram  their duration
//	framectl_vfs_restores_total{result}               counter    restores from the bucket at open: ok, error
//	framectl_vfs_restore_duration_seconds             histogram  their duration
//	framectl_vfs_proofs_total{result}                 counter    reads of own.json acknowledgements waited for: ok,
//	                                                             fenced (another claim), error (retried)
//	framectl_vfs_proof_duration_seconds               histogram  their duration
//
// From host.Stats, read at each scrape ([Metrics.Watch]):
//
//	framectl_host_actors{state}                       gauge      actors by state: queued, opening, open (held), closing
//	framectl_vfs_lagging_actors                       gauge      open databases with a commit not yet in the bucket
//	framectl_vfs_lag_max_seconds                      gauge      the oldest such commit's age, over the node
//	framectl_vfs_lag_sum_seconds                      gauge      the sum of each database's lag
//	framectl_vfs_pending_bytes                        gauge      page bytes not yet in the bucket, summed
//	framectl_vfs_pending_max_bytes                    gauge      the most one database has pending
//	framectl_vfs_upload_failing_actors                gauge      databases whose uploads fail now
//	framectl_vfs_stopped_actors                       gauge      databases whose replication stopped
//	framectl_host_claims_total{result}                counter    opens (each claims first): ok, held (by a live
//	                                                              node elsewhere), waiting (for a dead holder's
//	                                                              lease, a locked directory), failed
//	framectl_host_node_losses_total{reason}           counter    this node lost: fenced, lease_lost
//	framectl_host_peers_fenced_total                  counter    expired peers this node fenced
//	framectl_host_actors_dropped_total{reason}        counter    actors taken out of service: fenced, stopped
//	framectl_host_alarms_pending                      gauge      actors whose alarm this host will look at
//	framectl_host_alarm_runs_total{result}            counter    alarm handler runs: ok, failed
//	framectl_host_alarms_dropped_total                counter    alarms given up after their last retry
//	framectl_host_alarms_late_total                   counter    first runs more than a second after their time
//	framectl_host_alarm_lateness_seconds              summary    how late each first run started (sum, count)
//	framectl_host_draining                            gauge      1 once the host stopped claiming to drain
//	framectl_host_drain_actors_total{outcome}         counter    actors of a drain by what their hook did:
//	                                                              drained, skipped, failed, timed_out
//
// From host.Stats.Peers, read at each scrape, only from a host in peer
// mode (host.Config.Peers: acknowledgement by followers). They are named
// framectl_quorum_ for package quorum, which runs the follower protocol
// on a node, owner's side and follower's: "peers" already names other
// nodes in framectl_host_peers_fenced_total (leases fenced), which has
// nothing to do with followers. The acknowledgement counts are session.Stats'
// summed over the node's databases, open and closed since the host
// started (so they only grow); the rest is the hub's (quorum.Hub.Stats,
// every field), the open actors' sessions summed, and the follower store.
//
//	framectl_quorum_acks_total{by}                    counter    acknowledgements (Durable, Sync commits) by what
//	                                                              gave them first: followers (q held it), bucket
//	framectl_quorum_entries_total                     counter    commits handed to the followers
//	framectl_quorum_backpressure_total                counter    waits for the bucket: the followers held their bound
//	framectl_quorum_sessions                          gauge      follower protocol sessions running (owner, takeover)
//	framectl_quorum_takeovers_total                   counter    takeovers started (the old owner's followers fenced)
//	framectl_quorum_tails_recovered_total             counter    takeovers that recovered commits the bucket lacked
//	framectl_quorum_superseded_total                  counter    sessions a follower said a newer epoch fenced
//	framectl_quorum_late_replies_total                counter    replies for an actor with no session here (dropped)
//	framectl_quorum_send_errors_total                 counter    sends the transport refused (the protocol resends)
//	framectl_quorum_store_errors_total                counter    follower store failures (full: the owner stops
//	                                                              sending to it)
//	framectl_quorum_fences_promised_total             counter    fences the follower store answered with a promise
//	framectl_quorum_unproven_total                    counter    fences and resets refused: own.json shows no owner
//	                                                              of their epoch
//	framectl_quorum_claim_read_errors_total           counter    failed reads of own.json for that check (dropped)
//	framectl_quorum_followers_replaced_total          counter    followers replaced while their session ran (failed
//	                                                              or no live node served them; own.json recorded it)
//	framectl_quorum_actors_with_followers             gauge      open actors whose session has followers
//	framectl_quorum_followers{state}                  gauge      followers in the open actors' sets: active (sent
//	                                                              to, answering or not), failed (full, broken)
//	framectl_quorum_below_quorum_actors               gauge      open actors with fewer active followers than their
//	                                                              quorum (the bucket alone acknowledges)
//	framectl_quorum_follower_lag_sum_commits          gauge      commits of its owner's log each active follower
//	framectl_quorum_follower_lag_max_commits          gauge      lacks, summed, and the most (a dead follower's grows)
//	framectl_quorum_store_bytes                       gauge      what the follower store holds for other nodes' actors
package metrics
