package store

import "errors"

// Errors of envelopes whose data cannot be stored; Apply wraps them in
// consume.ErrData, so the envelope is dead-lettered with the reason.
var (
	errNoMemory            = errors.New("memory action without a memory")
	errRating              = errors.New("memory rating is not a whole number from 1 to 5 (memory.userRating)")
	errEmbeddingSize       = errors.New("memory embedding has the wrong number of dimensions")
	errEmbeddingValue      = errors.New("memory embedding holds a value that is not a finite number")
	errToolSource          = errors.New("tool registration source is neither builtin nor mcp:<server>")
	errToolServer          = errors.New("tool names an MCP server other than its registration's source")
	errDuplicateTool       = errors.New("tool registration lists a tool twice")
	errServerName          = errors.New("MCP server name is not letters, digits, - and _")
	errServerTransport     = errors.New("MCP server upsert without a usable transport")
	errUnknownServerAction = errors.New("MCP server config action is neither upsert nor delete")
	errWorkItem            = errors.New("a work item (ASRJob, SpeechAudio, AgentDispatch) is not a record: it has no place on a conversation or system subject")
	errNotAgentSubject     = errors.New("SentenceAudio and SentencePlayout belong on alicia.conv.{cid}.agent.{type}")
	errPlaying             = errors.New("SentencePlayout playing is a live mark for the room's participants, never a record")
	errUtteranceID         = errors.New("AudioChunk meta alicia.utterance_id is not a non-empty string")
	errPromptVersion       = errors.New("prompt version cannot be stored")
	errOptimization        = errors.New("prompt optimisation record cannot be stored")
	errEveryday            = errors.New("settings or timer record cannot be stored")
	errSystemOnly          = errors.New("an internal record (OptimizationRun, EliteOptions, DimensionPreference, EliteSelect, LearningConsent, UserSettings, Timer) belongs on alicia.sys.{type}, never on a conversation subject")
	errUnknownRef          = errors.New("the envelope names an optimisation run or candidate that was never stored")
)
