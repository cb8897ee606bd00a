#!/usr/bin/env node
// What @kafkajs/confluent-schema-registry and kafkajs make of a gateway that
// validates records against a schema registry.
//
// Usage: node validation.js SPEC.json
//
// SPEC.json (written by test/interop/validation_test.go) names the
// bootstrap address, the registry, and per format (AVRO, JSON, PROTOBUF) an
// orders topic, its schema, another schema with the subject to register it
// under, values, and a payload that does not fit the schema; and an events
// topic with a JSON value and a broken one. For each format the script
// registers both schemas with the package's registry client under the
// topic-name subjects, sends the values it encodes (case F/valid), a record
// encoded with the other schema (F/other-subject), one whose schema id the
// registry never gave out (F/unknown-id) and the bad payload behind a valid
// prefix (F/mismatch); for Protobuf also its own records with the message
// index [0] added (PROTOBUF/valid-indexed), as Confluent's wire format has
// it and this package does not write (its other-subject record gets the
// index too). Then a JSON order with no prefix
// (no-prefix) and the two events. Each record is sent on its own, and the
// script prints one JSON object on stdout:
//
//   {"client": ..., "results": [{"case", "topic", "value" (base64), "error"}]}
//
// where error is "" for a record the broker acknowledged, else
// "Name: message (TYPE)" as kafkajs reports it. kafkajs logs go to stderr.
'use strict'

const fs = require('fs')
const path = require('path')
const { Kafka, logLevel } = require('kafkajs')
const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry')

const version = (pkg) => require(path.join(path.dirname(require.resolve(pkg)), '..', 'package.json')).version
const kafkajsVersion = require(path.join(path.dirname(require.resolve('kafkajs')), 'package.json')).version

function describe (e) {
  let cause = e
  while (cause.cause) cause = cause.cause
  return `${e.name}: ${e.message}` + (cause.type ? ` (${cause.type})` : '')
}

function stderrLogger () {
  return ({ namespace, label, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`${new Date().toISOString()} ${label} ${namespace}: ${message} ${JSON.stringify(extra)}\n`)
  }
}

// withID returns a copy of a wire-format payload with another schema id.
function withID (buf, id) {
  const out = Buffer.from(buf)
  out.writeInt32BE(id, 1)
  return out
}

function prefix (id) {
  const b = Buffer.alloc(5)
  b.writeInt32BE(id, 1)
  return b
}

async function main () {
  const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))
  const result = {
    client: `kafkajs ${kafkajsVersion} with @kafkajs/confluent-schema-registry ${version('@kafkajs/confluent-schema-registry')}`,
    results: []
  }
  const registry = new SchemaRegistry({ host: spec.registry, clientId: 'strait-interop-kafkajs' })
  const kafka = new Kafka({
    clientId: 'strait-interop-kafkajs',
    brokers: [spec.bootstrap],
    logLevel: process.env.STRAIT_INTEROP_DEBUG ? logLevel.DEBUG : logLevel.WARN,
    logCreator: stderrLogger,
    connectionTimeout: 10000,
    requestTimeout: 30000
  })
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()

  let n = 0
  async function send (kase, topic, value) {
    const rec = { case: kase, topic, value: value.toString('base64'), error: '' }
    try {
      await producer.send({ topic, acks: -1, messages: [{ key: `k${n++}`, value }] })
    } catch (e) {
      rec.error = describe(e)
    }
    result.results.push(rec)
  }

  for (const format of [SchemaType.AVRO, SchemaType.JSON, SchemaType.PROTOBUF]) {
    const f = spec.formats[format]
    if (!f) continue
    const { id } = await registry.register({ type: format, schema: f.schema }, { subject: `${f.topic}-value` })
    const other = await registry.register({ type: format, schema: f.other_schema }, { subject: f.other_subject })
    const encoded = []
    for (const v of f.values) encoded.push(await registry.encode(id, v))
    for (const buf of encoded) await send(`${format}/valid`, f.topic, buf)
    // Confluent's wire format puts the message indexes between the schema
    // id and a Protobuf message; [0] is the single byte 0. The package
    // writes none, which the gateway accepts; both forms are sent.
    const indexed = (buf) => format === SchemaType.PROTOBUF ? Buffer.concat([buf.subarray(0, 5), Buffer.from([0]), buf.subarray(5)]) : buf
    if (format === SchemaType.PROTOBUF) {
      for (const buf of encoded) await send(`${format}/valid-indexed`, f.topic, indexed(buf))
    }
    // Indexed, so that the gateway gets as far as the schema id's subject.
    await send(`${format}/other-subject`, f.topic, indexed(await registry.encode(other.id, f.other_value)))
    await send(`${format}/unknown-id`, f.topic, withID(encoded[0], spec.unknown_id))
    const index = format === SchemaType.PROTOBUF ? Buffer.from([0]) : Buffer.alloc(0)
    await send(`${format}/mismatch`, f.topic, Buffer.concat([prefix(id), index, Buffer.from(f.bad_body, 'base64')]))
  }
  const plainTopic = (spec.formats[SchemaType.JSON] || Object.values(spec.formats)[0]).topic
  await send('no-prefix', plainTopic, Buffer.from(spec.no_prefix))
  await send('events/valid', spec.events_topic, Buffer.from(spec.event_valid))
  await send('events/broken', spec.events_topic, Buffer.from(spec.event_broken))

  await producer.disconnect()
  process.stdout.write(JSON.stringify(result) + '\n')
}

main().catch((e) => {
  process.stderr.write(`validation.js failed: ${e && e.stack ? e.stack : e}\n`)
  process.exit(1)
})
