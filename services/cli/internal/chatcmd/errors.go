package chatcmd

import "errors"

// Errors that end a chat.
var (
	// ErrTurnsFailed ends a non-interactive chat in which an answer failed
	// (an error from the server, or no answer in time), so scripts notice.
	ErrTurnsFailed = errors.New("chat: some answers failed")
	// ErrGaveUp means the gateway stayed unreachable for Backoff.GiveUp.
	ErrGaveUp = errors.New("chat: gave up reconnecting")
	// ErrRejected means the server refused the conversation (not found, another user's).
	ErrRejected = errors.New("chat: conversation refused")
)
