//go:build !cgo

package upcmd

import "github.com/alicia-voice/alicia/pkg/config"

// roomAgentFrom: the room-agent decodes and encodes LiveKit audio with
// Opus and soxr through cgo, so a CGO_ENABLED=0 build of alicia (such as
// the migrate image) has none; up says so and runs the rest.
func roomAgentFrom(config.Source, func() (string, error)) (roomAgent, error) {
	return roomAgent{missing: "not in this build of alicia (CGO_ENABLED=0): voice rooms get no agent. " +
		"Build alicia with cgo (libopus-dev libopusfile-dev libsoxr-dev pkg-config), or run go run ./services/room-agent/cmd/room-agent beside it"}, nil
}
