'use strict'
// A group member reading `topics` with eachMessage (offsets committed by kafkajs) until
// it has `max` messages or gets SIGTERM; then it leaves the group. JSON lines: each
// assignment it gets, each message, and `done`.
const { args, emit, kafka, message, run } = require('./common')

const { topics, groupId, fromBeginning = true, max = Infinity, readUncommitted = false, sessionTimeout = 10000 } = args

run(async () => {
  const consumer = kafka(args.clientId || 'kafkajs-consume').consumer({
    groupId, readUncommitted, heartbeatInterval: 300, sessionTimeout, rebalanceTimeout: sessionTimeout, maxWaitTimeInMs: 200
  })
  let seen = 0
  let finish
  const finished = new Promise((resolve) => { finish = resolve })
  consumer.on(consumer.events.GROUP_JOIN, (e) => emit({ event: 'assigned', memberId: e.payload.memberId, assignment: e.payload.memberAssignment }))
  process.on('SIGTERM', () => finish('signal'))
  await consumer.connect()
  for (const topic of topics) await consumer.subscribe({ topic, fromBeginning })
  await consumer.run({
    eachMessage: async ({ topic, partition, message: m }) => {
      emit(message(topic, partition, m))
      if (++seen >= max) finish('max')
    }
  })
  emit({ event: 'running' })
  const why = await finished
  await consumer.disconnect()
  emit({ event: 'done', why, seen })
})
