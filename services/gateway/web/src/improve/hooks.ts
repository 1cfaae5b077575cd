// Helping Alicia improve: votes (with a quick reason) on an answer or one of
// its parts, and notes on a message, on the one hook pattern of
// src/ui/hooks.ts.
import { useState } from 'react'
import { api } from '../api'
import type { Note, NoteCategory, VoteTarget, VoteValue, Votes } from '../types'
import { useAction, useResource } from '../ui/hooks'

export const NO_VOTES: Votes = { upvotes: 0, downvotes: 0, specialVotes: 0, userVote: null }

// voteRequest: the body of POST /v1/messages/{id}/votes. A vote on the
// answer itself names no target; one on a part names the part.
export function voteRequest(value: VoteValue | 'remove', targetType: VoteTarget, targetId: string | undefined, quickFeedback?: string) {
  return { vote: value, targetType, targetId: targetType === 'message' ? undefined : targetId, quickFeedback }
}

// useVotes: the counts shown are the server's answer to the last vote.
export function useVotes(messageId: string, targetType: VoteTarget, targetId: string | undefined, initial?: Votes) {
  const [votes, setVotes] = useState<Votes>(initial ?? NO_VOTES)
  const { run, error } = useAction()
  const vote = (value: VoteValue | 'remove', quickFeedback?: string) =>
    run(async () => {
      setVotes(await api.vote(messageId, voteRequest(value, targetType, targetId, quickFeedback)))
    })
  return { votes, vote, error }
}

// useNotes: a message's notes, read when open (null: not read yet).
export function useNotes(messageId: string, open: boolean) {
  const r = useResource<Note[]>(open ? messageId : null, () => api.notes(messageId).then((n) => n.notes))
  const change = useAction()
  return {
    notes: r.data ?? null,
    error: change.error ?? r.error,
    add: (content: string, category: NoteCategory) =>
      change.run(async () => {
        const note = await api.addNote(messageId, content, category)
        r.update((ns) => [...(ns ?? []), note])
      }),
    remove: (id: string) =>
      change.run(async () => {
        await api.deleteNote(id)
        r.update((ns) => (ns ?? []).filter((x) => x.id !== id))
      }),
  }
}
