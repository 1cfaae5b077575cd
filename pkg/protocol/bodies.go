package protocol

// MessageType methods make every body type a Body.

// MessageType returns TypeErrorMessage.
func (*ErrorMessage) MessageType() MessageType { return TypeErrorMessage }

// MessageType returns TypeUserMessage.
func (*UserMessage) MessageType() MessageType { return TypeUserMessage }

// MessageType returns TypeAssistantMessage.
func (*AssistantMessage) MessageType() MessageType { return TypeAssistantMessage }

// MessageType returns TypeAudioChunk.
func (*AudioChunk) MessageType() MessageType { return TypeAudioChunk }

// MessageType returns TypeReasoningStep.
func (*ReasoningStep) MessageType() MessageType { return TypeReasoningStep }

// MessageType returns TypeToolUseRequest.
func (*ToolUseRequest) MessageType() MessageType { return TypeToolUseRequest }

// MessageType returns TypeToolUseResult.
func (*ToolUseResult) MessageType() MessageType { return TypeToolUseResult }

// MessageType returns TypeAcknowledgement.
func (*Acknowledgement) MessageType() MessageType { return TypeAcknowledgement }

// MessageType returns TypeTranscription.
func (*Transcription) MessageType() MessageType { return TypeTranscription }

// MessageType returns TypeControlStop.
func (*ControlStop) MessageType() MessageType { return TypeControlStop }

// MessageType returns TypeControlVariation.
func (*ControlVariation) MessageType() MessageType { return TypeControlVariation }

// MessageType returns TypeConfiguration.
func (*Configuration) MessageType() MessageType { return TypeConfiguration }

// MessageType returns TypeStartAnswer.
func (*StartAnswer) MessageType() MessageType { return TypeStartAnswer }

// MessageType returns TypeMemoryTrace.
func (*MemoryTrace) MessageType() MessageType { return TypeMemoryTrace }

// MessageType returns TypeCommentary.
func (*Commentary) MessageType() MessageType { return TypeCommentary }

// MessageType returns TypeAssistantSentence.
func (*AssistantSentence) MessageType() MessageType { return TypeAssistantSentence }

// MessageType returns TypeSyncRequest.
func (*SyncRequest) MessageType() MessageType { return TypeSyncRequest }

// MessageType returns TypeSyncResponse.
func (*SyncResponse) MessageType() MessageType { return TypeSyncResponse }

// MessageType returns TypeFeedback.
func (*Feedback) MessageType() MessageType { return TypeFeedback }

// MessageType returns TypeFeedbackConfirmation.
func (*FeedbackConfirmation) MessageType() MessageType { return TypeFeedbackConfirmation }

// MessageType returns TypeUserNote.
func (*UserNote) MessageType() MessageType { return TypeUserNote }

// MessageType returns TypeNoteConfirmation.
func (*NoteConfirmation) MessageType() MessageType { return TypeNoteConfirmation }

// MessageType returns TypeMemoryAction.
func (*MemoryAction) MessageType() MessageType { return TypeMemoryAction }

// MessageType returns TypeMemoryConfirmation.
func (*MemoryConfirmation) MessageType() MessageType { return TypeMemoryConfirmation }

// MessageType returns TypeServerInfo.
func (*ServerInfo) MessageType() MessageType { return TypeServerInfo }

// MessageType returns TypeSessionStats.
func (*SessionStats) MessageType() MessageType { return TypeSessionStats }

// MessageType returns TypeConversationUpdate.
func (*ConversationUpdate) MessageType() MessageType { return TypeConversationUpdate }

// MessageType returns TypeBranchUpdate.
func (*BranchUpdate) MessageType() MessageType { return TypeBranchUpdate }

// MessageType returns TypeToolRegistration.
func (*ToolRegistration) MessageType() MessageType { return TypeToolRegistration }

// MessageType returns TypeToolSetting.
func (*ToolSetting) MessageType() MessageType { return TypeToolSetting }

// MessageType returns TypeMCPServerConfig.
func (*MCPServerConfig) MessageType() MessageType { return TypeMCPServerConfig }

// MessageType returns TypeMCPServerStatus.
func (*MCPServerStatus) MessageType() MessageType { return TypeMCPServerStatus }

// MessageType returns TypeASRJob.
func (*ASRJob) MessageType() MessageType { return TypeASRJob }

// MessageType returns TypeSpeechAudio.
func (*SpeechAudio) MessageType() MessageType { return TypeSpeechAudio }

// MessageType returns TypeSentenceAudio.
func (*SentenceAudio) MessageType() MessageType { return TypeSentenceAudio }

// MessageType returns TypeSentencePlayout.
func (*SentencePlayout) MessageType() MessageType { return TypeSentencePlayout }

// MessageType returns TypeAgentDispatch.
func (*AgentDispatch) MessageType() MessageType { return TypeAgentDispatch }

// MessageType returns TypeTurnEvent.
func (*TurnEvent) MessageType() MessageType { return TypeTurnEvent }

// MessageType returns TypeTurnJudgement.
func (*TurnJudgement) MessageType() MessageType { return TypeTurnJudgement }

// MessageType returns TypePromptVersion.
func (*PromptVersion) MessageType() MessageType { return TypePromptVersion }

// MessageType returns TypeDimensionPreference.
func (*DimensionPreference) MessageType() MessageType { return TypeDimensionPreference }

// MessageType returns TypeEliteOptions.
func (*EliteOptions) MessageType() MessageType { return TypeEliteOptions }

// MessageType returns TypeEliteSelect.
func (*EliteSelect) MessageType() MessageType { return TypeEliteSelect }

// MessageType returns TypeOptimizationRun.
func (*OptimizationRun) MessageType() MessageType { return TypeOptimizationRun }

// MessageType returns TypeLearningConsent.
func (*LearningConsent) MessageType() MessageType { return TypeLearningConsent }

// MessageType returns TypeUserSettings.
func (*UserSettings) MessageType() MessageType { return TypeUserSettings }

// MessageType returns TypeTimer.
func (*Timer) MessageType() MessageType { return TypeTimer }
