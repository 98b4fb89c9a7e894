// Runs Umami's own Node client (@umami/node, pinned in package-lock.json)
// against the collector named by TALLY_HOST, with TALLY_WEBSITE as the
// website id, and prints each answer as a JSON line for
// trackers_test.go.
// The package's main is CommonJS (exports.default is the client), which
// node's import gives as the default export's own default.
import pkg from '@umami/node';
const umami = pkg.default;

umami.init({ websiteId: process.env.TALLY_WEBSITE, hostUrl: process.env.TALLY_HOST });
const calls = [
  () => umami.track({ hostname: 'shop.example', url: '/node-page', title: 'Node page', referrer: 'https://news.test/node' }),
  () => umami.track('node-order', { plan: 'pro', amount: 49 }),
  () => umami.identify({ tier: 'gold' }),
];
for (const call of calls) {
  const res = await call();
  console.log(JSON.stringify({ status: res.status, body: await res.text() }));
}
