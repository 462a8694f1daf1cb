/** Reading a local file by range (src/io/random_access_file.ts). */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import {hasSyncFs, openRandomAccess} from '../../src/io/random_access_file';

describe('openRandomAccess', () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'random-access-'));
  });
  afterAll(() => fs.rmSync(dir, {recursive: true, force: true}));

  it('reads ranges into a buffer at an offset; closed, it refuses', () => {
    const file = path.join(dir, 'a.bin');
    fs.writeFileSync(
      file,
      Uint8Array.from({length: 300}, (_, i) => i % 251),
    );
    const f = openRandomAccess(fs, file);
    expect(f.size).toBe(300);
    const out = new Uint8Array(10).fill(255);
    f.read(out, 2, 5, 250);
    expect([...out]).toEqual([255, 255, 250, 0, 1, 2, 3, 255, 255, 255]);
    f.close();
    expect(() => f.read(out, 0, 1, 0)).toThrow(`reading ${file}: the file was closed`);
    f.close(); // twice is harmless
  });

  it('a file cut short after it was opened: the read says so rather than leaving zeros', () => {
    const file = path.join(dir, 'b.bin');
    fs.writeFileSync(file, new Uint8Array(100).fill(7));
    const f = openRandomAccess(fs, file);
    fs.truncateSync(file, 40);
    expect(() => f.read(new Uint8Array(20), 0, 20, 30)).toThrow(
      `reading ${file}: expected 20 bytes at byte 30, the file ended after 10 (it changed while it was read)`,
    );
    f.close();
  });

  it("hasSyncFs: Node's fs has what it needs; an fs of promises alone does not", () => {
    expect(hasSyncFs(fs)).toBe(true);
    expect(hasSyncFs({promises: fs.promises})).toBe(false);
    expect(hasSyncFs(null)).toBe(false);
  });
});
