package follow

// MaxActorBytes bounds an actor's name as the follower protocol and its
// stores carry it: 1 to MaxActorBytes bytes, any bytes. It is 120 so that
// a store can name a file by the name in hex (package tails does) within
// the 255 bytes of a file name, and so that the transport can carry it in
// front of each message with a length of one byte (package peer does).
const MaxActorBytes = 120

// ValidActor reports whether actor is a name MaxActorBytes allows: not
// empty, and MaxActorBytes bytes at most.
func ValidActor(actor string) bool { return actor != "" && len(actor) <= MaxActorBytes }
