import type { JSONRPCMessage, ReadBuffer, Transport } from '@modelcontextprotocol/client';
import type { SandboxedProcess } from '@toolgate/sandbox';
import { mcpClientSdk } from './mcp-client-sdk';

/**
 * The SDK's stdio framing (newline-delimited JSON-RPC, its own `ReadBuffer` and `serializeMessage`)
 * over a process the sandbox started. The SDK's `StdioClientTransport` spawns its child itself,
 * on the host, with an environment it adds to; this one talks to a {@link SandboxedProcess} and
 * nothing else. A message longer than `maxMessageBytes` is an error that closes the transport
 * (and kills the process): what a server can make Toolgate buffer is bounded.
 */
export class SandboxedStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private readonly buffer: ReadBuffer;
  private closed = false;

  constructor(
    private readonly proc: SandboxedProcess,
    maxMessageBytes: number,
  ) {
    this.buffer = new (mcpClientSdk().ReadBuffer)({ maxBufferSize: maxMessageBytes });
  }

  async start(): Promise<void> {
    this.proc.stdout.on('data', (chunk: Buffer) => {
      try {
        this.buffer.append(chunk);
        for (;;) {
          let message: JSONRPCMessage | null;
          try {
            message = this.buffer.readMessage();
          } catch (err) {
            // One line that is not JSON-RPC: reported, and the next line is read.
            this.onerror?.(err as Error);
            continue;
          }
          if (message === null) break;
          this.onmessage?.(message);
        }
      } catch (err) {
        this.onerror?.(err as Error);
        void this.close();
      }
    });
    this.proc.stdout.on('error', (err: Error) => this.onerror?.(err));
    void this.proc.exited.then(() => this.closedNow());
  }

  send(message: JSONRPCMessage): Promise<void> {
    if (this.closed || !this.proc.alive) {
      return Promise.reject(new Error('the MCP server process is not running'));
    }
    return new Promise((resolve) => {
      if (this.proc.stdin.write(mcpClientSdk().serializeMessage(message))) resolve();
      else this.proc.stdin.once('drain', () => resolve());
    });
  }

  /** Kills the process (its whole sandbox) and resolves once it is gone. */
  async close(): Promise<void> {
    await this.proc.kill();
    this.closedNow();
  }

  private closedNow(): void {
    if (this.closed) return;
    this.closed = true;
    this.buffer.clear();
    this.onclose?.();
  }
}
