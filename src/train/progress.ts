/** Training progress: a bar on a terminal, plain periodic lines otherwise. */
export interface ProgressSink {
  isTTY?: boolean;
  columns?: number;
  write(s: string): unknown;
}

export class Progress {
  private readonly tty: boolean;
  private epochStart = 0;
  private lastQuarter = -1;

  constructor(
    private readonly out: ProgressSink,
    private readonly epochs: number,
    private readonly batches: number,
  ) {
    this.tty = Boolean(out.isTTY);
  }

  startEpoch(): void {
    this.epochStart = Date.now();
    this.lastQuarter = -1;
  }

  batch(epoch: number, batch: number, logs: Record<string, number>): void {
    const done = batch + 1;
    const metrics = `loss ${logs.loss?.toFixed(4) ?? '?'}${logs.acc !== undefined ? ` acc ${logs.acc.toFixed(4)}` : ''}`;
    if (this.tty) {
      const width = Math.max(10, Math.min(30, (this.out.columns ?? 80) - 60));
      const filled = Math.round((done / this.batches) * width);
      const bar =
        '='.repeat(Math.max(0, filled - 1)) + (filled > 0 ? '>' : '') + '.'.repeat(width - filled);
      this.out.write(
        `\rEpoch ${epoch + 1}/${this.epochs} [${bar}] ${done}/${this.batches} ${metrics}   `,
      );
    } else if (this.batches >= 8) {
      const quarter = Math.floor((done / this.batches) * 4);
      if (quarter > this.lastQuarter && quarter > 0 && quarter < 4) {
        this.lastQuarter = quarter;
        this.out.write(
          `epoch ${epoch + 1}/${this.epochs}: ${done}/${this.batches} batches, ${metrics}\n`,
        );
      }
    }
  }

  endEpoch(epoch: number, logs: Record<string, number>, metricName: string, metric: number): void {
    const secs = ((Date.now() - this.epochStart) / 1000).toFixed(1);
    const line =
      `epoch ${epoch + 1}/${this.epochs}: loss ${logs.loss.toFixed(4)}` +
      (logs.acc !== undefined ? `, acc ${logs.acc.toFixed(4)}` : '') +
      `, validation ${metricName} ${(100 * metric).toFixed(2)}% (${secs}s)`;
    this.out.write(this.tty ? `\r${line}${' '.repeat(20)}\n` : `${line}\n`);
  }
}

/**
 * Progress of reading a model's weights (`loadKerasModel`'s `onProgress`): on a terminal one bar
 * redrawn in place, ended by a newline at 100%; otherwise a line at 0, 25, 50, 75 and 100%.
 */
export function readingProgress(
  out: ProgressSink,
  label = 'reading weights',
): (fraction: number) => void {
  const tty = Boolean(out.isTTY);
  let lastQuarter = -1;
  let ended = false;
  return (fraction: number) => {
    const f = Math.min(1, Math.max(0, fraction));
    if (ended) return;
    if (tty) {
      const width = 30;
      const filled = Math.round(f * width);
      out.write(
        `\r${label} [${'='.repeat(filled)}${'.'.repeat(width - filled)}] ${Math.floor(f * 100)}%`,
      );
      if (f === 1) out.write('\n');
    } else {
      const quarter = Math.floor(f * 4);
      if (quarter > lastQuarter) {
        lastQuarter = quarter;
        out.write(`${label}: ${quarter * 25}%\n`);
      }
    }
    ended = f === 1;
  };
}
