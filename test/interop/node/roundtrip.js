#!/usr/bin/env node
// Round trip through Strait with kafkajs.
//
// Usage: node roundtrip.js SPEC.json
//
// SPEC.json (written by the Go interop tests) names the bootstrap address,
// topic, consumer group, compression codec ("none" or "gzip": kafkajs has
// only gzip built in), an optional CA file for TLS, a time budget, and the
// records to produce, with base64 keys, values and header values. The script
// produces every record with acks=all, then consumes the topic from the
// beginning in the group until it has as many records as it produced or the
// time runs out, and prints one JSON object on stdout:
//
//   {"client": ..., "produced": N, "errors": [...], "consumed": [records]}
//
// kafkajs logs go to stderr.
'use strict'

const fs = require('fs')
const path = require('path')
const { Kafka, CompressionTypes, logLevel } = require('kafkajs')
const kafkajsVersion = require(path.join(path.dirname(require.resolve('kafkajs')), 'package.json')).version

const codecs = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }

function stderrLogger () {
  return ({ namespace, level, label, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`${new Date().toISOString()} ${label} ${namespace}: ${message} ${JSON.stringify(extra)}\n`)
  }
}

async function main () {
  const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))
  const deadline = Date.now() + spec.timeout_s * 1000
  if (!(spec.compression in codecs)) {
    throw new Error(`kafkajs has no built-in codec ${spec.compression}`)
  }
  const result = { client: `kafkajs ${kafkajsVersion}`, produced: 0, errors: [], consumed: [] }
  const kafka = new Kafka({
    clientId: 'strait-interop-kafkajs',
    brokers: [spec.bootstrap],
    ssl: spec.ca_file ? { ca: [fs.readFileSync(spec.ca_file)] } : false,
    logLevel: process.env.STRAIT_INTEROP_DEBUG ? logLevel.DEBUG : logLevel.WARN,
    logCreator: stderrLogger,
    connectionTimeout: 10000,
    requestTimeout: 30000
  })

  const producer = kafka.producer({ allowAutoTopicCreation: true })
  await producer.connect()
  const records = spec.records
  for (let i = 0; i < records.length; i += 100) {
    const messages = records.slice(i, i + 100).map((r) => {
      const headers = {}
      for (const h of r.headers || []) headers[h.key] = Buffer.from(h.value, 'base64')
      return { key: Buffer.from(r.key, 'base64'), value: Buffer.from(r.value, 'base64'), headers }
    })
    try {
      const res = await producer.send({ topic: spec.topic, acks: -1, compression: codecs[spec.compression], messages })
      for (const p of res) {
        if (p.errorCode !== 0) result.errors.push(`produce to partition ${p.partition}: error code ${p.errorCode}`)
      }
      result.produced += messages.length
    } catch (e) {
      result.errors.push(`produce: ${e}`)
    }
  }
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: spec.group, allowAutoTopicCreation: false, maxWaitTimeInMs: 500 })
  await consumer.connect()
  await consumer.subscribe({ topics: [spec.topic], fromBeginning: true })
  let finish
  const done = new Promise((resolve) => { finish = resolve })
  const timer = setTimeout(() => finish(), Math.max(1000, deadline - Date.now()))
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      const headers = []
      for (const [k, v] of Object.entries(message.headers || {})) {
        for (const one of Array.isArray(v) ? v : [v]) {
          headers.push({ key: k, value: one == null ? null : Buffer.from(one).toString('base64') })
        }
      }
      result.consumed.push({
        key: message.key == null ? null : message.key.toString('base64'),
        value: message.value == null ? null : message.value.toString('base64'),
        headers,
        partition,
        offset: Number(message.offset)
      })
      if (result.consumed.length >= records.length) finish()
    }
  })
  await done
  clearTimeout(timer)
  await consumer.disconnect()
  process.stdout.write(JSON.stringify(result) + '\n')
}

main().catch((e) => {
  process.stderr.write(`roundtrip failed: ${e && e.stack ? e.stack : e}\n`)
  process.exit(1)
})
