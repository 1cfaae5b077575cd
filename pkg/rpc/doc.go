// Package rpc holds the request/reply contracts services call each other
// through with nats.go/micro: history.get and persistence.applied (served by
// persistence), memory.search and memory.action (served by memory). Requests
// and replies are MessagePack; an error reply carries a micro error code
// (the HTTP-like codes below) and comes back from the client functions as
// *Error.
package rpc
