package protocol

import "strconv"

// MessageType is the envelope's type field (uint16 on the wire).
type MessageType uint16

// Message types (proto-schemas/PROTOCOL.md). 19 and 32-49 are unassigned
// for DimensionPreference, EliteSelect and EliteOptions and are not types.
const (
	TypeErrorMessage         MessageType = 1
	TypeUserMessage          MessageType = 2
	TypeAssistantMessage     MessageType = 3
	TypeAudioChunk           MessageType = 4
	TypeReasoningStep        MessageType = 5
	TypeToolUseRequest       MessageType = 6
	TypeToolUseResult        MessageType = 7
	TypeAcknowledgement      MessageType = 8
	TypeTranscription        MessageType = 9
	TypeControlStop          MessageType = 10
	TypeControlVariation     MessageType = 11
	TypeConfiguration        MessageType = 12
	TypeStartAnswer          MessageType = 13
	TypeMemoryTrace          MessageType = 14
	TypeCommentary           MessageType = 15
	TypeAssistantSentence    MessageType = 16
	TypeSyncRequest          MessageType = 17
	TypeSyncResponse         MessageType = 18
	TypeFeedback             MessageType = 20
	TypeFeedbackConfirmation MessageType = 21
	TypeUserNote             MessageType = 22
	TypeNoteConfirmation     MessageType = 23
	TypeMemoryAction         MessageType = 24
	TypeMemoryConfirmation   MessageType = 25
	TypeServerInfo           MessageType = 26
	TypeSessionStats         MessageType = 27
	TypeConversationUpdate   MessageType = 28
	TypeDimensionPreference  MessageType = 29
	TypeEliteOptions         MessageType = 30
	TypeEliteSelect          MessageType = 31
	TypeBranchUpdate         MessageType = 50

	// Internal types (60-79): between services, never from or to clients.
	TypeToolRegistration MessageType = 60
	TypeToolSetting      MessageType = 61
	TypeMCPServerConfig  MessageType = 62
	TypeMCPServerStatus  MessageType = 63
	TypeASRJob           MessageType = 64
	TypeSpeechAudio      MessageType = 65
	TypeSentenceAudio    MessageType = 66
	TypeSentencePlayout  MessageType = 67
	TypeAgentDispatch    MessageType = 68
	TypeTurnEvent        MessageType = 69
	TypeTurnJudgement    MessageType = 70
	TypePromptVersion    MessageType = 71
	TypeOptimizationRun  MessageType = 72
	TypeLearningConsent  MessageType = 73
	TypeUserSettings     MessageType = 74
	TypeTimer            MessageType = 75
)

// Body is implemented by every generated body type (as a pointer).
type Body interface {
	MessageType() MessageType
}

type typeInfo struct {
	name  string // Go and schema title, e.g. "UserMessage"
	token string // subject token and schema file stem, e.g. "user_message"
	new   func() Body
}

var registry = map[MessageType]typeInfo{
	TypeErrorMessage:         {"ErrorMessage", "error_message", func() Body { return new(ErrorMessage) }},
	TypeUserMessage:          {"UserMessage", "user_message", func() Body { return new(UserMessage) }},
	TypeAssistantMessage:     {"AssistantMessage", "assistant_message", func() Body { return new(AssistantMessage) }},
	TypeAudioChunk:           {"AudioChunk", "audio_chunk", func() Body { return new(AudioChunk) }},
	TypeReasoningStep:        {"ReasoningStep", "reasoning_step", func() Body { return new(ReasoningStep) }},
	TypeToolUseRequest:       {"ToolUseRequest", "tool_use_request", func() Body { return new(ToolUseRequest) }},
	TypeToolUseResult:        {"ToolUseResult", "tool_use_result", func() Body { return new(ToolUseResult) }},
	TypeAcknowledgement:      {"Acknowledgement", "acknowledgement", func() Body { return new(Acknowledgement) }},
	TypeTranscription:        {"Transcription", "transcription", func() Body { return new(Transcription) }},
	TypeControlStop:          {"ControlStop", "control_stop", func() Body { return new(ControlStop) }},
	TypeControlVariation:     {"ControlVariation", "control_variation", func() Body { return new(ControlVariation) }},
	TypeConfiguration:        {"Configuration", "configuration", func() Body { return new(Configuration) }},
	TypeStartAnswer:          {"StartAnswer", "start_answer", func() Body { return new(StartAnswer) }},
	TypeMemoryTrace:          {"MemoryTrace", "memory_trace", func() Body { return new(MemoryTrace) }},
	TypeCommentary:           {"Commentary", "commentary", func() Body { return new(Commentary) }},
	TypeAssistantSentence:    {"AssistantSentence", "assistant_sentence", func() Body { return new(AssistantSentence) }},
	TypeSyncRequest:          {"SyncRequest", "sync_request", func() Body { return new(SyncRequest) }},
	TypeSyncResponse:         {"SyncResponse", "sync_response", func() Body { return new(SyncResponse) }},
	TypeFeedback:             {"Feedback", "feedback", func() Body { return new(Feedback) }},
	TypeFeedbackConfirmation: {"FeedbackConfirmation", "feedback_confirmation", func() Body { return new(FeedbackConfirmation) }},
	TypeUserNote:             {"UserNote", "user_note", func() Body { return new(UserNote) }},
	TypeNoteConfirmation:     {"NoteConfirmation", "note_confirmation", func() Body { return new(NoteConfirmation) }},
	TypeMemoryAction:         {"MemoryAction", "memory_action", func() Body { return new(MemoryAction) }},
	TypeMemoryConfirmation:   {"MemoryConfirmation", "memory_confirmation", func() Body { return new(MemoryConfirmation) }},
	TypeServerInfo:           {"ServerInfo", "server_info", func() Body { return new(ServerInfo) }},
	TypeSessionStats:         {"SessionStats", "session_stats", func() Body { return new(SessionStats) }},
	TypeConversationUpdate:   {"ConversationUpdate", "conversation_update", func() Body { return new(ConversationUpdate) }},
	TypeDimensionPreference:  {"DimensionPreference", "dimension_preference", func() Body { return new(DimensionPreference) }},
	TypeEliteOptions:         {"EliteOptions", "elite_options", func() Body { return new(EliteOptions) }},
	TypeEliteSelect:          {"EliteSelect", "elite_select", func() Body { return new(EliteSelect) }},
	TypeBranchUpdate:         {"BranchUpdate", "branch_update", func() Body { return new(BranchUpdate) }},
	TypeToolRegistration:     {"ToolRegistration", "tool_registration", func() Body { return new(ToolRegistration) }},
	TypeToolSetting:          {"ToolSetting", "tool_setting", func() Body { return new(ToolSetting) }},
	TypeMCPServerConfig:      {"MCPServerConfig", "mcp_server_config", func() Body { return new(MCPServerConfig) }},
	TypeMCPServerStatus:      {"MCPServerStatus", "mcp_server_status", func() Body { return new(MCPServerStatus) }},
	TypeASRJob:               {"ASRJob", "asr_job", func() Body { return new(ASRJob) }},
	TypeSpeechAudio:          {"SpeechAudio", "speech_audio", func() Body { return new(SpeechAudio) }},
	TypeSentenceAudio:        {"SentenceAudio", "sentence_audio", func() Body { return new(SentenceAudio) }},
	TypeSentencePlayout:      {"SentencePlayout", "sentence_playout", func() Body { return new(SentencePlayout) }},
	TypeAgentDispatch:        {"AgentDispatch", "agent_dispatch", func() Body { return new(AgentDispatch) }},
	TypeTurnEvent:            {"TurnEvent", "turn_event", func() Body { return new(TurnEvent) }},
	TypeTurnJudgement:        {"TurnJudgement", "turn_judgement", func() Body { return new(TurnJudgement) }},
	TypePromptVersion:        {"PromptVersion", "prompt_version", func() Body { return new(PromptVersion) }},
	TypeOptimizationRun:      {"OptimizationRun", "optimization_run", func() Body { return new(OptimizationRun) }},
	TypeLearningConsent:      {"LearningConsent", "learning_consent", func() Body { return new(LearningConsent) }},
	TypeUserSettings:         {"UserSettings", "user_settings", func() Body { return new(UserSettings) }},
	TypeTimer:                {"Timer", "timer", func() Body { return new(Timer) }},
}

var byToken = func() map[string]MessageType {
	m := make(map[string]MessageType, len(registry))
	for t, info := range registry {
		m[info.token] = t
	}
	return m
}()

// String returns the message name ("UserMessage"), or "MessageType(n)" for an unknown type.
func (t MessageType) String() string {
	if info, ok := registry[t]; ok {
		return info.name
	}
	return "MessageType(" + strconv.Itoa(int(t)) + ")"
}

// Token returns the snake_case token used in subjects and schema file names
// ("user_message"), or "type_<n>" for an unknown type.
func (t MessageType) Token() string {
	if info, ok := registry[t]; ok {
		return info.token
	}
	return "type_" + strconv.Itoa(int(t))
}

// Internal reports whether t is one of the types services exchange among
// themselves (60-79); clients may neither send nor receive them.
func (t MessageType) Internal() bool { return t >= 60 && t < 80 }

// Known reports whether t is a message type of the protocol.
func (t MessageType) Known() bool {
	_, ok := registry[t]
	return ok
}

// TypeFromToken returns the message type named by a snake_case token.
func TypeFromToken(s string) (MessageType, bool) {
	t, ok := byToken[s]
	return t, ok
}

// Types returns every known message type in ascending order.
func Types() []MessageType {
	out := make([]MessageType, 0, len(registry))
	for t := MessageType(0); t < 256; t++ {
		if t.Known() {
			out = append(out, t)
		}
	}
	return out
}

// NewBody returns a new, zero body of type t, or nil if t is unknown.
func NewBody(t MessageType) Body {
	if info, ok := registry[t]; ok {
		return info.new()
	}
	return nil
}

// Ptr returns a pointer to v, for optional fields.
func Ptr[T any](v T) *T { return &v }
