// The independent side of tests/sync/test_car_interop.py: the npm IPLD implementation
// (@ipld/car, @ipld/dag-cbor, multiformats; versions pinned in car_peer/package-lock.json)
// reads the CAR files convgraph writes and writes CAR files for convgraph to read.
// Every command prints one JSON object on stdout.
//
//   node car_peer.mjs check FILE.car          read, decode, re-hash and re-encode every block
//   node car_peer.mjs write-blocks IN.json FILE.car   {"roots": [cid text], "blocks": [hex]}
//   node car_peer.mjs write-value FILE.car    DAG-CBOR values of its own (not records)
//   node car_peer.mjs write-mixed IN.json FILE.car    the blocks, with a raw, a CIDv0 and an
//                                                     identity-hash block halfway through

import { createReadStream, createWriteStream } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { Readable } from 'node:stream'
import { finished } from 'node:stream/promises'

import { CarBlockIterator, CarReader, CarWriter } from '@ipld/car'
import * as dagCbor from '@ipld/dag-cbor'
import { equals } from 'multiformats/bytes'
import { CID } from 'multiformats/cid'
import * as raw from 'multiformats/codecs/raw'
import { identity } from 'multiformats/hashes/identity'
import { sha256 } from 'multiformats/hashes/sha2'

async function cidOf (bytes) {
  return CID.create(1, dagCbor.code, await sha256.digest(bytes))
}

async function check (path) {
  const problems = []
  const cids = []
  // the streaming iterator over the file as a Node stream, as a consumer of a big CAR would
  const blocks = await CarBlockIterator.fromIterable(createReadStream(path))
  const roots = (await blocks.getRoots()).map(String)
  for await (const { cid, bytes } of blocks) {
    cids.push(cid.toString())
    if (cid.version !== 1 || cid.code !== dagCbor.code || cid.multihash.code !== sha256.code) {
      problems.push(`${cid}: not a CIDv1 dag-cbor sha2-256`)
    }
    const again = await cidOf(bytes)
    if (!again.equals(cid)) problems.push(`${cid}: bytes hash to ${again}`)
    let value
    try {
      value = dagCbor.decode(bytes)
    } catch (err) {
      problems.push(`${cid}: does not decode: ${err.message}`)
      continue
    }
    if (!equals(dagCbor.encode(value), bytes)) problems.push(`${cid}: re-encoding gives other bytes`)
  }
  // the whole-file reader must agree with the iterator on roots and blocks
  const reader = await CarReader.fromBytes(await readFile(path))
  const readerRoots = (await reader.getRoots()).map(String)
  if (JSON.stringify(readerRoots) !== JSON.stringify(roots)) problems.push('CarReader roots differ')
  let readerCount = 0
  for await (const { cid } of reader.blocks()) {
    if (cid.toString() !== cids[readerCount]) problems.push(`CarReader block ${readerCount} is ${cid}`)
    readerCount++
  }
  if (readerCount !== cids.length) problems.push(`CarReader saw ${readerCount} blocks`)
  const held = new Set(cids)
  return {
    version: reader.version,
    count: cids.length,
    roots,
    cids,
    roots_present: roots.every((r) => held.has(r)),
    ok: problems.length === 0,
    problems
  }
}

async function writeCar (path, roots, blocks) {
  const { writer, out } = CarWriter.create(roots)
  const sink = Readable.from(out).pipe(createWriteStream(path))
  for (const block of blocks) await writer.put(block)
  await writer.close()
  await finished(sink)
}

async function readSpec (spec) {
  // {"roots": [cid text], "blocks": [hex]}: the roots parsed, each block named by its CID
  const { roots, blocks } = JSON.parse(await readFile(spec, 'utf8'))
  const made = []
  for (const hex of blocks) {
    const bytes = Uint8Array.from(Buffer.from(hex, 'hex'))
    made.push({ cid: await cidOf(bytes), bytes })
  }
  return { roots: roots.map((r) => CID.parse(r)), made }
}

async function writeBlocks (spec, path) {
  const { roots, made } = await readSpec(spec)
  await writeCar(path, roots, made)
  return { count: made.length, cids: made.map((b) => b.cid.toString()) }
}

async function writeValue (path) {
  // well-formed DAG-CBOR that no convgraph kind describes, one block linking to the other
  const leaf = dagCbor.encode({ hello: 'world', n: 42, list: [1, 'two', null, true], raw: new Uint8Array([1, 2, 3]) })
  const leafCid = await cidOf(leaf)
  const top = dagCbor.encode({ kind: 'user_message', payload: { content: 'no signature' }, link: leafCid })
  const topCid = await cidOf(top)
  await writeCar(path, [topCid], [{ cid: leafCid, bytes: leaf }, { cid: topCid, bytes: top }])
  return { count: 2, cids: [leafCid.toString(), topCid.toString()], roots: [topCid.toString()] }
}

async function writeMixed (spec, path) {
  // blocks no convgraph record can be, in a valid CARv1: raw, CIDv0 (dag-pb) and identity-hashed
  const { roots, made } = await readSpec(spec)
  const blob = new TextEncoder().encode('an artifact')
  const pb = Uint8Array.from([0x0a, 0x00])  // a dag-pb node with empty data
  const tiny = new TextEncoder().encode('tiny')
  const foreign = [
    { cid: CID.create(1, raw.code, await sha256.digest(blob)), bytes: blob },
    { cid: CID.createV0(await sha256.digest(pb)), bytes: pb },
    { cid: CID.create(1, raw.code, identity.digest(tiny)), bytes: tiny }
  ]
  const half = Math.floor(made.length / 2)
  await writeCar(path, roots, [...made.slice(0, half), ...foreign, ...made.slice(half)])
  return { count: made.length + foreign.length, foreign: foreign.map((b) => b.cid.toString()) }
}

const [command, ...args] = process.argv.slice(2)
const commands = {
  check: () => check(args[0]),
  'write-blocks': () => writeBlocks(args[0], args[1]),
  'write-value': () => writeValue(args[0]),
  'write-mixed': () => writeMixed(args[0], args[1])
}
if (!(command in commands)) {
  console.error(`usage: car_peer.mjs ${Object.keys(commands).join('|')} ...`)
  process.exit(64)
}
console.log(JSON.stringify(await commands[command]()))
