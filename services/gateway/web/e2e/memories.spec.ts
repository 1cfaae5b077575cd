/// <reference lib="dom" />
// The memory manager: list, semantic search, create, edit, tags,
// importance, pin, archive, delete; from a memory, the answers that used it.
import { expect, test, type Locator, type Page } from '@playwright/test'
import { api, completed, json, lastAnswer, newChat, signIn, stack } from './fixtures'

const memoryRow = (page: Page, text: string) => page.locator('li[data-memory-id]').filter({ hasText: text })

// setImportance moves the importance slider with the keyboard (0.1 a step).
async function setImportance(slider: Locator, from: number, to: number): Promise<void> {
  const steps = Math.round((to - from) * 10)
  await slider.focus()
  for (let i = 0; i < Math.abs(steps); i++) await slider.press(steps > 0 ? 'ArrowRight' : 'ArrowLeft')
}

async function openAdd(page: Page): Promise<Locator> {
  const add = page.locator('details').filter({ hasText: 'Add a memory' })
  if (!(await add.evaluate((d) => (d as HTMLDetailsElement).open))) await add.getByText('Add a memory').click()
  return add
}

// Whatever a failed run leaves behind would be in every later answer's context.
test.afterAll(async () => {
  const alice = await api(stack.aliceKey)
  const page = await json<{ memories: { id: string; content: string }[] }>(await alice.get('/v1/memories?archived=true&limit=200'))
  for (const m of page.memories) if (/^(Frobnicate|Glorp|Plimsoll)/.test(m.content)) await alice.delete(`/v1/memories/${m.id}`)
  await alice.dispose()
})

test('create, edit, tag, weigh, pin, search, archive and delete memories', async ({ page }) => {
  await signIn(page, stack.aliceKey, '/memories')
  await expect(page.getByRole('heading', { name: 'Memories', level: 1 })).toBeVisible()

  // Create, with tags and an importance.
  let add = await openAdd(page)
  await add.getByLabel('Memory', { exact: true }).fill('Frobnicate the wombat every Tuesday')
  await add.getByLabel('Tags (comma-separated)').fill('chores, wombat')
  await setImportance(add.getByLabel(/Importance/), 0.5, 0.8)
  await expect(add.getByText('Importance: 0.8')).toBeVisible()
  await add.getByRole('button', { name: 'Add memory' }).click()
  let row = memoryRow(page, 'Frobnicate the wombat every Tuesday')
  await expect(row).toBeVisible()
  await expect(row.getByText('#chores')).toBeVisible()
  await expect(row.getByText('#wombat')).toBeVisible()
  await expect(row.getByText('importance 0.8')).toBeVisible()

  // A second one, through the same form.
  add = await openAdd(page)
  await add.getByLabel('Memory', { exact: true }).fill('Glorp prefers blue umbrellas in winter')
  await add.getByRole('button', { name: 'Add memory' }).click()
  await expect(memoryRow(page, 'Glorp prefers blue umbrellas')).toBeVisible()

  // The list comes from the server.
  await page.reload()
  row = memoryRow(page, 'Frobnicate the wombat every Tuesday')
  await expect(row).toBeVisible()
  await expect(memoryRow(page, 'Glorp prefers blue umbrellas')).toBeVisible()

  // Edit: content, tags and importance.
  await row.getByRole('button', { name: 'Edit' }).click()
  const form = page.locator('li form')
  await form.getByLabel('Memory', { exact: true }).fill('Frobnicate the wombat every Thursday')
  await form.getByLabel('Tags (comma-separated)').fill('chores, wombat, weekly')
  await setImportance(form.getByLabel(/Importance/), 0.8, 0.3)
  await form.getByRole('button', { name: 'Save' }).click()
  row = memoryRow(page, 'Frobnicate the wombat every Thursday')
  await expect(row).toBeVisible()
  await expect(row.getByText('#weekly')).toBeVisible()
  await expect(row.getByText('importance 0.3')).toBeVisible()

  // Pin.
  await row.getByRole('button', { name: 'Pin' }).click()
  await expect(row.getByText('Pinned', { exact: true })).toBeVisible()
  await page.reload()
  row = memoryRow(page, 'Frobnicate the wombat every Thursday')
  await expect(row.getByText('Pinned', { exact: true })).toBeVisible()
  await expect(row.getByText('#weekly')).toBeVisible()

  // Semantic search: the umbrella memory, by meaning (shared words), with its match.
  await page.getByLabel('Search memories by meaning').fill('blue umbrellas Glorp')
  await page.getByRole('button', { name: 'Search', exact: true }).click()
  const results = page.getByRole('list', { name: 'Memories matching blue umbrellas Glorp' })
  await expect(results.locator('li[data-memory-id]').filter({ hasText: 'Glorp prefers blue umbrellas' })).toBeVisible()
  await expect(results.getByText(/\d+% match/).first()).toBeVisible()
  await page.getByLabel('Search memories by meaning').fill('')
  await expect(page.getByRole('list', { name: 'Your memories' })).toBeVisible()

  // Archive: gone from the list, back with "Include archived".
  row = memoryRow(page, 'Glorp prefers blue umbrellas')
  await row.getByRole('button', { name: 'Archive' }).click()
  await expect(memoryRow(page, 'Glorp prefers blue umbrellas')).toHaveCount(0)
  await page.getByLabel('Include archived').check()
  await expect(memoryRow(page, 'Glorp prefers blue umbrellas').getByText('Archived', { exact: true })).toBeVisible()
  await page.getByLabel('Include archived').uncheck()

  // Delete, confirmed.
  for (const text of ['Frobnicate the wombat every Thursday', 'Glorp prefers blue umbrellas']) {
    await page.getByLabel('Include archived').check()
    page.once('dialog', (d) => void d.accept())
    await memoryRow(page, text).getByRole('button', { name: 'Delete' }).click()
    await expect(memoryRow(page, text)).toHaveCount(0)
  }
  await page.reload()
  await page.getByLabel('Include archived').check()
  await expect(memoryRow(page, 'Frobnicate the wombat')).toHaveCount(0)
  await expect(memoryRow(page, 'Glorp prefers blue umbrellas')).toHaveCount(0)
})

test('from a memory, the answers that used it', async ({ page }) => {
  const alice = await api(stack.aliceKey)
  const m = await json<{ id: string }>(await alice.post('/v1/memories', { data: { content: 'Plimsoll the tortoise eats dandelions' } }))
  try {
    await signIn(page, stack.aliceKey)
    const cid = await newChat(page, 'What does Plimsoll the tortoise eat, dandelions?')
    const answer = await completed(lastAnswer(page))
    await expect(answer.getByText('Used 1 memory')).toBeVisible()
    const answerId = await answer.getAttribute('data-message-id')

    await page.goto(`/memories/${m.id}`)
    const row = memoryRow(page, 'Plimsoll the tortoise eats dandelions')
    const uses = row.getByRole('list', { name: 'Answers that used this memory' })
    await expect(uses).toBeVisible()
    const link = uses.getByRole('link', { name: 'What does Plimsoll the tortoise eat, dandelions?' })
    await expect(link).toBeVisible()
    await expect(uses).toContainText(/\d+%/)
    await link.click()
    await expect(page).toHaveURL(`${stack.base}/c/${cid}?m=${answerId}`)
    await expect(page.locator(`article[data-message-id="${answerId}"]`)).toBeVisible()
  } finally {
    await alice.delete(`/v1/memories/${m.id}`)
    await alice.dispose()
  }
})
