// Answers are Markdown. Raw HTML in a model's text is never parsed: it shows
// as text (react-markdown escapes it), and links keep only safe protocols
// (defaultUrlTransform drops javascript: and the like).
import { memo, useState, type ReactNode } from 'react'
import ReactMarkdown, { defaultUrlTransform, type Components } from 'react-markdown'
import remarkGfm from 'remark-gfm'

function text(node: ReactNode): string {
  if (typeof node === 'string' || typeof node === 'number') return String(node)
  if (Array.isArray(node)) return node.map(text).join('')
  if (node && typeof node === 'object' && 'props' in node) return text((node.props as { children?: ReactNode }).children)
  return ''
}

function CodeBlock({ children }: { children?: ReactNode }) {
  const [copied, setCopied] = useState(false)
  const code = text(children).replace(/\n$/, '')
  return (
    <div className="group relative my-2">
      <pre className="overflow-x-auto rounded-lg bg-slate-900 p-3 text-sm text-slate-100">{children}</pre>
      <button
        type="button"
        className="focus-ring absolute top-2 right-2 rounded bg-slate-700 px-2 py-0.5 text-xs text-white opacity-80 hover:opacity-100"
        aria-label="Copy code"
        onClick={() => {
          void navigator.clipboard?.writeText(code).then(() => {
            setCopied(true)
            setTimeout(() => setCopied(false), 1500)
          })
        }}
      >
        {copied ? 'Copied' : 'Copy'}
      </button>
    </div>
  )
}

const components: Components = {
  pre: ({ children }) => <CodeBlock>{children}</CodeBlock>,
  a: ({ href, children }) => (
    <a href={href} target="_blank" rel="noopener noreferrer nofollow">
      {children}
    </a>
  ),
  img: ({ alt }) => <span className="text-slate-500">[image: {alt}]</span>,
  table: ({ children }) => (
    <div className="overflow-x-auto">
      <table>{children}</table>
    </div>
  ),
}

function safeUrl(url: string): string {
  const u = defaultUrlTransform(url)
  return u
}

export const Markdown = memo(function Markdown({ source }: { source: string }) {
  return (
    <div className="prose-alicia break-words">
      <ReactMarkdown remarkPlugins={[remarkGfm]} components={components} urlTransform={safeUrl}>
        {source}
      </ReactMarkdown>
    </div>
  )
})
