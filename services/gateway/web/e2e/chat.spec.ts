/// <reference lib="dom" />
// Chat: streaming, Markdown, stop, regenerate, edit, continue, versions,
// reasoning, tool uses, memory traces and errors, against the real llm.
import { expect, test, type Page } from '@playwright/test'
import { answers, api, ask, body, completed, json, lastAnswer, newChat, say, send, signIn, stack, story, userMessages } from './fixtures'

test.beforeEach(async ({ page }) => {
  await signIn(page, stack.aliceKey)
})

// watchAnswers records, in the page, every text the newest answer shows
// with its status, from now on.
async function watchAnswers(page: Page): Promise<() => Promise<{ status: string; text: string }[]>> {
  await page.evaluate(() => {
    const seen: { status: string; text: string }[] = []
    ;(window as unknown as { __answers: typeof seen }).__answers = seen
    const look = () => {
      const all = document.querySelectorAll('article[data-role="assistant"]')
      const a = all[all.length - 1]
      if (!a) return
      const text = (a.querySelector('.prose-alicia')?.textContent ?? '').replace(/\s+/g, ' ').trim()
      const status = a.getAttribute('data-status') ?? ''
      const last = seen[seen.length - 1]
      if (text && (!last || last.text !== text || last.status !== status)) seen.push({ status, text })
    }
    new MutationObserver(look).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true })
  })
  return () => page.evaluate(() => (window as unknown as { __answers: { status: string; text: string }[] }).__answers)
}

test('the answer appears sentence by sentence while it streams', async ({ page }) => {
  await page.goto('/')
  const seen = await watchAnswers(page)
  await send(page, say.shortStory)
  const answer = await completed(lastAnswer(page))
  const full = story(6)
  await expect(body(answer)).toHaveText(full)
  const texts = await seen()
  const partial = texts.filter((t) => t.status === 'streaming' && t.text !== full)
  // Several steps, each one more whole sentence of the final text.
  expect(partial.length, JSON.stringify(texts)).toBeGreaterThanOrEqual(3)
  for (const t of partial) {
    expect(full.startsWith(t.text), `${t.text} is a start of the answer`).toBe(true)
    expect(t.text).toMatch(/\.$/)
  }
  expect(new Set(partial.map((t) => t.text)).size).toBe(partial.length)
})

test('Markdown: a code block with its copy button, a list and a table', async ({ page, context }) => {
  await context.grantPermissions(['clipboard-read', 'clipboard-write'])
  await newChat(page, say.markdown)
  const answer = await completed(lastAnswer(page))
  const code = answer.locator('pre')
  await expect(code).toContainText('fmt.Println("hello")')
  await expect(answer.getByRole('listitem')).toHaveText(['apples', 'pears'])
  const table = answer.getByRole('table')
  await expect(table.getByRole('columnheader')).toHaveText(['fruit', 'colour'])
  await expect(table.getByRole('row')).toHaveCount(3)
  await expect(table.getByRole('cell', { name: 'green' })).toBeVisible()
  await answer.getByRole('button', { name: 'Copy code' }).click()
  await expect(answer.getByRole('button', { name: 'Copy code' })).toHaveText('Copied')
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe('fmt.Println("hello")')
})

test('stop cuts the answer where it was, and it stays cut', async ({ page }) => {
  await newChat(page, say.longStory)
  const answer = lastAnswer(page)
  await expect(answer).toContainText('Sentence 2 of the story.')
  await page.getByRole('button', { name: 'Stop the answer' }).click()
  await completed(answer)
  await expect(answer.getByText('Stopped')).toBeVisible()
  await expect(page.getByRole('button', { name: 'Send' })).toBeVisible()
  // A sentence already on its way may still land, then nothing more (the
  // story would go on for several seconds).
  await page.waitForTimeout(1000)
  const cut = (await body(answer).textContent()) ?? ''
  expect(cut).not.toContain('Sentence 30 of the story.')
  await page.waitForTimeout(1000)
  await expect(body(answer)).toHaveText(cut)

  await page.reload()
  const stored = await completed(lastAnswer(page))
  await expect(body(stored)).toHaveText(cut)
  await expect(stored.getByText('Stopped')).toBeVisible()
})

test('regenerate twice, then move between the versions (‹ 2/3 ›)', async ({ page }) => {
  await newChat(page, 'Give me three versions')
  const answer = lastAnswer(page)
  await expect(body(await completed(answer))).toHaveText('This is answer 1 to your message.')
  await answer.getByRole('button', { name: 'Regenerate answer' }).click()
  await expect(body(lastAnswer(page))).toHaveText('This is answer 2 to your message.')
  await completed(lastAnswer(page))
  await lastAnswer(page).getByRole('button', { name: 'Regenerate answer' }).click()
  await expect(body(lastAnswer(page))).toHaveText('This is answer 3 to your message.')
  await completed(lastAnswer(page))
  await expect(answers(page)).toHaveCount(1)

  const versions = lastAnswer(page).getByRole('group', { name: 'Versions' })
  await expect(versions.getByTestId('branch-position')).toHaveText(/\/3$/)
  await versions.getByRole('button', { name: 'Previous version' }).click()
  await expect(body(lastAnswer(page))).toHaveText('This is answer 2 to your message.')
  await expect(lastAnswer(page).getByTestId('branch-position')).toHaveText('2/3')
  await lastAnswer(page).getByRole('button', { name: 'Previous version' }).click()
  await expect(body(lastAnswer(page))).toHaveText('This is answer 1 to your message.')
  await expect(lastAnswer(page).getByTestId('branch-position')).toHaveText('1/3')
  await lastAnswer(page).getByRole('button', { name: 'Next version' }).click()
  await expect(body(lastAnswer(page))).toHaveText('This is answer 2 to your message.')
  await expect(lastAnswer(page).getByTestId('branch-position')).toHaveText('2/3')
  await expect(answers(page)).toHaveCount(1)
})

test('edit a message: a new version of it with its own answer, the old one still there', async ({ page }) => {
  await newChat(page, 'A first message before the edit')
  await completed(lastAnswer(page))
  await ask(page, 'The original second message')
  await expect(userMessages(page)).toHaveCount(2)

  const second = userMessages(page).nth(1)
  await second.getByRole('button', { name: 'Edit message' }).click()
  await page.getByLabel('Edit your message').fill('The edited second message')
  await page.getByRole('button', { name: 'Send edit' }).click()
  await expect(userMessages(page).nth(1)).toContainText('The edited second message')
  await expect(answers(page)).toHaveCount(2)
  await expect(body(await completed(lastAnswer(page)))).toHaveText('This is answer 1 to your message.')
  await expect(page.getByText('The original second message')).toHaveCount(0)

  const versions = userMessages(page).nth(1).getByRole('group', { name: 'Versions' })
  await expect(versions.getByTestId('branch-position')).toHaveText(/\/2$/)
  await versions.getByRole('button', { name: 'Previous version' }).click()
  await expect(userMessages(page).nth(1)).toContainText('The original second message')
  await expect(userMessages(page).nth(1).getByTestId('branch-position')).toHaveText('1/2')
  await expect(answers(page)).toHaveCount(2)
})

test('continue an answer: the old text followed by more', async ({ page }) => {
  await newChat(page, 'Say something I can continue')
  await expect(body(await completed(lastAnswer(page)))).toHaveText('This is answer 1 to your message.')
  await lastAnswer(page).getByRole('button', { name: 'Continue answer' }).click()
  await expect(body(lastAnswer(page))).toHaveText('This is answer 1 to your message. And that is the rest of it.')
  await completed(lastAnswer(page))
  await expect(answers(page)).toHaveCount(1)
  await expect(lastAnswer(page).getByTestId('branch-position')).toHaveText(/\/2$/)
})

test('reasoning steps, collapsed until opened', async ({ page }) => {
  await newChat(page, say.think)
  const answer = await completed(lastAnswer(page))
  await expect(body(answer)).toHaveText('After thinking it over, the answer is yes.')
  const summary = answer.getByText('Reasoning (2 steps)')
  await expect(summary).toBeVisible()
  const step = answer.getByText('First, the question asks for a decision.')
  await expect(step).toBeHidden()
  await summary.click()
  await expect(step).toBeVisible()
  await expect(answer.getByText('Second, the facts favour yes.')).toBeVisible()
  await summary.click()
  await expect(step).toBeHidden()
})

test('a tool use card: the tool, its arguments, its result and how long it took', async ({ page }) => {
  await newChat(page, say.tool)
  const answer = await completed(lastAnswer(page))
  await expect(body(answer)).toHaveText('Six times seven is 42.')
  const card = answer.getByTestId('tool-use')
  await expect(card).toContainText('calculator')
  await expect(card).toContainText('done')
  await expect(card).toContainText(/\d+ ms/)
  await card.getByRole('button', { name: /calculator/ }).click()
  await expect(card.getByText('Arguments', { exact: true })).toBeVisible()
  await expect(card.locator('pre').first()).toContainText('"expression": "6*7"')
  await expect(card.getByText('Result', { exact: true })).toBeVisible()
  await expect(card.locator('pre').nth(1)).toContainText('"result": 42')
})

test('memory traces: "Used 2 memories", with how similar each was', async ({ page }) => {
  const alice = await api(stack.aliceKey)
  const facts = ['Quxbert the parrot loves green grapes', 'Quxbert the parrot sleeps near green grapes']
  const ids: string[] = []
  for (const content of facts) ids.push((await json<{ id: string }>(await alice.post('/v1/memories', { data: { content } }))).id)
  try {
    await newChat(page, 'Tell me about Quxbert the parrot and green grapes')
    const answer = await completed(lastAnswer(page))
    const summary = answer.getByText('Used 2 memories')
    await expect(summary).toBeVisible()
    await summary.click()
    for (const f of facts) await expect(answer.getByText(f)).toBeVisible()
    await expect(answer.getByText(/\d+% similar/)).toHaveCount(2)
    await answer.getByRole('link', { name: 'Open memory' }).first().click()
    await expect(page).toHaveURL(/\/memories\/amem_/)
    await expect(page.getByRole('heading', { name: 'Memories' })).toBeVisible()
  } finally {
    for (const id of ids) await alice.delete(`/v1/memories/${id}`)
    await alice.dispose()
  }
})

test('an error is shown in place with its meaning, and retry works', async ({ page }) => {
  await newChat(page, say.fail)
  const answer = lastAnswer(page)
  await expect(answer).toHaveAttribute('data-status', 'failed')
  const alert = answer.getByRole('alert')
  await expect(alert).toContainText('Error 503')
  await expect(alert).toContainText('The model is not answering right now')
  await alert.getByRole('button', { name: 'Retry' }).click()
  await expect(body(lastAnswer(page))).toHaveText('It works now.')
  await completed(lastAnswer(page))
  await expect(lastAnswer(page).getByRole('alert')).toHaveCount(0)
  await expect(answers(page)).toHaveCount(1)
})

test('a message sent in an open conversation is drawn at once, then by React, never twice', async ({ page }) => {
  await newChat(page, 'A first message before the quick ones')
  await completed(lastAnswer(page))
  // After every task that changes the list: a message in the page twice,
  // and the rows drawn before React has them (src/chat/tail.ts).
  await page.evaluate(() => {
    const w = window as unknown as { __twice: string[]; __drawn: string[] }
    w.__twice = []
    w.__drawn = []
    new MutationObserver(() => {
      const ids = [...document.querySelectorAll('article[data-message-id]')].map((a) => a.getAttribute('data-message-id') ?? '')
      const twice = ids.find((id, i) => ids.indexOf(id) !== i)
      if (twice) w.__twice.push(twice)
      for (const a of document.querySelectorAll('[aria-hidden="true"] > div > article[data-message-id]')) w.__drawn.push(a.getAttribute('data-role') ?? '')
    }).observe(document.body, { subtree: true, childList: true })
  })
  for (let i = 1; i <= 3; i++) {
    await ask(page, `Quick message ${i}`)
    await expect(userMessages(page).last()).toContainText(`Quick message ${i}`)
    await expect(body(lastAnswer(page))).toHaveText('This is answer 1 to your message.')
  }
  const seen = await page.evaluate(() => {
    const w = window as unknown as { __twice: string[]; __drawn: string[] }
    return { twice: w.__twice, drawn: w.__drawn }
  })
  expect(seen.twice).toEqual([])
  expect(seen.drawn).toContain('user')
  // React has them all: the last answer with its actions, the composer free.
  await expect(userMessages(page)).toHaveCount(4)
  await expect(answers(page)).toHaveCount(4)
  await expect(lastAnswer(page).getByRole('button', { name: 'Regenerate answer' })).toBeVisible()
  await expect(page.locator('[aria-hidden="true"] article')).toHaveCount(0)
  await expect(page.getByRole('button', { name: 'Send' })).toBeVisible()
})
