// Package promptver is what the services that serve versioned prompt
// components (the llm's system, voice_style, tool:<name> and
// demonstrations; the memory service's memory_extraction) must agree on:
// the id of a seed version and where a conversation falls in a rollout.
// The versions themselves are PromptVersion envelopes on
// alicia.sys.prompt_version, stored by persistence (migrations 00012).
package promptver

import (
	"crypto/sha256"
	"encoding/hex"
	"hash/fnv"
)

// Components.
const (
	System           = "system"
	VoiceStyle       = "voice_style"
	MemoryExtraction = "memory_extraction"
	Demonstrations   = "demonstrations"
	// ToolPrefix + a tool's name: the tool's description.
	ToolPrefix = "tool:"
)

// SeedID is the id of a seed version: derived from the component and its
// text, so every replica seeding the same text names the same version
// (and JetStream, given it as Nats-Msg-Id, keeps one).
func SeedID(component, text string) string {
	h := sha256.Sum256([]byte(component + "\x00" + text))
	return "pv_" + hex.EncodeToString(h[:12])
}

// Share is where conversation cid falls in [0, 1): a version rolling out
// at share s serves it when Share(cid) < s.
func Share(cid string) float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(cid))
	// FNV-1a's high bits barely move between ids that differ at the end:
	// splitmix64's finaliser spreads them.
	x := h.Sum64()
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / float64(1<<53)
}

// Version is the part of a version that decides whether it serves.
type Version struct {
	ID, Text string
	// Share of new conversations while active (1: all).
	Share float64
}

// Choose returns, of a scope's active versions, the one serving
// conversation cid: one rolling out (share < 1) when cid falls below its
// share, else the full one (ok false: none serves, look in the next
// scope). A person's scope is asked before the installation's.
func Choose(active []Version, cid string) (Version, bool) {
	var full, rolling *Version
	for i := range active {
		v := &active[i]
		if v.Share >= 1 {
			full = v
		} else {
			rolling = v
		}
	}
	if rolling != nil && Share(cid) < rolling.Share {
		return *rolling, true
	}
	if full != nil {
		return *full, true
	}
	return Version{}, false
}
