// JSON shapes of the gateway's REST API (services/gateway/API.md), from the
// types generated from its OpenAPI document (proto-schemas/rest/openapi.json,
// `npm run gen` writes src/rest.gen.ts). Where the client builds a shape
// itself before the server has stored it (a message from its envelopes, a
// tool call as it runs), the fields the server always sends are optional
// here, and the client's own fields are added.
import type * as Rest from './rest.gen'

export type Conversation = Rest.Conversation
export type ConversationStatus = Conversation['status']

export type Votes = Rest.Votes
export type VoteValue = NonNullable<Votes['userVote']>

export interface ToolUse extends Omit<Rest.ToolUse, 'votes'> {
  votes?: Votes
  // Filled in live from the envelopes' arrival times.
  startedAt?: number
  finishedAt?: number
}

export interface MemoryUsed extends Omit<Rest.MemoryUsed, 'id' | 'votes'> {
  id?: string
  votes?: Votes
}

export interface Reasoning extends Omit<Rest.ReasoningStep, 'id' | 'votes'> {
  id?: string
  votes?: Votes
}

export type Role = Rest.Message['role']
export type MessageStatus = Rest.Message['status']

// playing: the client's own state while a sentence is heard.
export type Playout = Rest.SpokenSentence['playout'] | 'playing'

export interface SpokenSentence extends Omit<Rest.SpokenSentence, 'playout'> {
  playout: Playout
}

export interface Message
  extends Omit<Rest.Message, 'toolUses' | 'memoriesUsed' | 'reasoning' | 'votes' | 'noteCount' | 'spoken'> {
  toolUses?: ToolUse[]
  memoriesUsed?: MemoryUsed[]
  reasoning?: Reasoning[]
  votes?: Votes
  noteCount?: number
  // A spoken answer's sentences with what became of their audio.
  spoken?: SpokenSentence[]
}

// POST /v1/conversations/{id}/token: a LiveKit token for the conversation's
// room, valid for a few minutes (the join); LiveKit renews it in the room.
export type RoomToken = Rest.RoomToken

// A person's comment on a message, or on the whole conversation
// (commentaryType conversation, no messageId).
export type Commentary = Rest.Commentary

export interface ConversationWithMessages extends Conversation {
  messages: Message[]
  // The person's comments, oldest first (absent when none).
  commentaries?: Commentary[]
  // The CONVERSATIONS stream's last sequence, read before the messages: a
  // WebSocket resuming after it misses nothing the snapshot lacks.
  streamSeq?: number
  // The last voice call that ended (its SessionStats), if any.
  lastVoiceSession?: Rest.VoiceSession
}

export type ConversationPage = Rest.ConversationPage

export interface Siblings extends Omit<Rest.Siblings, 'siblings'> {
  siblings: Message[]
}

export type Memory = Rest.Memory
export type MemoryPage = Rest.MemoryPage
export type MemoryUse = Rest.MemoryUse

export type Note = Rest.Note
export type NoteCategory = Note['category']

export type VoteTarget = NonNullable<Rest.VoteRequest['targetType']>

export type VoteResult = Omit<Rest.VoteResult, 'targetType'> & { targetType: VoteTarget }

export type Tool = Rest.Tool
export type MCPServer = Rest.MCPServer

export type EngineInfo = Rest.EngineInfo

export interface ServerInfoJSON extends Omit<Rest.ServerInfo, 'models'> {
  models: { llm: EngineInfo; asr: EngineInfo; tts: EngineInfo; embeddings: EngineInfo }
}

export type Session = Rest.Session

// Prompt optimisation ("Improve Alicia"): the dimensions' weights, runs and
// their elites, and the versions of the prompt components they make.
export type OptimizeScope = Rest.OptimizePreferences['scope']
export type OptimizePreferences = Rest.OptimizePreferences
export type OptimizationRun = Rest.OptimizationRun
export type RunStatus = OptimizationRun['status']
export type Elite = Rest.Elite
export type EliteExample = Rest.EliteExample
export type PromptVersion = Rest.PromptVersion
export type MessagePromptVersion = Rest.MessagePromptVersion
export type Judgement = Rest.Judgement
