package speech

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// deriveID is a deterministic id shaped like protocol.NewID: the same
// failure reported twice (a redelivered turn) gets the same id.
func deriveID(prefix string, parts ...any) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprint(h, p)
		h.Write([]byte{0})
	}
	sum := h.Sum(nil)
	out := make([]byte, 0, len(prefix)+21)
	out = append(out, prefix...)
	out = append(out, '_')
	for _, v := range []uint64{binary.BigEndian.Uint64(sum), binary.BigEndian.Uint64(sum[8:])} {
		for range 10 { // 62^10 < 2^64
			out = append(out, idAlphabet[v%62])
			v /= 62
		}
	}
	return string(out)
}
