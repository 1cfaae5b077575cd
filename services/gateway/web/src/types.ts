// JSON shapes of the gateway's REST API (services/gateway/API.md).

export type ConversationStatus = 'active' | 'archived' | 'deleted'

export interface Conversation {
  id: string
  title: string
  status: ConversationStatus
  createdAt: number
  updatedAt: number
  messageCount: number
  tipMessageId?: string
  lastClientStanzaId: number
}

export type VoteValue = 'up' | 'down' | 'critical'

export interface Votes {
  upvotes: number
  downvotes: number
  specialVotes: number
  userVote: VoteValue | null
}

export interface ToolUse {
  id: string
  toolName: string
  arguments: unknown
  result?: unknown
  status: string
  errorCode?: string
  errorMessage?: string
  // How long the tool ran, as the server stored it.
  durationMs?: number
  votes?: Votes
  // Filled in live from the envelopes' arrival times.
  startedAt?: number
  finishedAt?: number
}

export interface MemoryUsed {
  id?: string
  memoryId: string
  content: string
  similarity: number
  votes?: Votes
}

export interface Reasoning {
  id?: string
  sequence: number
  content: string
  votes?: Votes
}

export type Role = 'user' | 'assistant' | 'system'
export type MessageStatus = 'pending' | 'streaming' | 'completed' | 'failed'

export interface Message {
  id: string
  previousId?: string
  role: Role
  content: string
  status: MessageStatus
  interrupted: boolean
  sequenceNumber: number
  createdAt: number
  siblingCount: number
  toolUses?: ToolUse[]
  memoriesUsed?: MemoryUsed[]
  reasoning?: Reasoning[]
  votes?: Votes
  noteCount?: number
  // The sentences stored so far of an answer still streaming.
  sentences?: { sequence: number; text: string }[]
  // A spoken answer's sentences with what became of their audio.
  spoken?: SpokenSentence[]
}

export type Playout = 'pending' | 'playing' | 'played' | 'interrupted' | 'unplayed'

export interface SpokenSentence {
  sequence: number
  text: string
  playout: Playout
  playedMs: number
}

// POST /v1/conversations/{id}/token: a LiveKit token for the conversation's
// room, valid for a few minutes (the join); LiveKit renews it in the room.
export interface RoomToken {
  url: string
  token: string
  room: string
  identity: string
  expiresAt: number
}

export interface ConversationWithMessages extends Conversation {
  messages: Message[]
  // The CONVERSATIONS stream's last sequence, read before the messages: a
  // WebSocket resuming after it misses nothing the snapshot lacks.
  streamSeq?: number
}

export interface ConversationPage {
  conversations: Conversation[]
  nextCursor?: string
}

export interface Siblings {
  parentId: string | null
  siblings: Message[]
  currentId: string | null
}

export interface Memory {
  id: string
  content: string
  tags: string[]
  importance: number
  pinned: boolean
  archived: boolean
  createdAt: number
  updatedAt: number
  similarity?: number
}

export interface MemoryPage {
  memories: Memory[]
  nextCursor?: string
}

export interface MemoryUse {
  messageId: string
  conversationId: string
  conversationTitle: string
  excerpt: string
  similarity: number
  createdAt: number
}

export interface Note {
  id: string
  content: string
  category: NoteCategory
  createdAt: number
}

export type NoteCategory = 'improvement' | 'correction' | 'context' | 'general'

export type VoteTarget = 'message' | 'sentence' | 'tool_use' | 'memory' | 'reasoning' | 'memory_usage'

export interface VoteResult extends Votes {
  targetType: VoteTarget
  targetId: string
}

export interface Tool {
  name: string
  description: string
  parameters: unknown
  enabled: boolean
  source: string
}

export interface MCPServer {
  name: string
  transport: 'stdio' | 'http'
  command?: string
  args?: string[]
  url?: string
  enabled: boolean
  status: string
  lastError?: string
}

export interface EngineInfo {
  name: string
  engine: string
  model?: string
  voice?: string
  reachable: boolean
  url?: string
  error?: string
}

export interface ServerInfoJSON {
  connection: { status: string; latencyMs: number; error?: string }
  models: { llm: EngineInfo; asr: EngineInfo; tts: EngineInfo; embeddings: EngineInfo }
  mcpServers: { name: string; status: string }[]
}

export interface Session {
  user: string
  admin: boolean
  expiresAt: number
}
