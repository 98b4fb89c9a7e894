// Sends the messages the Go test expects through Segment's own Node SDK
// (@segment/analytics-node), pinned in package-lock.json, to the host
// in TALLY_HOST with the write key in TALLY_WRITE_KEY. It prints one JSON
// line per HTTP exchange the SDK reports and exits 1 if the SDK reports
// an error, so the Go side sees what was sent and answered.
import { Analytics } from '@segment/analytics-node'

const host = process.env.TALLY_HOST
const writeKey = process.env.TALLY_WRITE_KEY
if (!host || !writeKey) {
  console.error('TALLY_HOST and TALLY_WRITE_KEY are required')
  process.exit(2)
}

// flushAt 2: the eight messages go out as four /v1/batch requests of two.
const analytics = new Analytics({ writeKey, host, flushAt: 2, flushInterval: 200, maxRetries: 2 })

let failed = false
analytics.on('http_request', (r) => console.log(JSON.stringify({ request: { url: r.url, method: r.method, headers: r.headers, body: r.body } })))
analytics.on('http_response', (r) => console.log(JSON.stringify({ response: { url: r.url, status: r.status } })))
analytics.on('error', (err) => {
  failed = true
  console.error('analytics-node error:', err.code, err.reason && err.reason.message)
})

const anonymousId = 'anon-node-1'
const userId = 'u-node-1'
const userAgent = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36'

analytics.identify({ anonymousId, userId, traits: { name: 'Ada', plan: 'pro' } })
analytics.page({
  anonymousId,
  name: 'Pricing',
  properties: { url: 'https://shop.example/pricing?src=ad', referrer: 'https://www.search.example/q' },
  context: { userAgent },
})
analytics.track({ anonymousId, userId, event: 'Order Completed', properties: { revenue: 49, currency: 'EUR' } })
// alias links an id the visitor had before (another device's) to the user.
analytics.alias({ previousId: 'old-anon-node', userId })
analytics.track({ anonymousId, userId, event: 'Product Viewed', properties: { sku: 'A-1' }, messageId: 'node-fixed-message-1' })
analytics.track({ anonymousId, userId, event: 'Product Viewed', properties: { sku: 'B-2' } })
analytics.screen({ anonymousId, userId, name: 'Basket' })
// A resend of the first Product Viewed (same messageId), as a retry would be.
analytics.track({ anonymousId, userId, event: 'Product Viewed', properties: { sku: 'A-1' }, messageId: 'node-fixed-message-1' })

await analytics.closeAndFlush({ timeout: 20000 })
process.exit(failed ? 1 : 0)
