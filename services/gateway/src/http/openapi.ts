import { z } from 'zod';
import {
  ErrorCode,
  HTTP_ROUTES,
  NDJSON_MEDIA_TYPE,
  PolicyDocumentWireSchema,
  PolicyWhatIfFrameSchema,
  WireErrorSchema,
  type HttpRoute,
  type HttpRouteName,
} from '@toolgate/contracts';
import { StoredPolicySchema } from '@toolgate/policy-runtime';
import { HTTP_STATUS_BY_CODE } from '../api/error-status';

type JsonSchema = Record<string, unknown>;

const POLICY_DOCUMENT_REF = '#/components/schemas/PolicyDocument';
const ERROR_REF = '#/components/schemas/Error';

/**
 * A zod schema as OpenAPI 3.1 (JSON Schema 2020-12) for one direction: `input` for what a client
 * sends (defaults optional), `output` for what it receives. The API's loose policy document is
 * replaced by a reference to the permission chain's own schema.
 */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, {
    io,
    unrepresentable: 'any',
    override: (ctx) => {
      if ((ctx.zodSchema as unknown) !== PolicyDocumentWireSchema) return;
      for (const key of Object.keys(ctx.jsonSchema)) delete ctx.jsonSchema[key];
      ctx.jsonSchema.$ref = POLICY_DOCUMENT_REF;
    },
  }) as JsonSchema;
  return rest;
}

const json = (schema: JsonSchema) => ({ content: { 'application/json': { schema } } });

/** One response per error status the route answers, naming the codes behind it. */
function errorResponses(route: HttpRoute): Record<string, unknown> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of route.errors) {
    const status = HTTP_STATUS_BY_CODE[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: Record<string, unknown> = {};
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) {
    const description = `error.code ${codes.join(' | ')}`;
    responses[String(status)] =
      route.produces === 'text/html'
        ? { description, content: { 'text/html': { schema: { type: 'string' } } } }
        : { description, ...json({ $ref: ERROR_REF }) };
  }
  return responses;
}

function parameters(route: HttpRoute): unknown[] | undefined {
  const path = Object.entries(route.params ?? {}).map(([name, schema]) => ({
    name,
    in: 'path',
    required: true,
    schema: jsonSchema(schema, 'input'),
  }));
  const shape = route.query?.shape ?? {};
  const query = Object.entries(shape).map(([name, schema]) => ({
    name,
    in: 'query',
    required: !(schema as z.ZodType).safeParse(undefined).success,
    schema: jsonSchema(schema as z.ZodType, 'input'),
  }));
  const all = [...path, ...query];
  return all.length ? all : undefined;
}

function successResponse(route: HttpRoute, name: HttpRouteName): Record<string, unknown> {
  if (route.produces === 'text/event-stream') {
    return {
      [route.status]: {
        description: 'An event stream (approval:pending, approval:resolved)',
        content: { 'text/event-stream': { schema: { type: 'string' } } },
      },
    };
  }
  if (route.produces === 'text/html') {
    return {
      [route.status]: {
        description: 'An HTML page',
        content: { 'text/html': { schema: { type: 'string' } } },
      },
    };
  }
  const schema = jsonSchema(route.response!, 'output');
  if (name === 'whatIfPolicy') {
    return {
      '200': {
        description: 'Every call whose verdict the candidate changes, and counts',
        content: {
          'application/json': { schema },
          [NDJSON_MEDIA_TYPE]: { schema: jsonSchema(PolicyWhatIfFrameSchema, 'output') },
        },
      },
    };
  }
  if (name === 'submitDispatch') {
    return {
      '200': { description: 'Settled within `wait`', ...json(schema) },
      '202': { description: 'Accepted (or replayed) and not settled yet', ...json(schema) },
    };
  }
  return { [route.status]: { description: 'Success', ...json(schema) } };
}

/** The OpenAPI 3.1 description of the HTTP API, built from the route table; `/v1/openapi.json`. */
export function buildOpenApiDocument(): JsonSchema {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [name, route] of Object.entries(HTTP_ROUTES) as [HttpRouteName, HttpRoute][]) {
    const parameterList = parameters(route);
    (paths[route.path] ??= {})[route.method] = {
      operationId: name,
      summary: route.summary,
      tags: [route.path.split('/')[2]],
      ...(route.auth === 'link' ? { security: [] } : {}),
      ...(parameterList ? { parameters: parameterList } : {}),
      ...(route.body
        ? { requestBody: { required: true, ...json(jsonSchema(route.body, 'input')) } }
        : {}),
      responses: { ...successResponse(route, name), ...errorResponses(route) },
    };
  }
  const tags = [...new Set(Object.values(HTTP_ROUTES).map((r) => r.path.split('/')[2]))];
  return {
    openapi: '3.1.0',
    info: {
      title: 'Toolgate gateway',
      version: '1',
      description:
        'Tool-call dispatch plane for AI agents. Bearer tokens are per tenant with scopes dispatch, approve, admin. Errors are { error: { code, message, details } } with stable codes; the status of each code comes from one table.',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    servers: [
      {
        url: '/',
        description: 'The gateway serving this document (GATEWAY_PORT, default 8080)',
      },
    ],
    tags: tags.map((name) => ({ name, description: `/v1/${name}` })),
    security: [{ bearer: [] }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: {
        Error: {
          ...jsonSchema(z.object({ error: WireErrorSchema }), 'output'),
          description: 'A typed error: check error.code, never the message',
        },
        PolicyDocument: {
          ...jsonSchema(StoredPolicySchema, 'input'),
          description:
            'A tenant policy: the permission chain’s layers (engine, profiles), approvals settings, remote hooks and the error cap',
        },
      },
    },
    paths,
  };
}

let built: JsonSchema | undefined;

/**
 * The document, built on first use and kept: it does not change while the gateway runs, and
 * building it (zod to JSON Schema for every route) is work most processes importing the gateway
 * never need.
 */
export function openApiDocument(): JsonSchema {
  built ??= buildOpenApiDocument();
  return built;
}
