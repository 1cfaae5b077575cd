/// <reference lib="dom" />
// Messages written offline: the composer stays usable, the messages wait in
// the outbox (IndexedDB: a reload keeps them), and back online they go out
// in one SyncRequest; the SyncResponse settles them, they are stored in
// order and each is answered.
import { decode } from '@msgpack/msgpack'
import { expect, test, type Page } from '@playwright/test'
import { answers, api, axe, completed, DESKTOP, json, newChat, PHONE, send, shot, signIn, stack, userMessages } from './fixtures'

// controlled waits until the service worker controls the page (a reload
// offline is then the cached shell).
async function controlled(page: Page): Promise<void> {
  await page.evaluate(async () => {
    await navigator.serviceWorker.ready
    if (!navigator.serviceWorker.controller)
      await new Promise((resolve) => navigator.serviceWorker.addEventListener('controllerchange', resolve, { once: true }))
  })
}

interface Wire {
  type: number
  body: Record<string, unknown>
}

const SYNC_REQUEST = 17
const SYNC_RESPONSE = 18

test('messages written offline survive a reload and are sent, stored in order and answered once back online', async ({ page, context }) => {
  test.setTimeout(120_000)
  await page.setViewportSize(DESKTOP)
  // Every frame of the page's WebSockets, decoded.
  const sent: Wire[] = []
  const received: Wire[] = []
  page.on('websocket', (ws) => {
    ws.on('framesent', (f) => typeof f.payload !== 'string' && sent.push(decode(f.payload) as Wire))
    ws.on('framereceived', (f) => typeof f.payload !== 'string' && received.push(decode(f.payload) as Wire))
  })
  await signIn(page, stack.aliceKey)
  const cid = await newChat(page, 'Before going offline')
  await completed(answers(page).first())
  // The message the server stored has its check mark (Acknowledgement).
  await expect(userMessages(page).first().getByLabel('Delivered')).toBeVisible()
  await controlled(page)

  await context.setOffline(true)
  await expect(page.getByTestId('connection')).toHaveAttribute('data-status', 'offline')
  await send(page, 'Written offline, first')
  await send(page, 'Written offline, second')
  const waiting = page.getByRole('region', { name: 'Written offline' }).getByRole('listitem')
  await expect(waiting).toHaveCount(2)
  await expect(waiting.nth(0)).toContainText('Written offline, first')
  await expect(waiting.nth(1)).toContainText('Written offline, second')
  await expect(waiting.getByText('Waiting to be sent')).toHaveCount(2)
  await expect(page.getByLabel('Message Alicia')).toBeEditable()
  await axe(page, 'offline outbox')
  await shot(page, 'offline-outbox')
  await page.setViewportSize(PHONE)
  await shot(page, 'offline-outbox')
  await page.setViewportSize(DESKTOP)

  // A reload offline: the cached shell, which still shows what waits.
  await page.reload()
  await expect(page.getByRole('heading', { name: 'You are offline' })).toBeVisible()
  await expect(waiting).toHaveCount(2)
  await expect(waiting.nth(0)).toContainText('Written offline, first')
  await expect(waiting.nth(1)).toContainText('Written offline, second')

  // Back online: one SyncRequest, its SyncResponse, the messages in the
  // conversation and each answered.
  await context.setOffline(false)
  await expect(userMessages(page)).toHaveCount(3, { timeout: 30_000 })
  await expect(answers(page)).toHaveCount(3, { timeout: 30_000 })
  for (let i = 0; i < 3; i++) await completed(answers(page).nth(i))
  await expect(page.getByRole('region', { name: 'Written offline' })).toHaveCount(0)
  await expect(userMessages(page).nth(1)).toContainText('Written offline, first')
  await expect(userMessages(page).nth(2)).toContainText('Written offline, second')

  const requests = sent.filter((f) => f.type === SYNC_REQUEST)
  expect(requests).toHaveLength(1)
  const msgs = requests[0]!.body.messages as { contents: string; sequenceNumber: number }[]
  expect(msgs.map((m) => [m.contents, m.sequenceNumber])).toEqual([['Written offline, first', 1], ['Written offline, second', 2]])
  const responses = received.filter((f) => f.type === SYNC_RESPONSE)
  expect(responses.length).toBeGreaterThanOrEqual(1)
  const statuses = (responses[0]!.body.syncedMessages as { status: string }[]).map((m) => m.status)
  expect(statuses).toEqual(['synced', 'synced'])

  // Stored in order, one branch: each offline message after the answer before it.
  const rest = await api(stack.aliceKey)
  const conv = await json<{ messages: { id: string; previousId?: string; role: string; content: string }[] }>(await rest.get(`/v1/conversations/${cid}`))
  expect(conv.messages.map((m) => [m.role, m.role === 'user' ? m.content : ''])).toEqual([
    ['user', 'Before going offline'], ['assistant', ''],
    ['user', 'Written offline, first'], ['assistant', ''],
    ['user', 'Written offline, second'], ['assistant', ''],
  ])
  for (let i = 1; i < conv.messages.length; i++) expect(conv.messages[i]!.previousId).toBe(conv.messages[i - 1]!.id)
  await rest.dispose()
})
