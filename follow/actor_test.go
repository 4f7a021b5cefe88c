package follow

import (
	"strings"
	"testing"
)

// An actor's name is 1 to MaxActorBytes bytes of anything: not UTF-8,
// zeros and control characters included.
func TestValidActor(t *testing.T) {
	for _, c := range []struct {
		actor string
		want  bool
	}{
		{"", false},
		{"a", true},
		{"\x00", true},
		{"\xff\xfe\n", true},
		{strings.Repeat("x", MaxActorBytes), true},
		{strings.Repeat("x", MaxActorBytes+1), false},
		{strings.Repeat("x", 255), false},
	} {
		if got := ValidActor(c.actor); got != c.want {
			t.Errorf("ValidActor of %d bytes %q: %v, want %v", len(c.actor), c.actor, got, c.want)
		}
	}
}
