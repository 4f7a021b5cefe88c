package tails

import (
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"strings"

	"github.com/framectl/framectl/follow"
)

// Part of the on-disk format (doc.go, "On disk"): never change these.
const (
	fileMagic   = "fctltail"
	fileVersion = 1
	fileSuffix  = ".tail"
	tmpSuffix   = ".tmp"
	lockName    = "tails.lock"

	// headerFixedBytes is a file header without the actor's name: magic,
	// version, name length, CRC.
	headerFixedBytes = len(fileMagic) + 2 + 4
	// recordHeaderBytes: a record's length and the CRC-32C of the length.
	recordHeaderBytes = 8
	// promiseFixedBytes is a Promise message without its entries'
	// bytes: version, kind, epoch, log epoch, base point, entry count, CRC
	// (follow's wire format).
	promiseFixedBytes = 2 + 8 + 8 + 16 + 4 + 4

	// sectorBytes is the unit in which a crash may leave an appended
	// record's bytes unwritten (read back as zeros): see "Torn writes".
	sectorBytes = 512
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fileName is actor's file in the store's directory.
func fileName(actor string) string { return hex.EncodeToString([]byte(actor)) + fileSuffix }

// actorOf is the actor whose file name is name, and whether name is one
// fileName gives.
func actorOf(name string) (string, bool) {
	h, ok := strings.CutSuffix(name, fileSuffix)
	if !ok || h == "" || h != strings.ToLower(h) {
		return "", false
	}
	b, err := hex.DecodeString(h)
	if err != nil || !follow.ValidActor(string(b)) {
		return "", false
	}
	return string(b), true
}

func appendHeader(dst []byte, actor string) []byte {
	start := len(dst)
	dst = append(dst, fileMagic...)
	dst = append(dst, fileVersion, byte(len(actor)))
	dst = append(dst, actor...)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// appendRecord appends m as a record.
func appendRecord(dst []byte, m follow.Message, lim follow.Limits) ([]byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, recordHeaderBytes)...)
	dst, err := follow.AppendMessage(dst, m, lim)
	if err != nil {
		return dst[:start], err
	}
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start-recordHeaderBytes))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[start:start+4], castagnoli))
	return dst, nil
}

// wholeFile is the file holding st alone: its header and one Promise.
func wholeFile(actor string, st *follow.State, lim follow.Limits) ([]byte, error) {
	dst := make([]byte, 0, fileBytes(actor, sizeOf(st.Entries)))
	dst = appendHeader(dst, actor)
	return appendRecord(dst, wholeState(st), lim)
}

// wholeState is the record that holds st whole.
func wholeState(st *follow.State) *follow.Promise {
	return &follow.Promise{Epoch: st.Promised, LogEpoch: st.LogEpoch, Base: st.Base, Entries: st.Entries}
}

// fileBytes is the size of wholeFile for a state whose entries take
// entryBytes (follow.Entry.Size).
func fileBytes(actor string, entryBytes int64) int64 {
	return int64(headerFixedBytes+len(actor)+recordHeaderBytes+promiseFixedBytes) + entryBytes
}
