package frames

import (
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNumberEncodingExamples(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "00", 1: "01", 15: "0f", 16: "110", 255: "1ff", 256: "2100", 4096: "31000",
		math.MaxUint64: "fffffffffffffffff",
	} {
		assert.Equal(t, want, Asc(n), "Asc(%d)", n)
		desc := []byte(want)
		for i, c := range desc {
			desc[i] = hexDigits[15-hexValue(c)]
		}
		assert.Equal(t, string(desc), Desc(n), "Desc(%d)", n)
	}
	assert.Equal(t, "ff", Desc(0), "Desc(0)")
	assert.Equal(t, "00000000000000000", Desc(math.MaxUint64), "Desc(max)")
}

// numbers returns edge values plus random ones of every length.
func numbers(rng *rand.Rand) []uint64 {
	ns := []uint64{0, 1, 15, 16, 255, 256, 4095, 4096, 1<<32 - 1, 1 << 32, math.MaxUint64 - 1, math.MaxUint64}
	for bits := 1; bits <= 64; bits++ {
		for range 30 {
			ns = append(ns, rng.Uint64()>>(64-bits))
		}
	}
	return ns
}

func TestNumberEncodingSortsAndParses(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	ns := numbers(rng)
	for _, n := range ns {
		a, d := Asc(n), Desc(n)
		got, err := ParseAsc(a)
		require.NoError(t, err, "ParseAsc(Asc(%d)=%q)", n, a)
		require.Equal(t, n, got, "ParseAsc(Asc(%d)=%q)", n, a)
		got, err = ParseDesc(d)
		require.NoError(t, err, "ParseDesc(Desc(%d)=%q)", n, d)
		require.Equal(t, n, got, "ParseDesc(Desc(%d)=%q)", n, d)
		// A string is only ever one direction's encoding of one number;
		// parsing it the other way either fails or gives another number.
		if got, err := ParseDesc(a); err == nil && Desc(got) != a {
			t.Fatalf("ParseDesc accepted non-canonical %q", a)
		}
	}
	// Sorting the encodings sorts the numbers (descending: reversed).
	for range 2000 {
		x, y := ns[rng.IntN(len(ns))], ns[rng.IntN(len(ns))]
		require.Equal(t, cmp.Compare(x, y), strings.Compare(Asc(x), Asc(y)), "Asc(%d) vs Asc(%d)", x, y)
		require.Equal(t, -cmp.Compare(x, y), strings.Compare(Desc(x), Desc(y)), "Desc(%d) vs Desc(%d)", x, y)
		// No encoding is a proper prefix of another: keys never nest.
		if x != y && (strings.HasPrefix(Asc(x), Asc(y)) || strings.HasPrefix(Desc(x), Desc(y))) {
			t.Fatalf("%d and %d: one encoding is a prefix of the other", x, y)
		}
	}
	sorted := slices.Clone(ns)
	slices.Sort(sorted)
	enc := make([]string, len(ns))
	for i, n := range ns {
		enc[i] = Asc(n)
	}
	slices.Sort(enc)
	for i, n := range sorted {
		require.Equal(t, Asc(n), enc[i], "position %d", i)
	}
}

func TestMalformedNumbersRejected(t *testing.T) {
	for _, s := range []string{
		"", "0", "1", "000", "01f", // wrong length
		"100",                  // leading zero
		"0F", "0g", "0 ", "-1", // not lowercase hex
		"g0", "fffffffffffffffff0", "ffffffffffffffffff", // too long
		"f0fffffffffffffff", // leading zero at full length
	} {
		n, err := ParseAsc(s)
		assert.ErrorIs(t, err, ErrInvalid, "ParseAsc(%q) = %d", s, n)
	}
	for _, s := range []string{"", "f", "fff", "eff" /* desc of a leading zero */, "fF"} {
		n, err := ParseDesc(s)
		assert.Error(t, err, "ParseDesc(%q) = %d, want error", s, n)
	}
}

func TestNamespaceIDBytes(t *testing.T) {
	// Pinned, and computed independently from the documented bytes with
	// Python's hashlib, so other tools can compute namespace paths. Changing
	// these values would move every actor.
	for _, c := range []struct{ tenant, ns, want string }{
		{"", "", "HZkHHxu4pB4WiX40ENaYYQ"},
		{"", "chat", "Z2AOGpZifMEoHkjkYx4iOQ"},
		{"acme", "chat", "Do6OQH-UeW-eB_UwhgL4yg"},
	} {
		got := NamespaceID(c.tenant, c.ns)
		assert.Equal(t, c.want, got, "NamespaceID(%q, %q)", c.tenant, c.ns)
		if !validNamespace(got) {
			t.Errorf("%q does not validate", got)
		}
	}
	// The length prefixes keep the split between tenant and namespace.
	if NamespaceID("ab", "c") == NamespaceID("a", "bc") {
		t.Fatal("length prefixes missing")
	}
}

func TestKeyLayoutRoundTrip(t *testing.T) {
	a := Actor{Namespace: NamespaceID("", "chat"), Actor: ActorKey([]byte{0xde, 0xad, 0xbe, 0xef})}
	for _, c := range []struct {
		key  string
		want Key
	}{
		{a.OwnKey(), Key{Kind: KeyOwn, Namespace: a.Namespace, Actor: a.Actor}},
		{a.LogKey(3, 256), Key{Kind: KeyLog, Namespace: a.Namespace, Actor: a.Actor, Epoch: 3, Seq: 256}},
		{a.SnapshotKey(math.MaxUint64, 0), Key{Kind: KeySnapshot, Namespace: a.Namespace, Actor: a.Actor, Epoch: math.MaxUint64}},
		{NodeKey("n0-1f"), Key{Kind: KeyNode, Node: "n0-1f"}},
		{a.ChunkKey(SumChunk([]byte("x"))), Key{Kind: KeyChunk, Namespace: a.Namespace, Actor: a.Actor, Chunk: SumChunk([]byte("x"))}},
		{a.AlarmKey(1_700_000_000_000, 7), Key{Kind: KeyAlarm, Namespace: a.Namespace, Actor: a.Actor, Due: 1_700_000_000_000, Gen: 7}},
		{a.AlarmKey(0, math.MaxUint64), Key{Kind: KeyAlarm, Namespace: a.Namespace, Actor: a.Actor, Gen: math.MaxUint64}},
	} {
		got, err := ParseKey(c.key)
		require.NoError(t, err, "%s", c.key)
		require.Equal(t, c.want, got, "%s", c.key)
		require.Equal(t, c.key, got.String(), "%s re-encodes", c.key)
	}
	require.Equal(t, "do/Z2AOGpZifMEoHkjkYx4iOQ/deadbeef/log/fc/2100", a.LogKey(3, 256), "log key")
	require.Equal(t, "do/Z2AOGpZifMEoHkjkYx4iOQ/deadbeef/snapshot/fe/eef", a.SnapshotKey(1, 16), "snapshot key")
	// SHA-256 of no bytes, as sha256sum prints it.
	require.Equal(t, "do/Z2AOGpZifMEoHkjkYx4iOQ/deadbeef/chunk/e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		a.ChunkKey(SumChunk(nil)), "chunk key")
	// An actor's keys list chunk/, log/, own.json, snapshot/ (package fence
	// skips through a listing by this order).
	if !(a.ChunkKey(ChunkHash{0xff}) < a.LogKey(math.MaxUint64, 0) && a.LogKey(0, math.MaxUint64) < a.OwnKey() && a.OwnKey() < a.SnapshotKey(math.MaxUint64, math.MaxUint64)) {
		t.Fatal("order of an actor's keys")
	}
	require.Equal(t, "alarms/Z2AOGpZifMEoHkjkYx4iOQ/a18bcfe56800/deadbeef.07", a.AlarmKey(1_700_000_000_000, 7), "alarm key")
	// Newest session first in a listing of log/ and snapshot/; batches of a
	// session in replay order.
	if !(a.LogKey(5, 1) < a.LogKey(4, 100)) || !(a.LogKey(4, 15) < a.LogKey(4, 16)) || !(a.SnapshotKey(4, 20) < a.SnapshotKey(4, 19)) {
		t.Fatal("listing order")
	}
}

func TestMalformedKeysRejected(t *testing.T) {
	a := Actor{Namespace: NamespaceID("", "chat"), Actor: "deadbeef"}
	good := a.LogKey(3, 256)
	alarm := a.AlarmKey(1_700_000_000_000, 7)
	for _, k := range []string{
		"", "do", "do/", "do//deadbeef/own.json",
		strings.Replace(a.OwnKey(), "deadbeef", "DEADBEEF", 1),                // uppercase actor
		strings.Replace(a.OwnKey(), "deadbeef", "deadbee", 1),                 // odd length
		strings.Replace(a.OwnKey(), "deadbeef", "", 1),                        // empty actor
		strings.Replace(a.OwnKey(), "deadbeef", strings.Repeat("ab", 129), 1), // too long
		strings.Replace(a.OwnKey(), a.Namespace, a.Namespace[:21], 1),         // short namespace
		strings.Replace(a.OwnKey(), a.Namespace, a.Namespace[:21]+"B", 1),     // padding bits set
		strings.Replace(a.OwnKey(), a.Namespace, a.Namespace[:21]+"=", 1),
		a.Prefix() + "own.json/x", a.Prefix() + "own.jsonx", a.Prefix() + "other",
		good + "/", good + "0", "x" + good, strings.Replace(good, "/log/", "/logs/", 1),
		strings.Replace(good, "/fc/", "/03/", 1),   // epoch ascending instead of descending
		strings.Replace(good, "/2100", "/dcff", 1), // last seq descending instead of ascending
		a.Prefix() + "log/fc", a.Prefix() + "log/fc/2100/x",
		a.SnapshotKey(1, 16) + "0",
		a.Prefix() + "chunk/", a.Prefix() + "chunk", a.ChunkKey(ChunkHash{}) + "0", a.ChunkKey(ChunkHash{})[:len(a.ChunkKey(ChunkHash{}))-1],
		strings.Replace(a.ChunkKey(ChunkHash{0xab}), "ab", "AB", 1), // uppercase hex
		strings.Replace(a.ChunkKey(ChunkHash{0xab}), "ab", "ag", 1), // not hex
		a.ChunkKey(ChunkHash{}) + "/x", a.Prefix() + "chunks/" + ChunkHash{}.String(),
		"nodes/", "nodes/.json", "nodes/-a.json", "nodes/A.json", "nodes/a", "nodes/a.json/x", "nodes/a/b.json",
		"nodes/" + strings.Repeat("a", 65) + ".json",
		"alarms/", "alarms/" + a.Namespace, "alarms/" + a.Namespace + "/",
		alarm + "/", alarm + "x", "x" + alarm, alarm[:len(alarm)-1],
		strings.Replace(alarm, ".07", ".007", 1),                       // leading zero
		strings.Replace(alarm, ".07", "07", 1),                         // no separator
		strings.Replace(alarm, ".07", ".", 1),                          // no generation
		strings.Replace(alarm, ".07", ".07.07", 1),                     // two
		strings.Replace(alarm, "deadbeef.", "DEADBEEF.", 1),            // uppercase actor
		strings.Replace(alarm, "deadbeef.", "deadbee.", 1),             // odd length
		strings.Replace(alarm, "/deadbeef.", "/.", 1),                  // empty actor
		strings.Replace(alarm, "/a18bcfe56800/", "/b018bcfe56800/", 1), // leading zero in due
		strings.Replace(alarm, "/a18bcfe56800/", "/5e74301a97ff/", 1),  // due descending instead of ascending
		strings.Replace(alarm, "/a18bcfe56800/", "/", 1),               // no due
		strings.Replace(alarm, a.Namespace, a.Namespace[:21], 1),       // short namespace
		strings.Replace(alarm, "/deadbeef.", "/deadbeef/", 1),          // actor as a directory
	} {
		got, err := ParseKey(k)
		var fe *Error
		switch {
		case err == nil:
			t.Errorf("ParseKey(%q) = %+v, want error", k, got)
		case !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) || fe.Object != "key" || fe.Key != strconv.Quote(k):
			t.Errorf("ParseKey(%q): %v, want a *frames.Error about the key, matching ErrInvalid", k, err)
		}
	}
}

// The alarm index lists in due order whatever the actor or generation, and
// AlarmDueAfter starts a listing exactly at a due time.
func TestAlarmKeysSortByDue(t *testing.T) {
	ns := NamespaceID("", "chat")
	rng := rand.New(rand.NewPCG(2, 2))
	dues := numbers(rng)
	var keys []string
	byKey := map[string]uint64{}
	for i, due := range dues {
		id := make([]byte, 1+rng.IntN(MaxActorIDBytes))
		for j := range id {
			id[j] = byte(rng.Uint32())
		}
		k := Actor{Namespace: ns, Actor: ActorKey(id)}.AlarmKey(due, uint64(i)*uint64(rng.Uint32()))
		keys = append(keys, k)
		byKey[k] = due
	}
	slices.Sort(keys)
	for i := 1; i < len(keys); i++ {
		require.LessOrEqual(t, byKey[keys[i-1]], byKey[keys[i]], "%s sorts before %s", keys[i-1], keys[i])
	}
	for range 500 {
		due := dues[rng.IntN(len(dues))]
		after := AlarmDueAfter(ns, due)
		for _, k := range keys {
			require.Equal(t, byKey[k] >= due, k > after, "%s against start-after %s", k, after)
			require.True(t, strings.HasPrefix(k, AlarmIndexPrefix(ns)), k)
		}
	}
	// Another namespace's index is another prefix.
	require.False(t, strings.HasPrefix(AlarmIndexPrefix(NamespaceID("", "chat2")), AlarmIndexPrefix(ns)))
}
