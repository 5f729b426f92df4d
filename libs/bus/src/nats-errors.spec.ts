import {
  ClosedConnectionError,
  ConnectionError,
  DrainingConnectionError,
  InvalidArgumentError,
  NoRespondersError,
  RequestError,
  TimeoutError,
} from '@nats-io/transport-node';
import { ErrorCode, ToolgateError } from '@toolgate/contracts';
import {
  NoRespondersError as InboxNoResponders,
  RequestClosedError,
  RequestTimeoutError,
} from './inbox-requests';
import { JetStreamApiError, JetStreamError } from '@nats-io/jetstream';
import { isPullHeartbeatLost, messagingFailure } from './nats-errors';

describe('messagingFailure', () => {
  it.each<[string, Error]>([
    ['a client timeout', new TimeoutError()],
    ['no responders', new NoRespondersError('x.y')],
    ['a lost connection', new ConnectionError('connection refused')],
    ['a closed connection', new ClosedConnectionError()],
    ['a draining connection', new DrainingConnectionError()],
    ['a failed request', new RequestError('connection disconnected')],
    ['an inbox request timeout', new RequestTimeoutError(5000)],
    ['an inbox request with no responders', new InboxNoResponders('x.y')],
    ['an inbox request on a closed connection', new RequestClosedError('closed')],
    [
      'a stream without a leader (the JetStream API answering 503)',
      new JetStreamApiError({
        code: 503,
        err_code: 10008,
        description: 'JetStream system temporarily unavailable x.y',
      }),
    ],
    [
      'a JetStream server failing mid-change (500)',
      new JetStreamApiError({ code: 500, err_code: 10009, description: 'not leader x.y' }),
    ],
  ])('maps %s to a retryable unavailable that names the peer', (_what, err) => {
    const typed = messagingFailure(err, 'the message broker');
    expect(typed?.code).toBe(ErrorCode.Unavailable);
    expect(typed?.retryable).toBe(true);
    expect(typed?.message).toMatch(/^the message broker /);
    expect(typed?.cause).toBe(err);
    // The NATS error's own text stays behind (it may name hosts and subjects).
    expect(JSON.stringify(typed?.toWire())).not.toContain('x.y');
  });

  it('maps a message over max_payload to too-large', () => {
    const err = InvalidArgumentError.format('payload', 'max_payload size exceeded');
    expect(messagingFailure(err, 'the message broker')?.code).toBe(ErrorCode.TooLarge);
  });

  it.each<[string, unknown]>([
    ['a typed error', new ToolgateError(ErrorCode.NotFound, 'x')],
    ['a bug', new TypeError('cannot read properties of undefined')],
    [
      'a refusal of the stream',
      new JetStreamApiError({ code: 400, err_code: 10071, description: 'wrong last sequence' }),
    ],
    ['another invalid argument', InvalidArgumentError.format('subject', 'is empty')],
    ['a thrown string', 'timeout'],
  ])('leaves %s alone', (_what, err) => {
    expect(messagingFailure(err, 'the message broker')).toBeUndefined();
  });
});

describe('isPullHeartbeatLost', () => {
  it("is a pull the client ended after the broker's idle heartbeats stopped, and nothing else", () => {
    expect(isPullHeartbeatLost(new JetStreamError('heartbeats missed'))).toBe(true);
    expect(isPullHeartbeatLost(new JetStreamError('consumer deleted'))).toBe(false);
    expect(isPullHeartbeatLost(new Error('heartbeats missed'))).toBe(false);
    expect(isPullHeartbeatLost(new ConnectionError('connection refused'))).toBe(false);
    expect(isPullHeartbeatLost(undefined)).toBe(false);
  });
});
