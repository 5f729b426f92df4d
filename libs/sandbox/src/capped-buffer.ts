/** Keeps the first `max` bytes of a stream and drops the rest (the pipe keeps draining). */
export class CappedBuffer {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  /** More than `max` bytes arrived; what is kept is their prefix. */
  truncated = false;

  constructor(private readonly max: number) {}

  push(chunk: Buffer): void {
    const room = this.max - this.size;
    if (room <= 0) {
      if (chunk.length > 0) this.truncated = true;
      return;
    }
    const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
    if (kept !== chunk) this.truncated = true;
    this.chunks.push(kept);
    this.size += kept.length;
  }

  bytes(): Buffer {
    return Buffer.concat(this.chunks);
  }

  /** The kept bytes as UTF-8; a character cut in half at the cap becomes U+FFFD. */
  text(): string {
    return this.bytes().toString('utf8');
  }

  /** The last `bytes` of what was kept, as UTF-8. */
  tail(bytes: number): string {
    const all = this.bytes();
    return all.subarray(Math.max(0, all.length - bytes)).toString('utf8');
  }
}
