/**
 * The demo server (demo/serve.mjs, `npm run demo`) survives bad requests: it is started on
 * 127.0.0.1, raw requests are written to a socket (a client library would refuse to send them),
 * and after each bad one a good request must still be answered.
 */
import {ChildProcess, spawn} from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as path from 'path';

const root = path.resolve(__dirname, '..', '..');
let server: ChildProcess;
let port: number;
let exited: string | null = null;

/** Writes `request` as is and resolves to the whole response (the server closes it). */
function raw(request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let got = '';
    socket.setEncoding('latin1');
    socket.on('data', (d) => (got += d));
    socket.on('end', () => resolve(got));
    socket.on('close', () => resolve(got));
    socket.on('error', reject);
    socket.setTimeout(10000, () => {
      socket.destroy();
      reject(new Error(`no answer to ${JSON.stringify(request)}; received ${JSON.stringify(got)}`));
    });
    socket.write(request);
  });
}

const get = (target: string) =>
  raw(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);

/** Asks for `target`, reads up to the end of the headers, then drops the connection. */
function dropAfterHeaders(target: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let got = '';
    socket.setEncoding('latin1');
    socket.on('data', (d) => {
      got += d;
      if (got.includes('\r\n\r\n')) {
        socket.destroy();
        resolve();
      }
    });
    socket.on('close', () => resolve());
    socket.on('error', reject);
    socket.setTimeout(10000, () => {
      socket.destroy();
      reject(new Error(`no headers for ${target}; received ${JSON.stringify(got)}`));
    });
    socket.write(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
  });
}

/** The server process's open file descriptors (Linux: /proc/<pid>/fd). */
const openDescriptors = () => fs.readdirSync(`/proc/${server.pid}/fd`).length;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const statusOf = (response: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(response)?.[1]);

beforeAll(async () => {
  server = spawn(process.execPath, [path.join(root, 'demo', 'serve.mjs'), '--port', '0'], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  server.stderr?.on('data', (d) => (out += String(d)));
  server.on('exit', (code, signal) => (exited = `exited with ${code ?? signal}: ${out}`));
  port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL from the demo server: ${out}`)), 90000);
    server.stdout?.on('data', (d) => {
      out += String(d);
      const m = /http:\/\/127\.0\.0\.1:(\d+)\//.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    server.on('exit', () => reject(new Error(`the demo server ${exited}`)));
  });
});

afterAll(() => {
  server?.kill();
});

describe('demo server', () => {
  it('answers a good request', async () => {
    const res = await get('/');
    expect(statusOf(res)).toBe(200);
    expect(res).toContain('<title>tfjs-attention demo</title>');
  });

  it.each([
    ['an absolute URL with a malformed host', 'http://[/'],
    ['an absolute URL with a bad port', 'http://127.0.0.1:99999/'],
    ['a bracketed IPv6 host cut short', 'http://[::1/demo.js'],
  ])('answers 400 to %s (%s) and stays up', async (_what, target) => {
    const bad = await get(target);
    expect(statusOf(bad)).toBe(400);
    expect(bad).toContain('bad request target');
    // the server is still there: the next request is answered
    const good = await get('/demo.js');
    expect(exited).toBeNull();
    expect(statusOf(good)).toBe(200);
    expect(good).toContain('attentionHeatmapSvg');
  });

  it('answers 404 to an unknown path or an inherited property name', async () => {
    for (const target of ['/nope', '/constructor', '/__proto__', '/../package.json']) {
      expect([target, statusOf(await get(target))]).toEqual([target, 404]);
    }
    expect(statusOf(await get('/'))).toBe(200);
  });

  it('survives a request that is not HTTP at all', async () => {
    const res = await raw('\x00\x01 not http\r\n\r\n');
    expect(res === '' || statusOf(res) === 400).toBe(true);
    expect(statusOf(await get('/'))).toBe(200);
    expect(exited).toBeNull();
  });

  it('closes the file of every download a client drops after the headers', async () => {
    const file = path.join(root, 'node_modules', '@tensorflow', 'tfjs', 'dist', 'tf.min.js');
    const before = openDescriptors();
    const clients = 200;
    // in batches of 20, so the server never holds more than 20 live connections at once
    for (let i = 0; i < clients; i += 20) {
      await Promise.all(Array.from({length: 20}, () => dropAfterHeaders('/tf.min.js')));
    }
    // the server closes its side of each dropped connection on its own schedule: wait (bounded)
    // for the count to settle back, then compare
    let after = openDescriptors();
    for (let i = 0; i < 100 && after > before + 10; i++) {
      await sleep(100);
      after = openDescriptors();
    }
    // a leak keeps one file open per dropped download: about `clients` more descriptors
    expect({
      clients,
      moreDescriptors: after - before <= 10 ? 'at most 10' : after - before,
    }).toEqual({clients, moreDescriptors: 'at most 10'});
    // and a later client still gets the whole file
    const res = await new Promise<Buffer>((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1');
      const chunks: Buffer[] = [];
      socket.on('data', (d) => chunks.push(d));
      socket.on('close', () => resolve(Buffer.concat(chunks)));
      socket.on('error', reject);
      // HTTP/1.0: the body comes as is, not in chunks, and ends when the connection closes
      socket.write('GET /tf.min.js HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n');
    });
    const body = res.subarray(res.indexOf('\r\n\r\n') + 4);
    expect(statusOf(res.toString('latin1', 0, 20))).toBe(200);
    expect(body.length).toBe(fs.statSync(file).size);
    expect(body.equals(fs.readFileSync(file))).toBe(true);
    expect(exited).toBeNull();
  });
});
