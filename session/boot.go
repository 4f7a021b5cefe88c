package session

import (
	"encoding/hex"
	"os"
	"strings"
	"sync"
)

// bootID identifies one boot of the machine: Linux draws a random UUID at
// every boot (/proc/sys/kernel/random/boot_id, see random(4)). The state
// file records it so that the next Open knows whether the machine restarted
// since, in which case a power loss may have rolled back unsynced writes of
// the database and the state file alike. The zero value means unknown (not
// Linux, or unreadable): treated as a restart.
type bootID [16]byte

func (b bootID) known() bool { return b != bootID{} }

var (
	bootOnce sync.Once
	bootThis bootID
)

// currentBoot returns this boot's ID, or the zero ID where there is none.
func currentBoot() bootID {
	bootOnce.Do(func() {
		b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
		if err != nil {
			return
		}
		raw, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(string(b)), "-", ""))
		if err != nil || len(raw) != len(bootThis) {
			return
		}
		copy(bootThis[:], raw)
	})
	return bootThis
}

// sameBoot reports whether b is known and is this boot.
func sameBoot(b bootID) bool { return b.known() && b == currentBoot() }
