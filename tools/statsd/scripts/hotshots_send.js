// hotshots_send.js HOST PORT N BURST: sends N metrics through the npm
// package hot-shots (a third-party StatsD/DogStatsD client) to HOST:PORT,
// cycling through seven kinds; after every BURST metrics it yields for
// 1 ms so the loopback hop to the relay stays lossless. The values are
// a function of the index i, which the Go test recomputes (statsd
// acceptance test TestHotShots).
'use strict';
const StatsD = require('hot-shots');
const [host, port, n, burst] = [process.argv[2], +process.argv[3], +process.argv[4], +(process.argv[5] || 1000)];
let errors = 0;
const c = new StatsD({
  host, port, protocol: 'udp', maxBufferSize: 1400, bufferFlushInterval: 1,
  errorHandler: (e) => { errors++; if (errors < 5) console.error('hot-shots:', e.message); },
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function main() {
  for (let i = 0; i < n; i++) {
    switch (i % 7) {
      case 0: c.increment('hs.counter', 1 + (i % 5), ['env:test', 'k:' + (i % 3)]); break;
      case 1: c.gauge('hs.gauge', i % 1000); break;
      case 2: c.gaugeDelta('hs.gdelta', (i % 2) ? 2 : -1); break;
      case 3: c.timing('hs.timer', 0.1 + ((i * 7919) % 100000) / 100); break;
      case 4: c.histogram('hs.hist', (i * 31) % 5000, ['h:1']); break;
      case 5: c.distribution('hs.dist', 1 + ((i * 17) % 20000) / 10); break;
      case 6: c.set('hs.set', 'm' + i); break;
    }
    if ((i + 1) % burst === 0) await sleep(1);
  }
  await new Promise((r) => c.close(r));
  if (errors) { console.error('hot-shots errors:', errors); process.exit(1); }
}
main();
