// The debug timeline's reads: its envelopes 200 at a time from
// GET /v1/conversations/{id}/timeline, then live from /timeline/stream
// (server-sent events) once every stored one is read.
import { useEffect, useState } from 'react'
import { api } from '../api'
import type { Step } from '../chat/timeline'
import { useResource } from '../ui/hooks'

export const TIMELINE_PAGE = 200

export type Live = 'off' | 'on' | 'lost'

interface Read {
  id: string
  steps: Step[]
  next: number
  more: boolean
}

// appendLive adds a step that came live unless the stream has it already
// (the server resumes after Last-Event-ID, so only an overlap can repeat).
export function appendLive(steps: Step[], st: Step): Step[] {
  return steps.length > 0 && steps[steps.length - 1]!.seq >= st.seq ? steps : [...steps, st]
}

export function useTimeline(id: string) {
  const page = (after: number) => api.timeline(id, after, TIMELINE_PAGE).then((p): Read => ({ id, steps: p.steps, next: p.next, more: p.more }))
  const r = useResource<Read>(id, () => page(0))
  const { update } = r
  // What was read of another conversation (the one before) is not shown.
  const read = r.data?.id === id ? r.data : undefined
  const forbidden = r.status === 403 || r.status === 404
  const [live, setLive] = useState<Live>('off')

  // Once every stored step is read, new ones come as they are stored.
  const liveFrom = read && !read.more && !forbidden ? read.next : undefined
  useEffect(() => {
    if (liveFrom === undefined) return
    const es = new EventSource(`/v1/conversations/${encodeURIComponent(id)}/timeline/stream?after=${liveFrom}`)
    es.addEventListener('step', (e) => {
      const st = JSON.parse((e as MessageEvent<string>).data) as Step
      update((had) => had && had.id === id ? { ...had, steps: appendLive(had.steps, st) } : had)
    })
    // Revoked (signed out, the conversation deleted): the server says why
    // and ends the stream; reconnecting would only be refused.
    es.addEventListener('revoked', () => {
      es.close()
      setLive('off')
    })
    es.onopen = () => setLive('on')
    es.onerror = () => setLive('lost')
    // The stream resumes by itself (Last-Event-ID).
    return () => {
      es.close()
      setLive('off')
    }
  }, [id, liveFrom, update])

  return {
    steps: read?.steps ?? [],
    more: read ? read.more : !forbidden,
    live,
    forbidden,
    error: forbidden ? undefined : r.error,
    // The next page, or the first again after it failed.
    loadMore: () => {
      if (r.loading) return
      if (!read) void r.reload()
      else void r.more(() => page(read.next), (had, got) => ({ ...got, steps: [...(had?.id === id ? had.steps : []), ...got.steps] }))
    },
  }
}
