'use strict'
// What every script shares: its arguments (one JSON object in argv[2]), a kafkajs client
// with fast retries, and JSON lines on stdout. kafkajs logs go to stderr (DEBUG when
// KAFKAJS_DEBUG is set), so stdout carries only the lines the Python test parses.
const { Kafka, logLevel } = require('kafkajs')

const args = JSON.parse(process.argv[2] || '{}')

function emit (line) {
  process.stdout.write(JSON.stringify(line) + '\n')
}

function stderrLogger () {
  return ({ namespace, level, label, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
  }
}

function kafka (clientId) {
  return new Kafka({
    clientId,
    brokers: args.brokers.split(','),
    logLevel: process.env.KAFKAJS_DEBUG ? logLevel.DEBUG : logLevel.WARN,
    logCreator: stderrLogger,
    connectionTimeout: 3000,
    requestTimeout: 10000,
    retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: 15 }
  })
}

// A consumed message as the tests compare it: text key, value and headers.
function message (topic, partition, m) {
  const headers = {}
  for (const [k, v] of Object.entries(m.headers || {})) headers[k] = v === null ? null : v.toString()
  return {
    topic,
    partition,
    offset: Number(m.offset),
    key: m.key === null ? null : m.key.toString(),
    value: m.value === null ? null : m.value.toString(),
    headers
  }
}

// Run main; a failure prints the error as a JSON line and exits non-zero.
function run (main) {
  main().then(
    () => process.exit(0),
    (err) => {
      process.stderr.write(`${err && err.stack}\n`)
      emit({ error: String(err), name: err && err.name, type: err && err.type })
      process.exit(1)
    })
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

module.exports = { args, emit, kafka, message, run, sleep }
