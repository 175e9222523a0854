// Trino's Node.js client (npm trino-client) against a flotilla coordinator, used as
// its README shows: a quick query, a query that fails at once and a large result.
// This client reads rows and errors only from the pages it fetches by nextUri, so it
// shows whether the first answer to POST /v1/statement is Trino's.
//
//   FLOTILLA_URL=http://127.0.0.1:PORT NODE_PATH=.../node_modules node trino_client.js
//
// Exits non-zero, naming the case, when an answer is not the expected one.
'use strict';
const assert = require('node:assert/strict');
const { Trino, BasicAuth } = require('trino-client');

async function collect(trino, sql) {
  const iter = await trino.query(sql);
  const out = { columns: null, rows: [], error: null };
  for await (const page of iter) {
    if (page.columns) out.columns = page.columns;
    if (page.data) out.rows.push(...page.data);
    if (page.error) out.error = page.error;
  }
  return out;
}

async function main() {
  const trino = Trino.create({
    server: process.env.FLOTILLA_URL,
    catalog: 'tpch',
    schema: 'tiny',
    auth: new BasicAuth('node-user'),
  });

  // TPC-H's nation table has 25 nations, 5 in each of the 5 regions.
  const quick = await collect(trino, 'select n_regionkey, count(*) from tpch.tiny.nation group by 1 order by 1');
  assert.equal(quick.error, null, 'quick query: ' + JSON.stringify(quick.error));
  assert.deepEqual(quick.columns && quick.columns.map((c) => c.type), ['bigint', 'bigint'], 'quick query columns');
  assert.deepEqual(quick.rows, [[0, 5], [1, 5], [2, 5], [3, 5], [4, 5]], 'quick query rows');

  const failing = await collect(trino, 'select * from no_such_table');
  assert.ok(failing.error, 'a query of a missing table reports an error');
  assert.equal(failing.error.errorName, 'TABLE_NOT_FOUND', JSON.stringify(failing.error));
  assert.deepEqual(failing.rows, []);

  // tiny is scale factor 0.01: 15,000 orders, keys unique.
  const large = await collect(trino, 'select o_orderkey from tpch.tiny.orders');
  assert.equal(large.error, null, 'large result: ' + JSON.stringify(large.error));
  assert.equal(large.rows.length, 15000, 'large result rows');
  assert.equal(new Set(large.rows.map((r) => r[0])).size, 15000, 'large result keys');

  console.log('trino-client: quick, failing and large queries as Trino answers them');
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
