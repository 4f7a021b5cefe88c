package follow

// faults are deliberate breaks of the protocol, each turning off one rule
// the package documentation says the protocol must keep. Only the
// simulation's self-test sets them (sim_faults_test.go), to show that the
// simulation fails when the rule is broken; they are all false otherwise.
var faults struct {
	fewerAnswers      bool // a takeover picks its tail from n-q answers
	ackBelowQuorum    bool // an owner acknowledges what q-1 followers hold
	longestNotNewest  bool // a takeover picks the longest log, ignoring log epochs
	ignoreBucketChain bool // a takeover takes a tail that does not chain from the bucket's durable point
	noFenceCheck      bool // a follower takes messages of epochs older than its promise
	noChainCheck      bool // a follower takes entries that are not chained
	noCatchUp         bool // a replacement counts toward q before it holds what was acknowledged
	partialReset      bool // an owner's reset carries only part of its tail, a later Append the rest
}
