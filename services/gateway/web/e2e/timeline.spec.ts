/// <reference lib="dom" />
// The debug timeline (the conversation's envelopes, live) and the waterfall
// under an answer.
import { expect, test } from '@playwright/test'
import { answers, api, ask, axe, completed, DESKTOP, lastAnswer, newChat, PHONE, say, send, shot, signIn, stack, userMessages } from './fixtures'

test('an answer says where its time went; the timeline lists the envelopes, live', async ({ page, context }) => {
  await signIn(page, stack.aliceKey)
  const cid = await newChat(page, 'Timeline first question')
  const answer = await completed(lastAnswer(page))
  await answer.getByRole('button', { name: 'Timing' }).click()
  const wf = answer.getByTestId('waterfall')
  await expect(wf.locator('[data-mark="answer started"]')).toBeVisible()
  await expect(wf.locator('[data-mark="first sentence"]')).toContainText(/\+\d+ ms/)

  await page.getByRole('link', { name: 'Timeline', exact: true }).click()
  await expect(page).toHaveURL(new RegExp(`/c/${cid}/timeline$`))
  const typed = (type: string) => page.getByTestId('timeline').locator(`tbody tr[data-type="${type}"]`)
  await expect(typed('UserMessage')).toHaveCount(1)
  await expect(typed('UserMessage')).toContainText('Timeline first question')
  await expect(typed('StartAnswer')).toHaveCount(1)
  await expect(typed('AssistantSentence').first()).toContainText('server')
  await expect(page.getByTestId('timeline-live')).toHaveAttribute('data-live', 'on')
  await axe(page, 'timeline')
  await shot(page, 'timeline')

  // Live: a message sent from another tab appears without a reload.
  const other = await context.newPage()
  await other.goto(`/c/${cid}`)
  await expect(answers(other)).toHaveCount(1) // the conversation is shown before the next question
  await ask(other, 'Timeline second question')
  await expect(typed('UserMessage')).toHaveCount(2)
  await expect(typed('UserMessage').last()).toContainText('Timeline second question')
  await expect(typed('StartAnswer')).toHaveCount(2)
  await other.close()

  await page.setViewportSize(PHONE)
  await axe(page, 'timeline')
  await shot(page, 'timeline')
  await page.setViewportSize(DESKTOP)

  // Another user sees nothing of it, in the page or through the API.
  const bob = await api(stack.bobKey)
  expect((await bob.get(`/v1/conversations/${cid}/timeline`)).status()).toBe(403)
  await bob.dispose()
})

test("another user's timeline URL shows nothing", async ({ browser }) => {
  const alice = await browser.newPage()
  await signIn(alice, stack.aliceKey)
  const cid = await newChat(alice, 'Private timeline')
  await completed(lastAnswer(alice))
  await alice.close()
  const page = await browser.newPage()
  await signIn(page, stack.bobKey, `/c/${cid}/timeline`)
  await expect(page.getByRole('heading', { name: 'This conversation is not yours' })).toBeVisible()
  await expect(page.getByText('Private timeline')).toHaveCount(0)
  await page.close()
})

test('the timeline reads long conversations page by page', async ({ page }) => {
  await signIn(page, stack.aliceKey)
  const cid = await newChat(page, `${say.markdown}: paged timeline 0`)
  await completed(lastAnswer(page))
  // A Markdown answer is several sentences: 32 turns store more than a
  // page of 200 envelopes.
  for (let i = 1; i < 32; i++) {
    // The previous answer, until this message's answer is on the page: the
    // next message is sent only once this one's answer has completed (the
    // composer ignores Enter while an answer streams).
    const previous = await lastAnswer(page).getAttribute('data-message-id')
    await send(page, `${say.markdown}: paged timeline ${i}`)
    await expect(userMessages(page).last()).toContainText(`paged timeline ${i}`)
    await expect(lastAnswer(page)).not.toHaveAttribute('data-message-id', previous ?? '')
    await expect(lastAnswer(page)).toContainText('That is all.')
    await completed(lastAnswer(page))
  }
  await page.goto(`/c/${cid}/timeline`)
  const rows = page.getByTestId('timeline').locator('tbody tr')
  await expect(rows).toHaveCount(200)
  await page.getByRole('button', { name: 'Load more' }).click()
  await expect.poll(() => rows.count()).toBeGreaterThan(200)
  // Each answer's judgement (the stack judges every answer) is an envelope
  // too: the pages go on until the last one, which has no Load more.
  const more = page.getByRole('button', { name: 'Load more' })
  for (let i = 0; i < 3 && (await more.count()) > 0; i++) {
    const before = await rows.count()
    await more.click()
    await expect.poll(() => rows.count()).toBeGreaterThan(before)
  }
  await expect(more).toHaveCount(0)
  await expect(rows.filter({ hasText: 'paged timeline 31' })).toHaveCount(1)
  await expect(page.getByTestId('timeline-live')).toHaveAttribute('data-live', 'on')
})
