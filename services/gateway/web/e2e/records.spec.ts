/// <reference lib="dom" />
// The seed's records a person sets from the page: a memory's 1..5 rating in
// the memory manager (keyboard included), and comments on a message and on
// a whole conversation (Commentary over the WebSocket, kept with their
// author and read back after a reload).
import { expect, test } from '@playwright/test'
import { api, axe, completed, DESKTOP, json, lastAnswer, newChat, PHONE, say, shot, signIn, stack } from './fixtures'

const content = 'Quillon the cat naps on the red sofa'

test.afterAll(async () => {
  const alice = await api(stack.aliceKey)
  const page = await json<{ memories: { id: string; content: string }[] }>(await alice.get('/v1/memories?archived=true&limit=200'))
  for (const m of page.memories) if (m.content.startsWith('Quillon')) await alice.delete(`/v1/memories/${m.id}`)
  await alice.dispose()
})

test('a memory is rated with stars, by pointer and by keyboard, and keeps its rating', async ({ page }) => {
  const alice = await api(stack.aliceKey)
  const made = await json<{ id: string }>(await alice.post('/v1/memories', { data: { content } }))
  await page.setViewportSize(DESKTOP)
  await signIn(page, stack.aliceKey, '/memories')
  const row = page.locator('li[data-memory-id]').filter({ hasText: content })
  const stars = row.getByRole('group', { name: /How useful is this memory/ })
  await expect(stars).toHaveAccessibleName(/Not rated/)

  // By pointer: 3 stars.
  await stars.locator('label').nth(2).click()
  await expect(stars).toHaveAccessibleName(/Rated 3 of 5/)
  // By keyboard: from the checked star, the right arrow rates 4.
  await row.getByLabel('3 stars').focus()
  await page.keyboard.press('ArrowRight')
  await expect(stars).toHaveAccessibleName(/Rated 4 of 5/)
  await expect(row.getByLabel('4 stars')).toBeFocused()

  // Stored (the page shows the memory as the server answered it): the API
  // and a reload say 4.
  const list = await json<{ memories: { id: string; userRating?: number; createdBy?: string }[] }>(await alice.get('/v1/memories?limit=200'))
  const stored = list.memories.find((m) => m.id === made.id)
  expect(stored?.userRating).toBe(4)
  expect(stored?.createdBy).toBe('alice')
  await page.reload()
  await expect(row.getByRole('group', { name: /How useful is this memory/ })).toHaveAccessibleName(/Rated 4 of 5/)
  await axe(page, 'memories-rating')
  await shot(page, 'memories-rating')
  await page.setViewportSize(PHONE)
  await expect(row.getByRole('group', { name: /How useful is this memory/ })).toBeVisible()
  await axe(page, 'memories-rating')
  await shot(page, 'memories-rating')
  await alice.dispose()
})

test('comments on an answer and on the conversation are kept with their author', async ({ page }) => {
  await page.setViewportSize(DESKTOP)
  await signIn(page, stack.aliceKey, '/')
  const cid = await newChat(page, say.tool)
  const answer = await completed(lastAnswer(page))

  // On the answer, from its actions.
  await answer.getByRole('button', { name: 'Comment' }).click()
  await answer.getByLabel('Comment on this message').fill('Right, and quick.')
  await answer.getByRole('button', { name: 'Save comment' }).click()
  await expect(answer.getByRole('list', { name: 'Comments on this message' })).toContainText('Right, and quick.')

  // On the whole conversation, from its header.
  await page.getByRole('button', { name: 'Comment on conversation' }).click()
  await page.getByLabel('Comment on this conversation').fill('Useful for my maths homework.')
  await page.getByRole('button', { name: 'Save comment' }).click()
  await expect(page.getByRole('list', { name: 'Comments on this conversation' })).toContainText('Useful for my maths homework.')

  // Stored with their author, and read back.
  const alice = await api(stack.aliceKey)
  type Conv = { commentaries?: { messageId?: string; content: string; commentaryType?: string; createdBy?: string }[] }
  await expect.poll(async () => (await json<Conv>(await alice.get(`/v1/conversations/${cid}`))).commentaries?.length ?? 0).toBe(2)
  const conv = await json<Conv>(await alice.get(`/v1/conversations/${cid}`))
  const answerId = await answer.getAttribute('data-message-id')
  expect(conv.commentaries).toEqual(expect.arrayContaining([
    expect.objectContaining({ messageId: answerId, content: 'Right, and quick.', createdBy: 'alice' }),
    expect.objectContaining({ commentaryType: 'conversation', content: 'Useful for my maths homework.', createdBy: 'alice' }),
  ]))
  expect(conv.commentaries?.find((c) => c.commentaryType === 'conversation')?.messageId).toBeUndefined()
  await alice.dispose()

  await page.reload()
  await expect(lastAnswer(page).getByRole('list', { name: 'Comments on this message' })).toContainText('Right, and quick.')
  await expect(page.getByRole('list', { name: 'Comments on this conversation' })).toContainText('Useful for my maths homework.')
  await axe(page, 'commentary')
  await shot(page, 'commentary')
  await page.setViewportSize(PHONE)
  await expect(page.getByRole('list', { name: 'Comments on this conversation' })).toBeVisible()
  await axe(page, 'commentary')
  await shot(page, 'commentary')
})
