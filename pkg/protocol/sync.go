package protocol

// SyncedMessageID is the server id of a message written offline: derived
// from its conversation and the client's localId, so a SyncRequest sent
// again (its SyncResponse lost) names the same row, and the edge that
// publishes the message and persistence that stores it agree.
func SyncedMessageID(conversationID, localID string) string {
	return DeriveID("am", conversationID, "local", localID)
}

// AnswerID is the id of the llm's answer to the UserMessage stored at
// CONVERSATIONS sequence seq (its StartAnswer and AssistantMessage): a
// publisher that holds the PubAck knows the answer's id before it starts.
func AnswerID(conversationID string, seq uint64) string {
	return DeriveID("am", conversationID, seq)
}
