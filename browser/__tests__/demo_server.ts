/**
 * The demo page's server for the browser tests: `node demo/serve.mjs --port 0` started from the
 * package's root, and the URL it prints (rejected after a minute without one, or if it exits).
 */
import {ChildProcess, spawn} from 'child_process';
import * as path from 'path';

export function startDemoServer(root: string): {server: ChildProcess; url: Promise<string>} {
  const server = spawn(process.execPath, [path.join(root, 'demo', 'serve.mjs'), '--port', '0'], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`no URL from the demo server: ${out}`)), 60000);
    server.stdout?.on('data', (d) => {
      out += String(d);
      const m = /http:\/\/127\.0\.0\.1:\d+\//.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[0]);
      }
    });
    server.on('exit', (code) => reject(new Error(`the demo server exited (${code}): ${out}`)));
  });
  return {server, url};
}
