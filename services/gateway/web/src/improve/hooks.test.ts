import { describe, expect, it } from 'vitest'
import { voteRequest } from './hooks'

describe('votes', () => {
  it('a vote on the answer names no target; one on a part names the part, with the quick reason', () => {
    expect(voteRequest('up', 'message', 'am_1')).toEqual({ vote: 'up', targetType: 'message', targetId: undefined, quickFeedback: undefined })
    expect(voteRequest('down', 'tool_use', 'tu_1', 'Wrong')).toEqual({ vote: 'down', targetType: 'tool_use', targetId: 'tu_1', quickFeedback: 'Wrong' })
    expect(voteRequest('remove', 'memory', 'mu_1')).toMatchObject({ vote: 'remove', targetId: 'mu_1' })
  })
})
