'use strict'
// A transactional producer (idempotent, one request in flight) sends `committed` values in
// a transaction it commits and `aborted` values in one it aborts, alternating `rounds`
// times; one JSON line per finished transaction.
const { args, emit, kafka, run } = require('./common')

const { topic, transactionalId, rounds = 2 } = args

run(async () => {
  const producer = kafka('kafkajs-transactions').producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  for (let round = 0; round < rounds; round++) {
    for (const outcome of ['commit', 'abort']) {
      const transaction = await producer.transaction()
      const values = [0, 1, 2].map((i) => `${outcome}-${round}-${i}`)
      await transaction.send({ topic, messages: values.map((value, i) => ({ key: `k${i}`, value })) })
      await transaction.send({ topic, messages: [{ key: 'extra', value: `${outcome}-${round}-extra` }] })
      await (outcome === 'commit' ? transaction.commit() : transaction.abort())
      emit({ outcome, values: [...values, `${outcome}-${round}-extra`] })
    }
  }
  await producer.disconnect()
})
