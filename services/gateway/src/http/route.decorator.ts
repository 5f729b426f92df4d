import {
  applyDecorators,
  HttpCode,
  RequestMapping,
  RequestMethod,
  SetMetadata,
} from '@nestjs/common';
import { expressPath, HTTP_ROUTES, type HttpRouteName } from '@toolgate/contracts';

/** Metadata key under which a handler records the route table entry it serves. */
export const ROUTE_NAME = 'toolgate:route';

const METHODS = {
  get: RequestMethod.GET,
  post: RequestMethod.POST,
  put: RequestMethod.PUT,
} as const;

/**
 * Serves the route table's entry `name` (contracts' `HTTP_ROUTES`): its method, its path (on a
 * controller mounted at the root) and its success status are taken from the table, never written
 * here, so the controllers, the OpenAPI document and the CLI cannot disagree on them.
 */
export function Route(name: HttpRouteName): MethodDecorator {
  const route = HTTP_ROUTES[name];
  return applyDecorators(
    RequestMapping({ path: expressPath(name), method: METHODS[route.method] }),
    HttpCode(route.status),
    SetMetadata(ROUTE_NAME, name),
  );
}
