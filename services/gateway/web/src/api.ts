// The gateway's REST API. The browser signs in once (POST /v1/session) and
// then every request carries the HttpOnly session cookie: the API key is
// never kept by the page.
import type {
  Conversation, ConversationPage, ConversationStatus, ConversationWithMessages, MCPServer, Memory, MemoryPage,
  MemoryUse, Note, NoteCategory, OptimizationRun, OptimizePreferences, OptimizeScope, PromptVersion, RoomToken, ServerInfoJSON,
  Session, Siblings, Tool, VoteResult, VoteTarget, VoteValue,
} from './types'
import type { TimelinePage } from './chat/timeline'

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message)
    this.name = 'ApiError'
  }
}

// Listeners told when a request finds the session gone (401).
const unauthorized = new Set<() => void>()
export function onUnauthorized(fn: () => void): () => void {
  unauthorized.add(fn)
  return () => unauthorized.delete(fn)
}

async function request<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  let res: Response
  try {
    res = await fetch(path, {
      method,
      credentials: 'same-origin',
      headers: body === undefined ? { Accept: 'application/json' } : { Accept: 'application/json', 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    })
  } catch (e) {
    if (e instanceof DOMException && e.name === 'AbortError') throw e
    throw new ApiError(0, 'offline: the server cannot be reached')
  }
  if (res.status === 204) return undefined as T
  const text = await res.text()
  let data: unknown = undefined
  if (text) {
    try {
      data = JSON.parse(text)
    } catch {
      data = undefined
    }
  }
  if (!res.ok) {
    const msg = (data as { error?: { message?: string } } | undefined)?.error?.message ?? `${res.status} ${res.statusText}`
    if (res.status === 401 && path !== '/v1/session') unauthorized.forEach((fn) => fn())
    throw new ApiError(res.status, msg)
  }
  return data as T
}

const enc = encodeURIComponent

export const api = {
  session: () => request<Session>('GET', '/v1/session'),
  signIn: (apiKey: string) => request<Session>('POST', '/v1/session', { apiKey }),
  signOut: () => request<void>('DELETE', '/v1/session'),

  listConversations: (o: { status?: ConversationStatus | 'all'; q?: string; cursor?: string; limit?: number }, signal?: AbortSignal) => {
    const p = new URLSearchParams()
    if (o.status) p.set('status', o.status)
    if (o.q) p.set('q', o.q)
    if (o.cursor) p.set('cursor', o.cursor)
    p.set('limit', String(o.limit ?? 30))
    return request<ConversationPage>('GET', `/v1/conversations?${p}`, undefined, signal)
  },
  // A provisional title (the first words of the first message) is a
  // placeholder the title generated after the first answer replaces.
  createConversation: (title?: string, provisional = false) =>
    request<Conversation>('POST', '/v1/conversations', title ? { title, ...(provisional ? { provisionalTitle: true } : {}) } : {}),
  getConversation: (id: string, signal?: AbortSignal) => request<ConversationWithMessages>('GET', `/v1/conversations/${enc(id)}`, undefined, signal),
  getBranch: (id: string, through: string, signal?: AbortSignal) =>
    request<ConversationWithMessages>('GET', `/v1/conversations/${enc(id)}?through=${enc(through)}`, undefined, signal),
  patchConversation: (id: string, patch: { title?: string; status?: 'active' | 'archived' }) =>
    request<Conversation>('PATCH', `/v1/conversations/${enc(id)}`, patch),
  deleteConversation: (id: string) => request<void>('DELETE', `/v1/conversations/${enc(id)}`),
  siblings: (messageId: string) => request<Siblings>('GET', `/v1/messages/${enc(messageId)}/siblings`),

  vote: (messageId: string, v: { vote: VoteValue | 'remove'; targetType?: VoteTarget; targetId?: string; quickFeedback?: string; note?: string }) =>
    request<VoteResult>('POST', `/v1/messages/${enc(messageId)}/votes`, v),
  notes: (messageId: string) => request<{ notes: Note[] }>('GET', `/v1/messages/${enc(messageId)}/notes`),
  addNote: (messageId: string, content: string, category: NoteCategory) =>
    request<Note>('POST', `/v1/messages/${enc(messageId)}/notes`, { content, category }),
  deleteNote: (id: string) => request<void>('DELETE', `/v1/notes/${enc(id)}`),

  listMemories: (o: { q?: string; archived?: boolean; cursor?: string; limit?: number }, signal?: AbortSignal) => {
    const p = new URLSearchParams()
    if (o.q) p.set('q', o.q)
    if (o.archived) p.set('archived', 'true')
    if (o.cursor) p.set('cursor', o.cursor)
    if (o.limit) p.set('limit', String(o.limit))
    return request<MemoryPage>('GET', `/v1/memories?${p}`, undefined, signal)
  },
  createMemory: (m: { content: string; tags?: string[]; importance?: number; pinned?: boolean }) => request<Memory>('POST', '/v1/memories', m),
  patchMemory: (id: string, m: { content?: string; tags?: string[]; importance?: number }) => request<Memory>('PATCH', `/v1/memories/${enc(id)}`, m),
  deleteMemory: (id: string) => request<void>('DELETE', `/v1/memories/${enc(id)}`),
  pinMemory: (id: string) => request<Memory>('POST', `/v1/memories/${enc(id)}/pin`),
  archiveMemory: (id: string) => request<Memory>('POST', `/v1/memories/${enc(id)}/archive`),
  rateMemory: (id: string, rating: number) => request<Memory>('PUT', `/v1/memories/${enc(id)}/rating`, { rating }),
  memoryUses: (id: string, cursor?: string) =>
    request<{ uses: MemoryUse[]; nextCursor?: string }>('GET', `/v1/memories/${enc(id)}/uses${cursor ? `?cursor=${enc(cursor)}` : ''}`),

  tools: () => request<{ tools: Tool[] }>('GET', '/v1/tools'),
  setTool: (name: string, enabled: boolean) => request<Tool>('PATCH', `/v1/tools/${enc(name)}`, { enabled }),
  mcpServers: () => request<{ servers: MCPServer[] }>('GET', '/v1/mcp-servers'),
  putMCPServer: (name: string, url: string, enabled = true) =>
    request<MCPServer>('PUT', `/v1/mcp-servers/${enc(name)}`, { transport: 'http', url, enabled }),
  setMCPServer: (name: string, enabled: boolean) => request<MCPServer>('PATCH', `/v1/mcp-servers/${enc(name)}`, { enabled }),
  deleteMCPServer: (name: string) => request<void>('DELETE', `/v1/mcp-servers/${enc(name)}`),
  serverInfo: () => request<ServerInfoJSON>('GET', '/v1/server-info'),
  // A new token (short-lived) and an agent asked for: a POST, it changes state.
  roomToken: (id: string) => request<RoomToken>('POST', `/v1/conversations/${enc(id)}/token`),
  timeline: (id: string, after: number, limit: number, signal?: AbortSignal) =>
    request<TimelinePage>('GET', `/v1/conversations/${enc(id)}/timeline?after=${after}&limit=${limit}`, undefined, signal),

  // Improve Alicia: prompt optimisation (API.md "Prompt optimisation")
  // and the prompt versions it makes ("Prompt versions").
  optimizePreferences: (scope: OptimizeScope, signal?: AbortSignal) =>
    request<OptimizePreferences>('GET', `/v1/optimize/preferences?scope=${scope}`, undefined, signal),
  putOptimizePreferences: (scope: OptimizeScope, weights: Record<string, number>) =>
    request<OptimizePreferences>('PUT', '/v1/optimize/preferences', { scope, weights }),
  optimizeSharing: (signal?: AbortSignal) => request<{ share: boolean }>('GET', '/v1/optimize/sharing', undefined, signal),
  putOptimizeSharing: (share: boolean) => request<{ share: boolean }>('PUT', '/v1/optimize/sharing', { share }),
  optimizationRuns: (scope: OptimizeScope, signal?: AbortSignal) =>
    request<{ runs: OptimizationRun[] }>('GET', `/v1/optimize/runs?scope=${scope}`, undefined, signal),
  startOptimizationRun: (scope: OptimizeScope, budget: number, components: string[]) =>
    request<OptimizationRun>('POST', '/v1/optimize/runs', { scope, budget, components }),
  optimizationRun: (id: string, signal?: AbortSignal) => request<OptimizationRun>('GET', `/v1/optimize/runs/${enc(id)}`, undefined, signal),
  cancelOptimizationRun: (id: string) => request<OptimizationRun>('POST', `/v1/optimize/runs/${enc(id)}/cancel`),
  selectElite: (runId: string, candidateId: string, rolloutShare?: number) =>
    request<{ versions: PromptVersion[] }>('POST', `/v1/optimize/runs/${enc(runId)}/select`, rolloutShare === undefined ? { candidateId } : { candidateId, rolloutShare }),
  promptVersions: (component: string, scope: OptimizeScope, signal?: AbortSignal) =>
    request<{ versions: PromptVersion[] }>('GET', `/v1/prompt-versions?component=${enc(component)}&scope=${scope}`, undefined, signal),
  promotePromptVersion: (id: string, rolloutShare?: number) =>
    request<PromptVersion>('POST', `/v1/prompt-versions/${enc(id)}/promote`, rolloutShare === undefined ? {} : { rolloutShare }),
  rollbackPrompt: (component: string, scope: OptimizeScope) =>
    request<{ serving?: string }>('POST', '/v1/prompt-versions/rollback', { component, scope }),
}
